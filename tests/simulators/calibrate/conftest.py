"""Fixtures of the calibrate tests: a hand-made table of final metrics, as ``predict.run_all`` returns it."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from simulators.calibrate import predict

TableMaker = Callable[[np.ndarray, float], dict[str, np.ndarray]]


@pytest.fixture
def prediction_table() -> TableMaker:
    """``make(gain_D, tuned_extra)``: a (draws, 2 seeds) table where GRPO at the planned lr ends every metric at
    0.5, GRPO at x2 the planned lr (the best on validation: tuned GRPO) at 0.5 + ``tuned_extra``, at x0.5 at 0.4,
    and every method and matched baseline at 0.5 + gain_D[j] in world j (both seeds): its gain over GRPO at the
    planned lr is gain_D, over tuned GRPO gain_D - tuned_extra."""
    def make(gain_D: np.ndarray, tuned_extra: float) -> dict[str, np.ndarray]:
        gain = np.repeat(np.asarray(gain_D, float)[:, None], 2, axis=1)
        flat = np.full_like(gain, 0.5)
        table: dict[str, np.ndarray] = {"matched_c1": np.ones(len(gain)), "matched_c2": np.ones(len(gain))}
        for metric in [m for m, _ in predict.METRICS] + ["val/accuracy"]:
            for scale, value in ((0.5, flat - 0.1), (1.0, flat), (2.0, flat + tuned_extra)):
                table[f"grpo@{scale:g}|{metric}"] = value
            for label in ("grpo_matched_c1", "grpo_matched_c2", *predict.METHODS):
                table[f"{label}|{metric}"] = flat + gain
        return table

    return make
