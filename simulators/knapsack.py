"""Knapsack-style rollout allocator: a peer baseline (Knapsack RL, arXiv 2509.25849), not the paper's.

Same interface as gdro_lab's allocators (``plan(bins_P)``, ``update(feedback)``, state dicts), so the
simulator loop treats it like any registered allocator. Per bin b it keeps an EMA of the success
rate p_b; a prompt's value of n rollouts is

    value(n; p) = P(non-zero GRPO gradient) * InfoGain = (1 - p^n - (1 - p)^n) * p (1 - p)

and the plan maximises sum_i value(n_i; p_b(i)) subject to sum_i n_i = P n_bar, n_min <= n_i <= n_max.
value is concave in n (increments p^n (1-p) + (1-p)^n p decrease), so taking the P (n_bar - n_min)
largest increments over all prompts is optimal. Departs from Knapsack RL: p is per bin (the
allocator interface sees bins, not prompt ids), and InfoGain is taken as p(1-p).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gdro_lab.diagnostics import bin_mean
from gdro_lab.feedback import StepFeedback
from gdro_lab.grpo import group_mean
from gdro_lab.rollout_gdro import AllocatorConfig, UniformAllocator


def knapsack_value(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """(1 - p^n - (1 - p)^n) p (1 - p), elementwise."""
    p = np.asarray(p, float)
    return (1.0 - p**n - (1.0 - p) ** n) * p * (1.0 - p)


def knapsack_plan(p_P: np.ndarray, total: int, n_min: int, n_max: int) -> np.ndarray:
    """Integer n_P in [n_min, n_max], sum = total, maximising sum_i value(n_i; p_i) (greedy on increments)."""
    p = np.asarray(p_P, float)
    count = p.size
    extra = total - count * n_min
    if extra < 0 or total > count * n_max:
        raise ValueError(f"total {total} is outside [{count * n_min}, {count * n_max}]")
    levels = np.arange(n_min, n_max)  # increment from n to n + 1
    gain = knapsack_value(p[:, None], levels[None, :] + 1) - knapsack_value(p[:, None], levels[None, :])
    prompt_index = np.broadcast_to(np.arange(count)[:, None], gain.shape).ravel()
    level_index = np.broadcast_to(np.arange(levels.size)[None, :], gain.shape).ravel()
    order = np.lexsort((prompt_index, level_index, -gain.ravel()))  # ties: lower level first, round robin
    n = np.full(count, n_min, np.int64)
    np.add.at(n, prompt_index[order[:extra]], 1)
    return n


class KnapsackAllocator(UniformAllocator):
    """Greedy knapsack on per-bin success estimates (simulator-only peer baseline)."""

    config_class = AllocatorConfig

    def __init__(self, config: AllocatorConfig | None = None, seed: int | None = None):
        super().__init__(config, seed)
        self.success_G = np.full(self.num_bins, np.nan)

    def plan(self, bins_P: np.ndarray) -> np.ndarray:
        cfg = self.config
        bins = np.asarray(bins_P, np.int64)
        known = np.isfinite(self.success_G)
        prior = float(self.success_G[known].mean()) if known.any() else 0.5
        p_G = np.where(known, self.success_G, prior)
        p_P = np.where(bins >= 0, p_G[np.maximum(bins, 0)], prior)
        return knapsack_plan(p_P, bins.size * cfg.n_bar, cfg.n_min, cfg.n_max)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        self._track_variance(feedback)
        success_P = group_mean(np.asarray(feedback.successes_R, float), feedback.counts_P)
        observed = bin_mean(success_P, feedback.bins_P, self.num_bins)
        fresh = np.isfinite(observed) & ~np.isfinite(self.success_G)
        old = np.isfinite(observed) & np.isfinite(self.success_G)
        beta = self.config.variance_ema
        self.success_G[fresh] = observed[fresh]
        self.success_G[old] = (1 - beta) * self.success_G[old] + beta * observed[old]
        return {"rollout/mean_n": float(np.mean(feedback.counts_P)), "rollout/mu": self.mu}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["success"] = self.success_G.copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.success_G = np.asarray(state["success"], float).copy()
