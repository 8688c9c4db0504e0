"""Every update rule of the two controllers as a pure function, one per equation (§3.2-3.3, §4).

No rule is written inline anywhere else; each returns new arrays. Shapes: ``G`` bins, ``A`` arms.
"Absent" bins (NaN observations or a False ``present_G``) keep their state bit-for-bit. Plain-Python
forms: docs/core-controllers-notes.md#gdro_lab-functional-update_rules.
"""

from __future__ import annotations

import math

import numpy as np

from gdro_lab._rows import row_max, row_sum


def ema_from_first(previous_G: np.ndarray | list[float], observed_G: np.ndarray | list[float],
                   beta: float) -> np.ndarray:
    """Eq. 12 with the released code's start: S = x at a bin's first observation, then
    S <- (1 - beta) S + beta x.

    ``previous_G`` holds NaN for bins never observed; ``observed_G`` holds NaN for bins absent
    this step (their state is returned unchanged). Lists of Python floats (the controllers' per-step
    call, G ~ 10 bins) take a per-bin loop: the same operations, so the same values bit for bit.
    """
    if isinstance(previous_G, list) and isinstance(observed_G, list):
        return np.array([previous if not math.isfinite(observed) else observed if not math.isfinite(previous)
                         else (1.0 - beta) * previous + beta * observed
                         for previous, observed in zip(previous_G, observed_G)])
    previous = np.asarray(previous_G, float)
    observed = np.asarray(observed_G, float)
    blended = (1.0 - beta) * previous + beta * observed  # NaN wherever either side is unknown
    return np.where(np.isfinite(observed), np.where(np.isfinite(previous), blended, observed), previous)


def debiased_signal(mean_G: np.ndarray | list[float], share_G: np.ndarray | list[float], floor: float) -> np.ndarray:
    """Debiasing of Eq. 13 before the EMA: x_b = l_bar_b / max(B q_hat_b, floor); NaN (absent bins) stays NaN.
    Lists of Python floats take a per-bin loop: the same operations, the same values bit for bit."""
    if isinstance(mean_G, list) and isinstance(share_G, list):
        num_bins = len(share_G)
        return np.array([mean / max(num_bins * share, floor) for mean, share in zip(mean_G, share_G)])
    share = np.asarray(share_G, float)
    return np.asarray(mean_G, float) / np.maximum(share.size * share, floor)


def omega(score_G: np.ndarray | list[float], eta: float, clip: float) -> np.ndarray:
    """Eq. 14: omega_b = exp(eta clip(S_b, -C, C)).

    A list of Python floats (the controller's per-step call, G ~ 10 bins) is computed in plain Python,
    where numpy's per-call cost exceeds the arithmetic; equal to the array statement up to rounding
    (tests/gdro_lab/functional/test_update_rules.py).
    """
    if isinstance(score_G, list):
        return np.array([math.exp(eta * min(max(value, -clip), clip)) for value in score_G])
    return np.exp(eta * np.minimum(np.maximum(np.asarray(score_G, float), -clip), clip))


def entropic_weights(score_G: np.ndarray | list[float], eta: float, gamma: float, clip: float) -> np.ndarray:
    """Eq. 14-15: q = (1 - gamma) softmax(eta clip(S, -C, C)) + gamma / B.

    A list of Python floats takes the plain-Python path, as :func:`omega`; equal up to rounding.
    """
    if isinstance(score_G, list):
        logits = [eta * min(max(value, -clip), clip) for value in score_G]
        top = max(logits)
        soft = [math.exp(value - top) for value in logits]
        total = sum(soft)
        floor = gamma / len(score_G)
        return np.array([(1.0 - gamma) * value / total + floor for value in soft])
    score = np.asarray(score_G, float)
    logits = eta * np.minimum(np.maximum(score, -clip), clip)  # = np.clip, without its Python wrapper
    soft = np.exp(logits - logits.max())
    return (1.0 - gamma) * soft / soft.sum() + gamma / score.size


def row_softmax(logits_GA: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(softmax(L_b), log softmax(L_b)) per bin b of a (G, A) table (over axis 1), sharing the exponentials:
    log softmax(L_b) = (L_b - max L_b) - log sum exp(L_b - max L_b). (Rollout-GDRO samples arms from the first,
    through :func:`exp3p_mix`, and its exact planner scores them by the second.)"""
    logits = np.asarray(logits_GA, float)
    if logits.ndim == 2 and logits.size:
        shifted = logits - row_max(logits)
        soft = np.exp(shifted)
        sums = row_sum(soft)[:, None]  # per-row reduceat (gdro_lab._rows)
    else:  # empty, or not (G, A): numpy's own reductions (and errors)
        shifted = logits - np.maximum.reduce(logits, axis=1, keepdims=True)
        soft = np.exp(shifted)
        sums = np.add.reduce(soft, axis=1, keepdims=True)
    soft /= sums
    return soft, shifted - np.log(sums)


def exp3p_mix(soft_GA: np.ndarray, gamma: float) -> np.ndarray:
    """EXP3P's exploration floor over per-bin softmaxes: p_b = (1 - gamma) soft_b + gamma / A."""
    return (1.0 - gamma) * soft_GA + gamma / soft_GA.shape[1]


def exp3p_probabilities(logits_GA: np.ndarray, gamma: float) -> np.ndarray:
    """EXP3P sampling distribution per bin: p_b = (1 - gamma) softmax(L_b) + gamma / A."""
    return exp3p_mix(row_softmax(logits_GA)[0], gamma)


def importance_weighted_cost(cost_GA: np.ndarray, prob_GA: np.ndarray, sampled_arm_G: np.ndarray,
                             feedback: str) -> np.ndarray:
    """Cost estimate fed to mirror descent: 'full' -> cost itself; 'bandit' -> EXP3P's unbiased
    importance-weighted estimate cost_b(a) 1{a = a_b} / p_b(a) (zero for unsampled arms)."""
    cost = np.asarray(cost_GA, float)
    if feedback == "full":
        return cost.copy()
    if feedback != "bandit":
        raise ValueError(f"feedback={feedback!r} is invalid: must be 'full' or 'bandit'")
    rows = np.arange(cost.shape[0])
    arms = np.asarray(sampled_arm_G, np.int64)
    estimate = np.zeros_like(cost)
    estimate[rows, arms] = cost[rows, arms] / np.asarray(prob_GA, float)[rows, arms]
    return estimate


def mirror_descent_step(logits_GA: np.ndarray, estimate_GA: np.ndarray, present_G: np.ndarray,
                        eta: float, decay: float = 0.0) -> np.ndarray:
    """Entropic mirror descent on costs: L_b <- (1 - decay) L_b - eta cost_hat_b, re-centred so
    max_a L_b(a) = 0 (softmax unchanged), for present bins only; absent rows returned unchanged."""
    logits = np.asarray(logits_GA, float)
    estimate = np.asarray(estimate_GA, float)
    present = np.asarray(present_G, bool)
    if present.all():  # the usual step: every row moves (1.0 * L = L exactly, so decay 0 skips the product)
        moved = (logits if decay == 0.0 else (1.0 - decay) * logits) - eta * estimate
        return moved - (row_max(moved) if moved.size else moved.max(axis=1, keepdims=True))
    logits = logits.copy()
    moved = (1.0 - decay) * logits[present] - eta * estimate[present]
    logits[present] = moved - moved.max(axis=1, keepdims=True)
    return logits


def arm_costs(relative_variance_G: np.ndarray, mu: float, arms_A: np.ndarray, n_bar: float) -> np.ndarray:
    """Lagrangian arm cost (Eq. 20 as a cost; Eq. 28 + price): v~_b n_bar / n + mu n / n_bar, (G, A)."""
    arms = np.asarray(arms_A, float)
    return np.asarray(relative_variance_G, float)[:, None] * n_bar / arms[None, :] + mu * arms[None, :] / n_bar


def dual_step(mu: float, realized_mean: float, n_bar: float, lr: float) -> float:
    """Eq. 21, projected and relative: mu <- max(0, mu + alpha (n_realized - n_bar) / n_bar)."""
    return max(0.0, float(mu) + lr * ((float(realized_mean) - n_bar) / n_bar))


def log_sum_exp_surrogate(losses_G: np.ndarray, eta: float) -> tuple[float, np.ndarray]:
    """Lemma 4.1: R_eta(L) = (1/eta) log sum_b exp(eta L_b) and its gradient softmax(eta L) (Eq. 26).

    max_b L_b <= R_eta <= max_b L_b + log(B) / eta. Computed stably (shifted by max L).
    Returns (R_eta, q_eta) with q_eta = dR/dL summing to one.
    """
    losses = np.asarray(losses_G, float)
    if losses.ndim != 1 or losses.size == 0 or not np.isfinite(losses).all():
        raise ValueError("log_sum_exp_surrogate: losses_G must be a non-empty 1-D array of finite numbers")
    if not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"log_sum_exp_surrogate: eta={eta!r} is invalid: must be a finite number > 0")
    top = float(losses.max())
    weights = np.exp(eta * (losses - top))
    total = float(weights.sum())
    return top + float(np.log(total)) / eta, weights / total
