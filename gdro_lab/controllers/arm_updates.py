"""Rollout-GDRO's per-step arm arithmetic: sampling, and the relative variance its costs use (§3.3). The cost estimate and the mirror-descent step are the rules of
:mod:`gdro_lab.functional.update_rules`. Detail: docs/core-controllers-notes.md#gdro_lab-controllers-arm_updates.
"""

from __future__ import annotations

import numpy as np

from gdro_lab._rows import row_starts


def sample_arms(probs_GA: np.ndarray, draws_G: np.ndarray, n_min: int) -> np.ndarray:
    """Arm value per bin drawn from p_b with uniform draws u_b: n_min + #(cumsum(p_b) < u_b), at most the last arm.
    (numpy's cumsum along a row adds left to right, as a sequential sum on Python floats.)"""
    rows, width = probs_GA.shape
    below = np.cumsum(probs_GA, axis=1) < draws_G[:, None]
    counts = np.add.reduceat(below.ravel(), row_starts(rows, width), dtype=np.intp)
    return (np.minimum(counts, width - 1) + n_min).astype(np.int64, copy=False)


def relative_variance(variance_G: np.ndarray, share_G: np.ndarray, floor: float) -> np.ndarray:
    """v~_b = v_b / sum_j q_j v_j, floored (unknown bins: the mean of the known ones; ones if none is known
    or the scale is not positive; the mean of v scales when no bin has a share)."""
    v = variance_G
    known = np.isfinite(v)
    if not known.all():
        if not known.any():
            return np.ones(v.size)
        v = v.copy()
        v[~known] = v[known].mean()
    scale = float(np.dot(share_G, v)) if np.add.reduce(share_G) > 0 else float(v.mean())
    if scale <= 0:
        return np.ones(v.size)
    return np.maximum(v / scale, floor)


