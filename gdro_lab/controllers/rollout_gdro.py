"""Rollout-GDRO: a shadow-price controller choosing rollouts per bin at a fixed mean budget (§3.3).

Per bin b a distribution p_b over arms n in {n_min..n_max}, p_b = (1 - gamma) softmax(L_b) + gamma / A;
each step (v_b: EMA of the bin's mean within-prompt reward variance, Bessel)::

    cost_b(n) = v~_b n_bar / n + mu n / n_bar,   v~_b = v_b / sum_j q_hat_j v_j
    L_b      <- (1 - decay) L_b - eta cost_hat_b                         (entropic mirror descent)
    mu       <- max(0, mu + alpha (sum_b q_hat_b n_b^sampled - n_bar) / n_bar)   (Eq. 21)

``feedback='full'`` knows every arm's cost, ``'bandit'`` is EXP3P's importance-weighted cost. The
executed plan meets sum_i n_i = P n_bar exactly (unassigned prompts get n_bar); planners ``exact``
(default), ``dp_count`` (the paper's DP) and ``dp_bin`` (the code's objective). Departures:
- we minimise cost (Eq. 28 plus the price of compute; best response Eq. 31), since the code adds the loss;
- the dual step uses the sampled plan, because the executed plan always meets the budget and would freeze mu;
- ``exact`` plans over prompts, not one arm per bin, because the paper's DP jumps between floor arms.
Rules: update_rules; absent bins keep their state. Why: docs/core-controllers-notes.md#gdro_lab-controllers-rollout_gdro.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gdro_lab._rows import row_sum
from gdro_lab.allocation.bin_plans import exact_budget_plan
from gdro_lab.allocation.planner.exact import plan_values
from gdro_lab.allocation.sqrt_law import adjust_to_total
from gdro_lab.controllers.allocators import AllocatorConfig, UniformAllocator
from gdro_lab.controllers.arm_updates import sample_arms
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.functional.diagnostics import bin_counts
from gdro_lab.functional.update_rules import (arm_costs, dual_step, exp3p_mix, exp3p_probabilities,
                                              importance_weighted_cost, mirror_descent_step, row_softmax)


class RolloutGDRO(UniformAllocator):
    """Shadow-price mirror-descent allocator with an exact-budget planner (registry ``gdro``)."""

    def __init__(self, config: AllocatorConfig | None = None, seed: int | None = None):
        super().__init__(config, seed)
        self.mu = float(self.config.mu_init)
        self.logits_GA = np.zeros((self.num_bins, self.config.arms.size))
        # this step's draw, from plan() to update(): (the arm sampled per bin, the p_b it was sampled from)
        self._draw: tuple[np.ndarray, np.ndarray] | None = None
        self._arms_A = self.config.arms.astype(float)
        # tie_broken's penalty 1e-9 (n - n_bar)^2, computed once (same values as allocation.tie_broken)
        self._tie_penalty = 1e-9 * (self.config.arms[None, :] - self.config.n_bar) ** 2

    def arm_probabilities(self) -> np.ndarray:
        """p_b over arms, shape (G, A): (1 - gamma) softmax(L_b) + gamma / A."""
        return exp3p_probabilities(self.logits_GA, self.config.gamma)

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None = None) -> np.ndarray:
        cfg = self.config
        bins, smallest = self._checked_bins(bins_P, prompt_ids)
        soft, log_soft = row_softmax(self.logits_GA)
        probs = exp3p_mix(soft, cfg.gamma)  # = arm_probabilities()
        self._draw = (sample_arms(probs, self.rng.random(self.num_bins), cfg.n_min), probs)
        if smallest >= 0:  # the usual step: every prompt has a bin
            assigned, placed = None, bins
        else:
            assigned = bins >= 0
            placed = bins[assigned]
        if not placed.size:
            return np.full(bins.size, cfg.n_bar, np.int64)
        total = placed.size * cfg.n_bar
        if cfg.planner == "exact":
            # log softmax(L_b) without the gamma floor: the floor makes every off-mode arm equally
            # unlikely, so it cannot tell a move of one arm from a move of ten (see module doc).
            plan = plan_values(log_soft - self._tie_penalty, placed, total, cfg.n_min,
                               try_concave=cfg.feedback == "full")  # bandit rows are spiky, not concave
        else:
            plan = self._dp_plan(probs, placed, total)
        if assigned is None:
            return plan
        n_P = np.full(bins.size, cfg.n_bar, np.int64)
        n_P[assigned] = plan
        return n_P

    def _dp_plan(self, probs: np.ndarray, placed: np.ndarray, total: int) -> np.ndarray:
        """The paper's one-arm-per-bin DP ('dp_count' or 'dp_bin'), fixed up by +-1 per prompt if needed."""
        cfg = self.config
        counts = bin_counts(placed, self.num_bins).astype(np.int64)
        weight = "count" if cfg.planner == "dp_count" else "bin"
        n_G, exact = exact_budget_plan(np.log(probs), counts, total, cfg.n_min, tie_center=cfg.n_bar, weight=weight)
        plan = n_G[placed]
        if not exact:
            preference = (probs @ self._arms_A)[placed] - plan
            plan = adjust_to_total(plan, total, cfg.n_min, cfg.n_max, preference)
        return plan

    def arm_costs(self, share_G: np.ndarray) -> np.ndarray:
        """cost_b(n) = v~_b n_bar / n + mu n / n_bar, shape (G, A)."""
        return arm_costs(self._relative_variance(share_G), self.mu, self._arms_A, self.config.n_bar)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        cfg = self.config
        self._track_variance(feedback)
        metrics = {"rollout/mean_n": feedback.total / feedback.num_prompts, "rollout/mu": self.mu}
        if self._draw is None or feedback.num_assigned == 0:
            return metrics
        sampled_G, probs = self._draw
        self._draw = None
        share = feedback.bin_share(self.num_bins)
        present = feedback.bin_nonempty(self.num_bins)  # = share > 0
        estimate = importance_weighted_cost(self.arm_costs(share), probs, sampled_G - cfg.n_min, cfg.feedback)
        self.logits_GA = mirror_descent_step(self.logits_GA, estimate, present, cfg.eta, cfg.score_decay)
        sampled_mean = float(share @ sampled_G)
        violation = (sampled_mean - cfg.n_bar) / cfg.n_bar
        self.mu = dual_step(self.mu, sampled_mean, cfg.n_bar, cfg.dual_lr)   # Eq. 21
        entropy = -row_sum(probs * np.log(probs))
        metrics.update({"rollout/mu": self.mu, "rollout/sampled_mean_n": sampled_mean,
                        "rollout/budget_violation": violation,
                        "rollout/arm_entropy": float(np.add.reduce(entropy[present]) / np.count_nonzero(present))})
        return metrics

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["logits"] = self.logits_GA.copy()
        state["sampled"] = None if self._draw is None else self._draw[0].copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.logits_GA = np.asarray(state["logits"], float).copy()
        sampled = state.get("sampled")
        self._draw = None if sampled is None else (np.asarray(sampled, np.int64), self.arm_probabilities())
