"""Predicted vs measured on the LM study: the measured side read from the study's summary.json, paired by seed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simulators.calibrate.lmcompare import comparison_rows, measured

SUMMARY = {
    "final": {"grpo": {"pass@1": [0.30, 0.32, 0.31], "pass@8": [0.50, 0.48, 0.49]},
              "grpo_matched_first": {"pass@1": [0.31, 0.32, 0.33], "pass@8": [0.49, 0.47, 0.47]},
              "prompt_gdro": {"pass@1": [0.31, 0.33, 0.31], "pass@8": [0.51, 0.49, 0.50]}},
    "initial": {"pass@1": [0.25, 0.26, 0.25], "pass@8": [0.52, 0.51, 0.53]},
    "tuned_grpo": {"final": {"pass@1": [0.32, 0.33, 0.31], "pass@8": [0.49, 0.48, 0.50]}},
}


def hand_ci(values: list[float]) -> tuple[float, float]:
    v = np.array(values)
    return float(v.mean()), float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


def test_measured_gains_are_paired_by_seed() -> None:
    out = measured(SUMMARY)
    assert out["prompt_gdro"]["pass@1"] == pytest.approx(hand_ci([0.01, 0.01, 0.0]))
    assert out["grpo_matched_c1"]["pass@8"] == pytest.approx(hand_ci([-0.01, -0.01, -0.02]))
    assert out["grpo_vs_start"]["pass@1"] == pytest.approx(hand_ci([0.05, 0.06, 0.06]))
    assert out["prompt_gdro"]["vs_tuned"]["pass@1"] == pytest.approx(hand_ci([-0.01, 0.0, 0.0]))
    assert "rollout_gdro" not in out


def test_rows_compare_and_flag_inconsistent_predictions() -> None:
    def entry(median: float, lo: float, hi: float) -> dict[str, float]:  # gdro predict's summary of a gain
        return {"median": median, "wide_lo": lo, "wide_hi": hi}  # lmcompare reads the printed (widened) interval

    predicted = {"grpo_vs_start": {"test/accuracy": entry(0.055, 0.04, 0.065), "test/pass@8": entry(0.10, 0.09, 0.11)},
                 "methods": {"grpo_matched_c1": {m: {"vs_grpo": entry(0, 0, 0), "vs_tuned": entry(0, 0, 0)}
                                                 for m in ("test/accuracy", "test/pass@8")},
                             "prompt_gdro": {m: {"vs_grpo": entry(0.006, 0.002, 0.01),
                                                 "vs_tuned": entry(-0.01, -0.014, -0.006)}
                                             for m in ("test/accuracy", "test/pass@8")}}}
    rows = {(r["comparison"], r["metric"]): r for r in comparison_rows(predicted, measured(SUMMARY))}
    start = rows[("GRPO − warm start", "pass@1")]
    meas = hand_ci([0.05, 0.06, 0.06])
    assert start["error"][0] == pytest.approx(meas[0] - 0.055)
    # measured above the median: the predicted interval's upper side (0.01), not its lower one (0.015)
    assert meas[0] > 0.055 and start["error"][1] == pytest.approx(math.hypot(meas[1], 0.065 - 0.055))
    assert start["consistent"]
    below = rows[("GRPO − warm start", "pass@8")]
    assert not below["consistent"]  # measured -2 pp, predicted +10 pp
    assert below["error"][1] == pytest.approx(math.hypot(below["measured"][1], 0.10 - 0.09))  # the lower side
    assert ("Prompt-GDRO − GRPO", "pass@1") in rows and ("step-matched GRPO (c1 = E[m]) − GRPO", "pass@8") in rows
    tuned = rows[("Prompt-GDRO − tuned GRPO", "pass@1")]
    assert tuned["predicted"] == (-0.01, -0.014, -0.006) and tuned["measured"][0] == pytest.approx(-1 / 300)
