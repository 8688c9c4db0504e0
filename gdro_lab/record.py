"""The per-step record every producer logs: scalars plus per-bin rows (docs/run-format.md).

One function builds it so the simulator, the trainer and the verl integration log identical
fields computed by the same diagnostics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gdro_lab import diagnostics as diag
from gdro_lab.feedback import StepFeedback
from gdro_lab.grpo import group_is_constant, group_mean
from gdro_lab.stepmatch import moments


def step_record(feedback: StepFeedback, num_bins: int, *, n_bar: float, n_min: float, n_max: float,
                weights_G: np.ndarray | None = None, multipliers_P: np.ndarray | None = None,
                signal_P: np.ndarray | None = None, score_G: np.ndarray | None = None,
                sigma_G: np.ndarray | None = None, mu: float = float("nan"),
                ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Scalars and per-bin arrays of one step.

    ``sigma_G``: per-bin std for the SE proxy (pass sqrt of the allocator's variance EMA); when
    None, this step's within-prompt std per bin. ``weights_G``: normalised Prompt-GDRO weights
    (uniform when None). ``multipliers_P``: the advantage multipliers applied to the step's prompts
    (unassigned ones included); their first two moments are logged for step matching
    (``multiplier_mean``, ``multiplier_sq_mean``; gdro_lab.stepmatch).
    """
    bins = np.asarray(feedback.bins_P, np.int64)
    counts = np.asarray(feedback.counts_P, float)
    count_G = diag.bin_counts(bins, num_bins)
    share_G = diag.bin_share(bins, num_bins)
    weights = np.full(num_bins, 1.0 / num_bins) if weights_G is None else diag.normalized(weights_G)
    success_P = group_mean(np.asarray(feedback.successes_R, float), feedback.counts_P)
    reward_P = group_mean(feedback.rewards_R, feedback.counts_P)
    if sigma_G is None:
        sigma_G = np.sqrt(feedback.variance_by_bin(num_bins))
    rollouts_G = diag.bin_mean(counts, bins, num_bins)
    success_G = diag.bin_mean(success_P, bins, num_bins)
    bins_out: dict[str, Any] = {
        "count": count_G, "share": share_G, "weight": weights, "rollouts": rollouts_G,
        "reward": diag.bin_mean(reward_P, bins, num_bins), "success": success_G,
        "sigma": np.asarray(sigma_G, float),
    }
    if multipliers_P is not None:
        bins_out["multiplier"] = diag.bin_mean(multipliers_P, bins, num_bins)
    if signal_P is not None:
        bins_out["signal"] = diag.bin_mean(signal_P, bins, num_bins)
    if score_G is not None:
        bins_out["score"] = np.asarray(score_G, float)
    nan = float("nan")
    # no assigned prompt yet (e.g. the first step): the data's mean bin is undefined, not uniform
    gap, mu_weight, mu_data = diag.lead_lag_gap(weights, share_G) if share_G.sum() > 0 else (nan, nan, nan)
    scalars: dict[str, float] = {
        "mean_success": float(success_P.mean()), "mean_reward": float(reward_P.mean()),
        "mean_rollouts": float(counts.mean()), "total_rollouts": float(counts.sum()),
        "num_prompts": float(bins.size), "num_unassigned": float(np.sum(bins < 0)),
        "zero_variance_frac": float(np.mean(group_is_constant(feedback.rewards_R, feedback.counts_P))),
        "mu": float(mu),
        "lead_lag_gap": gap, "mu_weight": mu_weight, "mu_data": mu_data,
        "effective_support": diag.effective_support(weights),
        "worst_bin_success": diag.worst_group(success_G),
    }
    if multipliers_P is not None:
        scalars["multiplier_mean"], scalars["multiplier_sq_mean"] = moments(multipliers_P)
    if share_G.sum() > 0:
        n_G = np.where(np.isfinite(rollouts_G), rollouts_G, n_bar)
        scalars.update(diag.se_report(share_G, sigma_G, n_G, n_bar, n_min, n_max))
    return scalars, bins_out
