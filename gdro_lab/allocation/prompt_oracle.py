"""The per-prompt optimum of the variance proxy and the SE proxies per prompt (Eq. 28 and 33 with P bins).

V(n) = (1/P) sum_i v_i / n_i and WSE(n) = (1/P) sum_i sigma_i / sqrt(n_i); the oracle is the exact integer
minimiser of V under sum_i n_i = P n_bar in [n_min, n_max] (Thm 4.2 per prompt, by the greedy of
:mod:`gdro_lab.allocation.separable`); reductions are 100 (1 - X(n) / X(n_bar)). Detail:
docs/core-allocation-notes.md#gdro_lab-allocation-prompt_oracle.
"""

from __future__ import annotations

import numpy as np

from gdro_lab.allocation.separable import separable_plan
from gdro_lab.checks import as_float_array


def oracle_plan(variance_P: np.ndarray, total: int, n_min: int, n_max: int) -> np.ndarray:
    """argmin_n sum_i v_i / n_i, sum n = total, n in [n_min, n_max] (int64; ties to the earlier prompt)."""
    v = as_float_array("oracle_plan", "variance_P", variance_P, ndim=1, nonnegative=True)
    arms = np.arange(n_min, n_max + 1, dtype=float)
    return separable_plan(v[:, None] * (1.0 / arms[:-1] - 1.0 / arms[1:]), total, n_min)


def prompt_se_report(variance_P: np.ndarray, n_P: np.ndarray, n_bar: float) -> dict[str, float]:
    """Per-prompt reductions of a plan against uniform n_bar: Eq. 28 ('var') and Eq. 33 ('wse'), in %.

    NaN when every prompt has zero variance (nothing to reduce).
    """
    v = as_float_array("prompt_se_report", "variance_P", variance_P, ndim=1, nonnegative=True)
    n = np.asarray(n_P, float)
    uniform_var, uniform_wse = float(v.sum()) / n_bar, float(np.sqrt(v).sum()) / np.sqrt(n_bar)
    if not uniform_var > 0:
        return {"var_reduction_pct": float("nan"), "wse_reduction_pct": float("nan")}
    return {"var_reduction_pct": 100.0 * (1.0 - float((v / n).sum()) / uniform_var),
            "wse_reduction_pct": 100.0 * (1.0 - float((np.sqrt(v) / np.sqrt(n)).sum()) / uniform_wse)}
