"""Knapsack-style rollout allocator: a peer baseline (Knapsack RL, arXiv 2509.25849), not the paper's.

Same interface as gdro_lab's allocators (``plan(bins_P, prompt_ids=None)``, ``update(feedback)``,
state dicts), so the simulator loop treats it like any registered allocator. It keeps an EMA of
the success rate per prompt id (as Knapsack RL does) and per bin; a prompt never seen before uses
its bin's estimate (then the mean over bins, then 1/2). A prompt's value of n rollouts is

    value(n; p) = P(non-zero GRPO gradient) * InfoGain = (1 - p^n - (1 - p)^n) * p (1 - p)

and the plan maximises sum_i value(n_i; p_b(i)) subject to sum_i n_i = P n_bar, n_min <= n_i <= n_max.
value is concave in n (increments p^n (1-p) + (1-p)^n p decrease), so taking the P (n_bar - n_min)
largest increments over all prompts is optimal. Departs from Knapsack RL: InfoGain is taken as
p(1-p), and without ``prompt_ids`` (or for unseen prompts) p falls back to the bin's estimate.
Both EMAs start at the first observation (gdro_lab.update_rules.ema_from_first, beta = variance_ema).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gdro_lab.diagnostics import bin_mean
from gdro_lab.feedback import StepFeedback
from gdro_lab.grpo import group_mean
from gdro_lab.prompts import PerPromptState
from gdro_lab.rollout_gdro import AllocatorConfig, UniformAllocator
from gdro_lab.update_rules import ema_from_first


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


class KnapsackAllocator(PerPromptState, UniformAllocator):
    """Greedy knapsack on per-prompt (else per-bin) success estimates (simulator-only peer baseline).

    The per-prompt EMA is an array indexed by the run's PromptIndex (``build_controller(..., prompts=)``);
    NaN marks a prompt never observed.
    """

    config_class = AllocatorConfig

    def __init__(self, config: AllocatorConfig | None = None, seed: int | None = None):
        super().__init__(config, seed)
        self.success_G = np.full(self.num_bins, np.nan)
        self._init_prompts()
        self.success_prompt = np.zeros(0)

    def _tracks_prompts(self) -> bool:
        return bool(np.isfinite(self.success_prompt).any())

    def _grown(self) -> np.ndarray:
        missing = len(self.prompts) - self.success_prompt.size
        if missing > 0:
            self.success_prompt = np.concatenate([self.success_prompt, np.full(missing, np.nan)])
        return self.success_prompt

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        known = np.isfinite(self.success_G)
        prior = float(self.success_G[known].mean()) if known.any() else 0.5
        p_G = np.where(known, self.success_G, prior)
        p_P = np.where(bins >= 0, p_G[np.maximum(bins, 0)], prior)
        if prompt_ids is not None:
            rows = self._prompt_rows(prompt_ids, register=False)
            success = self._grown()
            seen = rows >= 0
            seen[seen] = np.isfinite(success[rows[seen]])
            p_P[seen] = success[rows[seen]]
        return knapsack_plan(p_P, bins.size * cfg.n_bar, cfg.n_min, cfg.n_max)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        self._track_variance(feedback)
        beta = self.config.variance_ema
        success_P = group_mean(np.asarray(feedback.successes_R, float), feedback.counts_P)
        self.success_G = ema_from_first(self.success_G, bin_mean(success_P, feedback.bins_P, self.num_bins), beta)
        rows = feedback.index_in(self.prompts)
        success = self._grown()
        observed = np.full(success.size, np.nan)
        observed[rows] = success_P  # a prompt twice in one batch: its last visit counts
        success[rows] = ema_from_first(success[rows], observed[rows], beta)
        return {"rollout/mean_n": float(np.mean(feedback.counts_P)), "rollout/mu": self.mu}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["success"] = self.success_G.copy()
        rows = np.flatnonzero(np.isfinite(self.success_prompt))
        state["prompt_ids"] = self.prompts.ids_of(rows)
        state["success_prompt"] = self.success_prompt[rows]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.success_G = np.asarray(state["success"], float).copy()
        rows = self.prompts.intern([str(pid) for pid in state.get("prompt_ids", [])])
        self.success_prompt = np.full(len(self.prompts), np.nan)
        self.success_prompt[rows] = np.asarray(state.get("success_prompt", np.zeros(0)), float)
