"""The per-step record every producer logs: scalars plus per-bin rows (docs/run-format.md).

One function builds it so the simulator, the trainer and the verl integration log identical
fields computed by the same diagnostics.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.functional import diagnostics as diag


def step_record(feedback: StepFeedback, num_bins: int, *, n_bar: float, n_min: float, n_max: float,
                weights_G: np.ndarray | None = None, multipliers_P: np.ndarray | None = None,
                signal_P: np.ndarray | None = None, score_G: np.ndarray | None = None,
                sigma_G: np.ndarray | None = None, mu: float = float("nan"),
                ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Scalars and per-bin arrays of one step (the values gdro_lab.functional.diagnostics gives).

    ``sigma_G``: per-bin std for the SE proxy (default: this step's within-prompt std per bin);
    ``weights_G``: normalised Prompt-GDRO weights (default uniform); ``multipliers_P``: the advantage
    multipliers of the step's prompts, logged for step matching (docs/run-format.md#gdro_lab-runformat-record).
    """
    G = num_bins
    count_G = feedback.bin_count(G)
    share_G = feedback.bin_share(G)
    weights = np.full(G, 1.0 / G) if weights_G is None else diag.normalized(weights_G)
    success_P = feedback.success_rate_P
    reward_P = feedback.reward_mean_P
    sigma = np.sqrt(feedback.variance_by_bin(G)) if sigma_G is None else np.asarray(sigma_G, float)
    names = ["rollouts", "success", "reward"]
    rows = [feedback.counts_P, success_P, reward_P]
    if multipliers_P is not None:
        names.append("multiplier")
        rows.append(_per_prompt(feedback, "multipliers_P", multipliers_P))
    if signal_P is not None:
        names.append("signal")
        rows.append(_per_prompt(feedback, "signal_P", signal_P))
    by_name = dict(zip(names, feedback.bin_means(np.array(rows, float), G)))  # every per-bin mean in one pass
    rollouts_G, success_G = by_name["rollouts"], by_name["success"]
    bins_out: dict[str, Any] = {"count": count_G.astype(float), "share": share_G.copy(), "weight": weights,
                                "rollouts": rollouts_G, "reward": by_name["reward"], "success": success_G,
                                "sigma": sigma}
    for name in names[3:]:
        bins_out[name] = by_name[name]
    if score_G is not None:
        bins_out["score"] = np.asarray(score_G, float)
    # the scalars: per-bin lists in plain Python (G ~ 10 bins; numpy's per-call cost exceeds the arithmetic)
    nan = float("nan")
    assigned = feedback.num_assigned > 0
    weights_list = weights.tolist()
    weight_total = sum(weights_list)
    weights_normal = [w / weight_total for w in weights_list]  # diag.normalized(weights), as Eq. 32 takes it
    if assigned:
        gap, mu_weight, mu_data = diag.lead_lag_gap(weights_list, share_G.tolist())  # Eq. 32
    else:  # no assigned prompt yet (e.g. the first step): the data's mean bin is undefined, not uniform
        gap, mu_weight, mu_data = nan, nan, nan
    num_prompts = feedback.num_prompts
    success_list = success_G.tolist()
    scalars: dict[str, float] = {
        "mean_success": float(np.add.reduce(success_P) / num_prompts), "mean_reward": float(np.add.reduce(reward_P) / num_prompts),
        "mean_rollouts": feedback.total / num_prompts, "total_rollouts": float(feedback.total),
        "num_prompts": float(num_prompts), "num_unassigned": float(num_prompts - feedback.num_assigned),
        "zero_variance_frac": np.count_nonzero(feedback.constant_P) / num_prompts,
        "mu": float(mu),
        "lead_lag_gap": gap, "mu_weight": mu_weight, "mu_data": mu_data,
        "effective_support": diag.support_of_distribution(weights_normal),
        "worst_bin_success": min((v for v in success_list if math.isfinite(v)), default=nan),
    }
    if multipliers_P is not None:
        active_P = np.where(feedback.constant_P, 0.0, feedback.counts_P)
        scalars["multiplier_mean"], scalars["multiplier_sq_mean"] = diag.multiplier_moments(rows[3], active_P)
    if assigned:
        n_G = [n_bar if math.isnan(r) else r for r in rollouts_G.tolist()]
        scalars.update(diag.se_report(share_G.tolist(), sigma.tolist(), n_G, n_bar, n_min, n_max))
    return scalars, bins_out


def _per_prompt(feedback: StepFeedback, name: str, values_P: np.ndarray) -> np.ndarray:
    values = np.asarray(values_P, float)
    if values.shape != feedback.bins_P.shape:
        raise ConfigError(f"bin_mean: values_P has shape {values.shape}: must match bins_P {feedback.bins_P.shape}")
    return values
