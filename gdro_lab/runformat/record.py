"""The per-step record every producer logs: scalars plus per-bin rows (docs/run-format.md).

One function builds it so the simulator, the trainer and the verl integration log identical
fields computed by the same diagnostics.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.allocation.sqrt_law import check_box
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
    weights = np.full(G, 1.0 / G) if weights_G is None else _weights(weights_G)
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
    if assigned:  # Eq. 32 (= diag.lead_lag_gap)
        if weights.shape != share_G.shape:
            raise ConfigError(f"lead_lag_gap: share_G has {share_G.size} bins: must match weights_G ({weights.size})")
        share = share_G.tolist()
        share_total = sum(share)
        mu_weight = sum(map(operator.mul, range(G), weights_normal))
        mu_data = sum([b * q / share_total for b, q in zip(range(G), share)])
        gap = mu_weight - mu_data
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
        scalars["multiplier_mean"], scalars["multiplier_sq_mean"] = _moments(rows[3], active_P)
    if assigned:
        n_G = [n_bar if math.isnan(r) else r for r in rollouts_G.tolist()]
        scalars.update(_se(share_G, sigma, n_G, n_bar, n_min, n_max))
    return scalars, bins_out


def _weights(weights_G: np.ndarray) -> np.ndarray:
    """diag.normalized(weights_G): checked (fast path for a finite non-negative float array), sums to one."""
    w = weights_G
    if isinstance(w, np.ndarray) and w.dtype == np.float64 and w.ndim == 1 and w.size:
        total = np.add.reduce(w)
        if math.isfinite(total) and total > 0 and np.minimum.reduce(w) >= 0:  # a NaN or inf makes the sum non-finite
            return w / total
    return diag.normalized(weights_G)


def _moments(m: np.ndarray, a: np.ndarray) -> tuple[float, float]:
    """stepmatch.moments(m, a) on float64 arrays of one non-zero size (the same reductions, without numpy's
    Python wrappers): (sum m / P, sum a m^2 / sum a), NaN when sum a = 0."""
    total = float(np.add.reduce(a))
    second = float(np.add.reduce(a * m * m)) / total if total > 0 else float("nan")
    return float(np.add.reduce(m)) / m.size, second


def _per_prompt(feedback: StepFeedback, name: str, values_P: np.ndarray) -> np.ndarray:
    values = np.asarray(values_P, float)
    if values.shape != feedback.bins_P.shape:
        raise ConfigError(f"bin_mean: values_P has shape {values.shape}: must match bins_P {feedback.bins_P.shape}")
    return values


def _se(share_G: np.ndarray, sigma_G: np.ndarray, n_G: list[float], n_bar: float, n_min: float,
        n_max: float) -> dict[str, float]:
    """diag.se_report with its checks done cheaply when the inputs are plainly valid."""
    sigma = sigma_G.tolist() if sigma_G.shape == share_G.shape else None
    if sigma is not None and all(math.isfinite(v) and v >= 0 for v in sigma) and n_bar > 0:
        check_box("sqrt_allocation", n_bar, n_min, n_max)
        return diag.se_terms(share_G.tolist(), sigma, n_G, n_bar, n_min, n_max)
    return diag.se_report(share_G, sigma_G, np.array(n_G), n_bar, n_min, n_max)  # unknown bins, or its error
