"""DUET (arXiv 2605.08441): rollout counts from a pre-rollout surrogate and the marker-gated abort rule.

- counts (:func:`duet_plan`): n_i = clip(lambda s_i, n_min, n_max), lambda such that sum_i n_i = total
  (proportional to the surrogate s_i >= 0 in the box), then largest-remainder rounding in the box:
  int64, sum exactly total, each in [n_min, n_max];
- abort (:func:`marker_gated_abort`): a rollout whose answer marker appears by horizon + grace stops grace
  tokens after it (weight 1); one without is aborted there (weight 0) or, with probability keep_prob
  (0.05), continued to EOS with weight 1 / keep_prob; one that ends before horizon + grace keeps weight 1.
Departs: the paper's method section was not available (abstract and a summary of the abort rule only):
- the map from surrogate to counts and the rounding are this project's reading, not the paper's equations;
- every prompt gets at least n_min rollouts (the allocators' box), so none is skipped;
- one grace window serves after the marker and after the horizon.
Sources and rationale: docs/core-allocation-notes.md#gdro_lab-allocation-duet.
"""

from __future__ import annotations

import numpy as np

from gdro_lab._validate import ConfigError, require_int, require_range
from gdro_lab.allocation.sqrt_law import round_to_budget
from gdro_lab.allocation.vip import sqrt_law_relaxed
from gdro_lab.checks import as_float_array, as_int_array, check_total

KEEP_PROB = 0.05
"""Probability of continuing a marker-less rollout to EOS (the paper's default; 0.01 to 0.20 tested)."""


def duet_plan(score_P: np.ndarray, total: int, n_min: int, n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """(integer plan, relaxed plan): n proportional to ``score_P`` clipped to [n_min, n_max], sum = total.

    The relaxed plan is the square-root law's water-filling on weights s_i^2 (clip(sqrt(s_i^2) lambda));
    a zero score gets n_min unless every other prompt is at n_max; all zero: total / P each.
    """
    score = as_float_array("duet_plan", "score_P", score_P, ndim=1, nonnegative=True)
    total = check_total("duet_plan", total, score.size, n_min, n_max)
    relaxed = sqrt_law_relaxed(score ** 2, total, n_min, n_max)
    return round_to_budget(relaxed, total, n_min, n_max), relaxed


def marker_gated_abort(marker_R: np.ndarray, length_R: np.ndarray, horizon: int, grace: int,
                       uniform_R: np.ndarray, keep_prob: float = KEEP_PROB) -> tuple[np.ndarray, np.ndarray]:
    """(tokens_R, weight_R): tokens each rollout generates under the abort rule and its importance weight.

    ``marker_R``: tokens generated when the rollout's first answer marker is complete (-1: none before EOS);
    ``length_R``: its length at EOS; ``uniform_R``: U[0, 1) draws, a marker-less rollout continues when
    u < keep_prob. Weight 0 = aborted (left out of the loss); E_u[weight] = 1 for every rollout.
    """
    owner = "marker_gated_abort"
    length = as_int_array(owner, "length_R", length_R, ndim=1, low=1)
    marker = as_int_array(owner, "marker_R", marker_R, ndim=1, low=-1)
    u = as_float_array(owner, "uniform_R", uniform_R, ndim=1)
    if not marker.size == length.size == u.size:
        raise ConfigError(f"{owner}: marker_R, length_R and uniform_R have {marker.size}, {length.size} and "
                          f"{u.size} entries: must have one per rollout")
    if np.any(marker > length):
        raise ConfigError(f"{owner}: marker_R is invalid (a marker after its rollout's EOS): must be <= length_R")
    require_int(owner, "horizon", horizon, 0)
    require_int(owner, "grace", grace, 0)
    require_range(owner, "keep_prob", keep_prob, 0.0, 1.0, lo_open=True)
    check = horizon + grace
    marked = (marker >= 0) & (marker <= check)
    tail = ~marked & (length > check)  # still running at the check without a marker
    kept = tail & (u < keep_prob)
    tokens = np.where(marked, np.minimum(marker + grace, length), np.where(tail & ~kept, check, length))
    weight = np.where(tail, np.where(kept, 1.0 / keep_prob, 0.0), 1.0)
    return tokens.astype(np.int64), weight


def min_scored(classifier_config: object) -> int:
    """Scored rollouts a prompt needs to enter a step under early stopping: max(2, k) (a GRPO group needs two;
    the classifier's pass@k needs k)."""
    return max(2, int(getattr(classifier_config, "k", 1)))


def scored_rows(counts_P: np.ndarray, weights_R: np.ndarray | None, need: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seen_P, rows_R, scored counts of the seen prompts): the prompts with at least ``need`` scored rollouts
    (abort weight > 0), their scored rollouts and how many each has, all that the controllers, the advantages
    and the loss see; every prompt, rollout and count when ``weights_R`` is None (no early stopping). A prompt
    with fewer is left out of the step, as if not drawn (its rollouts were generated: they count as compute)."""
    counts = np.asarray(counts_P, np.int64)
    if weights_R is None:
        return np.ones(counts.size, bool), np.ones(int(counts.sum()), bool), counts
    scored_R = np.asarray(weights_R) > 0
    owner_R = np.repeat(np.arange(counts.size), counts)
    scored_P = np.bincount(owner_R[scored_R], minlength=counts.size)
    seen_P = scored_P >= need
    return seen_P, scored_R & seen_P[owner_R], scored_P[seen_P]


def abort_scalars(counts_P: np.ndarray, tokens_R: np.ndarray, weights_R: np.ndarray) -> dict[str, float]:
    """Early stopping's compute/* of one step, in place of the controllers' counts of the scored rollouts:
    prompts, rollouts and tokens generated (all of them), rollouts aborted (weight 0) and kept tails
    (weight > 1)."""
    weights = np.asarray(weights_R, float)
    return {"compute/prompts_generated": float(len(counts_P)), "compute/rollouts_generated": float(np.sum(counts_P)),
            "compute/tokens_generated": float(np.sum(tokens_R)),
            "compute/rollouts_aborted": float(np.sum(weights == 0)),
            "compute/rollouts_kept_tail": float(np.sum(weights > 1))}
