"""Step matching: the GRPO baseline that takes a reweighting method's larger step without its reweighting.

One definition everywhere (the simulator's studies, the CPU learning study, calibration)::

    step-matched GRPO = GRPO with every advantage multiplied by one constant c
    first moment   c1 = mean_t E_i[m_i]                                  (the same mean step)
    second moment  c2 = sqrt(mean_t sum_i a_i m_i^2 / sum_i a_i)         (the same mean squared step)

measured on the method's own runs over all seeds and logged steps t; a_i = n_i when prompt i's rewards
are not all equal, else 0. The baseline scales the advantages (``loss.adv_scale``), never the learning
rate, which differs under AdamW. The moments come from the step record (``multiplier_mean``,
``multiplier_sq_mean``). Why these two moments: docs/studies-notes.md#studykit-stepmatch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from gdro_lab.functional.diagnostics import multiplier_moments

MEAN_KEY = "multiplier_mean"
SQUARE_KEY = "multiplier_sq_mean"


@dataclass(frozen=True)
class MatchFactors:
    """The two step-matching constants of one method (1.0 and 1.0 for a method that does not reweight)."""

    first: float
    """c1 = E[m]: GRPO's advantages (simulator: lr) times c1 takes the same mean step."""
    second: float
    """c2 = sqrt(E_a[m^2]) over the advantage-carrying rollouts: the same mean squared step (what a price
    ~ step^2 charges)."""

    def as_dict(self) -> dict[str, float]:
        return {"first": self.first, "second": self.second}


def moments(multipliers_P: Any, active_P: Any | None = None) -> tuple[float, float]:
    """(E_i[m_i], sum_i a_i m_i^2 / sum_i a_i) of one step: the step record's two scalars, computed by the
    record's own rule (gdro_lab.functional.diagnostics.multiplier_moments)."""
    return multiplier_moments(multipliers_P, active_P)


def match_factors(runs_scalars: Sequence[Mapping[str, Any]]) -> MatchFactors:
    """c1 and c2 of a method from its runs' step scalars (one mapping name -> per-step array per run).

    Every logged step of every run counts once (each step trains the same number of prompts).
    A run without the two scalars is an error: its log predates them, so the factor is unknown.
    """
    first: list[np.ndarray] = []
    second: list[np.ndarray] = []
    for index, scalars in enumerate(runs_scalars):
        if MEAN_KEY not in scalars or SQUARE_KEY not in scalars:
            raise ValueError(f"run {index} logs no {MEAN_KEY}/{SQUARE_KEY}: it was written before step matching "
                             "measured both moments; rerun it")
        first.append(np.asarray(scalars[MEAN_KEY], float))
        second.append(np.asarray(scalars[SQUARE_KEY], float))
    if not first:
        raise ValueError("step matching needs at least one run of the method")
    m1, m2 = np.concatenate(first), np.concatenate(second)
    if not np.isfinite(m1).any() or not np.isfinite(m2).any():
        raise ValueError("step matching found no logged step with a multiplier")
    return MatchFactors(first=float(np.nanmean(m1)), second=float(np.sqrt(np.nanmean(m2))))
