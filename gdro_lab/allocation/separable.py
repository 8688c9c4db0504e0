"""Exact integer plans for separable concave per-prompt objectives under an exact budget.

    max sum_i f_i(n_i)   s.t.   sum_i n_i = total,   n_min <= n_i <= n_max,   f_i concave in n

by the greedy on marginal gains (exact); ties go to the lower increment, then the earlier prompt, so a
plan is deterministic. Tested against brute force (tests/gdro_lab/allocation/test_separable.py). Why it is
exact: docs/core-allocation-notes.md#gdro_lab-allocation-separable.
"""

from __future__ import annotations

import numpy as np

from gdro_lab.checks import as_float_array, check_total


def separable_plan(gains_PK: np.ndarray, total: int, n_min: int) -> np.ndarray:
    """n_P maximising sum_i f_i(n_i), sum n = total, n in [n_min, n_min + K], from increments.

    ``gains_PK[i, k]`` = f_i(n_min + k + 1) - f_i(n_min + k) (finite; non-increasing along k for
    the plan to be exact). Shapes: (P, K) in, (P,) int64 out.
    """
    gains = as_float_array("separable_plan", "gains_PK", gains_PK, ndim=2)
    num_prompts, num_steps = gains.shape
    total = check_total("separable_plan", total, num_prompts, n_min, n_min + num_steps)
    need = total - num_prompts * n_min
    n_P = np.full(num_prompts, n_min, np.int64)
    if need == 0 or num_prompts == 0:
        return n_P
    if need == num_prompts * num_steps:
        return n_P + num_steps
    flat = gains.T.ravel()  # k-major: ties go to the lower k, then the earlier prompt
    kth = flat.size - need
    threshold = np.partition(flat, kth)[kth]  # the need-th largest increment (O(P K), no full sort)
    chosen = flat > threshold
    ties = np.flatnonzero(flat == threshold)[: need - int(chosen.sum())]
    chosen[ties] = True
    return n_P + np.bincount(np.flatnonzero(chosen) % num_prompts, minlength=num_prompts)


def plan_value(values_PA: np.ndarray, n_P: np.ndarray, n_min: int) -> float:
    """sum_i values_PA[i, n_i - n_min]: the objective of a plan given each prompt's value per arm."""
    values = np.asarray(values_PA, float)
    index = np.asarray(n_P, np.int64) - n_min
    return float(values[np.arange(values.shape[0]), index].sum())
