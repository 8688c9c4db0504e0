"""Rollout-GDRO's per-step arm arithmetic: sampling, the cost estimate and the mirror-descent step (§3.3).

The rules of :mod:`gdro_lab.functional.update_rules` in forms that give the same values bit for bit
with fewer numpy calls (inverse-CDF sampling, the one-entry bandit update, the (G, A) full-feedback
cost table). They assume every bin is present this step; otherwise the caller uses the update_rules
forms. Checked against them by tests/gdro_lab/controllers/test_rollout_gdro.py. Detail:
docs/core-controllers-notes.md#gdro_lab-controllers-arm_updates.
"""

from __future__ import annotations

import math

import numpy as np

from gdro_lab._rows import row_max, row_starts, row_sum


def probabilities_and_log_softmax(logits_GA: np.ndarray, gamma: float, centered: bool = False
                                  ) -> tuple[np.ndarray, np.ndarray]:
    """(EXP3P's p_b = (1 - gamma) softmax(L_b) + gamma / A, exactly as ``exp3p_probabilities``; log softmax(L_b)
    = (L_b - max L_b) - log sum exp(L_b - max L_b)) of a non-empty (G, A) table, sharing the exponentials.
    ``centered``: every row's max is already 0.0 (the steps below leave it so), and L - 0.0 = L bit for bit."""
    shifted = logits_GA if centered else logits_GA - row_max(logits_GA)
    soft = np.exp(shifted)
    sums = row_sum(soft)[:, None]
    soft /= sums
    return (1.0 - gamma) * soft + gamma / logits_GA.shape[1], shifted - np.log(sums)


def sample_arms(probs_GA: np.ndarray, draws_G: np.ndarray, n_min: int) -> list[int]:
    """Arm value per bin drawn from p_b with uniform draws u_b: n_min + #(cumsum(p_b) < u_b), at most the last arm.
    (numpy's cumsum along a row adds left to right, as a sequential sum on Python floats.)"""
    rows, width = probs_GA.shape
    below = np.cumsum(probs_GA, axis=1) < draws_G[:, None]
    counts = np.add.reduceat(below.ravel(), row_starts(rows, width), dtype=np.intp)
    return (np.minimum(counts, width - 1) + n_min).tolist()


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
    scale = float(np.dot(share_G, v)) if share_G.sum() > 0 else float(v.mean())
    if scale <= 0:
        return np.ones(v.size)
    return np.maximum(v / scale, floor)


def relative_variance_list(variance_G: np.ndarray, share_G: np.ndarray, floor: float) -> list[float]:
    """:func:`relative_variance` as a list (the same values), on Python floats when every v_b is known."""
    values = variance_G.tolist()
    if not all(map(math.isfinite, values)) or not np.add.reduce(share_G) > 0:
        return relative_variance(variance_G, share_G, floor).tolist()
    scale = float(np.dot(share_G, variance_G))
    if scale <= 0:
        return [1.0] * len(values)
    return [max(value / scale, floor) for value in values]


def bandit_step(logits_GA: np.ndarray, probs_GA: np.ndarray, relative_G: list[float], sampled: list[int],
                n_min: int, mu: float, n_bar: int, eta: float, decay: float) -> np.ndarray:
    """New logits after the EXP3P mirror step on the sampled arms (every bin present), re-centred to max 0."""
    moved = logits_GA.copy() if decay == 0.0 else (1.0 - decay) * logits_GA
    flat = moved.reshape(-1)  # a view of the fresh array
    num_arms = moved.shape[1]
    for g, (v, n) in enumerate(zip(relative_G, sampled)):
        at = g * num_arms + n - n_min
        arm = float(n)
        cost = v * n_bar / arm + mu * arm / n_bar                         # = arm_costs at the sampled arm
        flat[at] = flat.item(at) - eta * (cost / probs_GA.item(at))      # = importance_weighted_cost, mirror_descent_step
    moved -= row_max(moved)
    return moved


def full_step(logits_GA: np.ndarray, relative_G: list[float], arms_A: np.ndarray, mu: float, n_bar: int,
              eta: float, decay: float) -> np.ndarray:
    """New logits after the mirror step on every arm's cost (every bin present), re-centred to max 0."""
    cost = (np.array(relative_G) * n_bar)[:, None] / arms_A + mu * arms_A / n_bar  # = arm_costs
    moved = (logits_GA if decay == 0.0 else (1.0 - decay) * logits_GA) - eta * cost
    moved -= row_max(moved)
    return moved
