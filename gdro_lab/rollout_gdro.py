"""Rollout-GDRO: a shadow-price controller choosing rollouts per bin at a fixed mean budget (§3.3).

Per bin b a distribution p_b over arms n in {n_min..n_max}, p_b = (1 - gamma) softmax(L_b) + gamma / A.
Each step, with realized shares q_hat and the per-bin variance proxy v_b (EMA of the mean
within-prompt reward variance, Bessel, in the bin):
    cost_b(n) = v~_b n_bar / n + mu n / n_bar,   v~_b = v_b / sum_j q_hat_j v_j
    L_b      <- (1 - decay) L_b - eta cost_hat_b                         (entropic mirror descent)
    mu       <- max(0, mu + alpha (sum_b q_hat_b n_b^sampled - n_bar) / n_bar)   (Eq. 21)
where n^sampled draws one arm per bin from p_b. ``feedback='full'`` uses cost_hat = cost for all
arms (the cost of every arm is known once v_b is estimated); ``'bandit'`` is EXP3P's
importance-weighted cost of the sampled arm only, cost_b(a) 1{a sampled} / p_b(a).
The executed plan meets sum_i n_i = P n_bar exactly, unassigned prompts getting n_bar. Planners:
- ``exact`` (default): the exact argmax of the joint per-prompt probability
  sum_i log p_b(i)(n_i) of the exploitation distribution softmax(L_b) (without the gamma floor,
  which only serves sampling) under the exact budget, for any arm distributions
  (:func:`gdro_lab.planner.exact_plan`). Under bandit feedback the distributions are not
  log-concave; the earlier concave-envelope greedy then executed plans up to hundreds of nats
  below the optimum (a bin with p(2) = 0.62 sent 23 prompts to n = 10 where p ~ 0).
  (Planning on the gamma-mixed p instead measured a bin with sigma 0.91 sent from its mode 6
  to 2 in the simulator, because every off-mode arm sat on the same floor.)
- ``dp_count``: the paper's DP (one arm per bin, §3.3) on the paper's "joint probability"
  sum_b c_b log p_b(n_b); ``dp_bin``: the same DP on the released code's sum_b log p_b(n_b).
  Both use the gamma-mixed p as the code does; single prompts move by +-1 in the rare case no
  one-arm-per-bin plan hits the total. Once the p_b concentrate, every off-mode arm has the
  same floor probability gamma / A, so closing a small budget gap costs the same whether a bin
  moves by 1 or by 10: measured on a stationary 6-bin world ``dp_bin`` executed
  (2, 4, 12, 2, 6, 3) where the distributions' modes were (2, 5, 6, 7, 6, 3).
The names ``concave`` and ``paper`` of earlier versions are accepted as aliases of ``exact``
and ``dp_bin``.

Every rule is a pure function in :mod:`gdro_lab.update_rules` (EMA from first observation,
EXP3P probabilities, importance-weighted cost, mirror-descent step, dual step); bins absent
from a step keep their arm logits and variance estimate bit-for-bit.

Sign convention: we *minimise* cost = variance proxy v_b / n (Thm 4.2, Eq. 28) plus the price
of compute. Its best response at price mu is n = n_bar sqrt(v~_b / mu) (Eq. 31), and the dual
equilibrium sum q n = n_bar gives the square-root law. The released code instead adds the bin
loss (rewarding arms with high loss) and never runs its update; the paper's Eq. 19-20 are a
utility maximisation whose utility is unspecified. Costs are measured relative to the batch's
mean variance and n relative to n_bar so mu is dimensionless: mu = 1 makes n_bar optimal when all
bins are alike (the default start); positive rescaling of v or mu leaves the optimum unchanged.
Unlike the code, the dual step uses the *sampled* plan, whose mean varies; the executed DP plan
always meets the budget, so using it would freeze mu (the code's mu never moves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gdro_lab._validate import ConfigError, require_choice, require_int, require_range
from gdro_lab.allocation import adjust_to_total, exact_budget_plan, round_to_budget, sqrt_allocation
from gdro_lab.checks import check_bins_fast
from gdro_lab.diagnostics import bin_counts, bin_share
from gdro_lab.feedback import StepFeedback
from gdro_lab.planner import plan_values
from gdro_lab.update_rules import (arm_costs, dual_step, ema_value, exp3p_probabilities,
                                   importance_weighted_cost, mirror_descent_step)

PLANNERS = ("exact", "dp_count", "dp_bin")
PLANNER_ALIASES = {"concave": "exact", "paper": "dp_bin"}


@dataclass(frozen=True)
class AllocatorConfig:
    """Configuration of a rollout allocator (uniform, square-root, Rollout-GDRO)."""

    num_bins: int = 10
    """B: number of difficulty bins."""
    n_min: int = 2
    """Smallest rollout count (>= 2 so every GRPO group has a defined std)."""
    n_max: int = 12
    """Largest rollout count (paper: 3 x n_bar)."""
    n_bar: int = 4
    """Mean rollouts per prompt; every plan spends exactly P n_bar rollouts."""
    eta: float = 0.65
    """Mirror-descent step on the arm costs."""
    gamma: float = 0.01
    """Uniform exploration mixed into each bin's arm distribution."""
    dual_lr: float = 0.05
    """alpha_mu: projected dual ascent step on the relative budget violation (Eq. 21)."""
    mu_init: float = 1.0
    """Initial shadow price (dimensionless; 1 makes n_bar optimal for equal variances)."""
    feedback: str = "full"
    """'full' (cost of every arm) or 'bandit' (EXP3P importance-weighted cost of the sampled arm)."""
    variance_ema: float = 0.1
    """Weight of the newest per-bin variance estimate in its EMA."""
    variance_floor: float = 1e-3
    """Relative floor on v~_b so a zero-variance bin still has a finite best arm (n_min)."""
    score_decay: float = 0.0
    """Forgetting of the cumulative arm scores per step (0 = plain mirror descent, as the code)."""
    planner: str = "exact"
    """Executed plan: 'exact' (exact argmax of the joint per-prompt probability, any distributions),
    'dp_count' (the paper's one-arm-per-bin DP on sum_b c_b log p_b(n_b), its "joint probability")
    or 'dp_bin' (the same DP on sum_b log p_b(n_b), the released code's objective); the DPs fix
    up by +-1 per prompt when no one-arm-per-bin plan hits the total. Old names: 'concave' = 'exact',
    'paper' = 'dp_bin'."""
    oracle: bool = False
    """Square-root allocator only: use feedback.variance_G (the true variances) instead of estimates."""

    def __post_init__(self) -> None:
        owner = "AllocatorConfig"
        require_int(owner, "num_bins", self.num_bins, 1)
        require_int(owner, "n_min", self.n_min, 2)  # a GRPO group of one has no baseline
        require_int(owner, "n_max", self.n_max, self.n_min)
        require_int(owner, "n_bar", self.n_bar, self.n_min, self.n_max)
        require_range(owner, "eta", self.eta, 0.0)
        require_range(owner, "gamma", self.gamma, 0.0, 1.0, hi_open=True)
        require_range(owner, "dual_lr", self.dual_lr, 0.0)
        require_range(owner, "mu_init", self.mu_init, 0.0)
        require_choice(owner, "feedback", self.feedback, ("full", "bandit"))
        require_choice(owner, "planner", self.planner, PLANNERS + tuple(PLANNER_ALIASES))
        require_range(owner, "variance_ema", self.variance_ema, 0.0, 1.0, lo_open=True)
        require_range(owner, "variance_floor", self.variance_floor, 0.0, lo_open=True)
        require_range(owner, "score_decay", self.score_decay, 0.0, 1.0, hi_open=True)

    @property
    def arms(self) -> np.ndarray:
        return np.arange(self.n_min, self.n_max + 1)

    @property
    def planner_name(self) -> str:
        """The planner with old aliases resolved ('exact', 'dp_count' or 'dp_bin')."""
        return PLANNER_ALIASES.get(self.planner, self.planner)


class UniformAllocator:
    """GRPO baseline (registry name ``uniform``): n_i = n_bar for every prompt.

    Keeps the per-bin variance EMA so its logs carry the same SE terms as the adaptive allocators.
    """

    config_class = AllocatorConfig

    def __init__(self, config: AllocatorConfig | None = None, seed: int | None = None):
        self.config = config or AllocatorConfig()
        self.rng = np.random.default_rng(seed)
        self.variance_G = np.full(self.config.num_bins, np.nan)
        self.mu = float("nan")  # no shadow price: only Rollout-GDRO has one

    @property
    def num_bins(self) -> int:
        return self.config.num_bins

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None = None) -> np.ndarray:
        """Rollouts per prompt for this batch; sums to P n_bar exactly.

        ``prompt_ids`` (optional, one per prompt: string ids or int indices of the run's
        :class:`~gdro_lab.prompts.PromptIndex`) lets a per-prompt allocator use a prompt's own
        history; the bin-level allocators here accept and ignore it.
        """
        return np.full(self._check_plan_inputs(bins_P, prompt_ids).size, self.config.n_bar, np.int64)

    def _check_plan_inputs(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None) -> np.ndarray:
        bins = check_bins_fast(type(self).__name__ + ".plan", "bins_P", bins_P, self.num_bins)
        if prompt_ids is not None and len(prompt_ids) != bins.size:
            raise ConfigError(f"{type(self).__name__}.plan: prompt_ids has {len(prompt_ids)} entries: "
                              f"must have one per prompt of bins_P ({bins.size})")
        return bins

    def _track_variance(self, feedback: StepFeedback) -> np.ndarray:
        """Variance-proxy EMA per bin: ema_from_first with beta = variance_ema; absent bins unchanged
        (per bin on floats, ``ema_value``: the same values)."""
        observed = feedback.variance_by_bin(self.num_bins, copy=False)
        beta = self.config.variance_ema
        self.variance_G = np.array([ema_value(previous, value, beta)
                                    for previous, value in zip(self.variance_G.tolist(), observed.tolist())])
        return observed

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        """Fold this step's per-bin within-prompt variance into the EMA."""
        self._track_variance(feedback)
        return {"rollout/mean_n": feedback.total / feedback.num_prompts, "rollout/mu": self.mu}

    def state_dict(self) -> dict[str, Any]:
        return {"variance": self.variance_G.copy(), "mu": self.mu, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.variance_G = np.asarray(state["variance"], float).copy()
        self.mu = float(state["mu"])
        self.rng.bit_generator.state = state["rng"]

    def _relative_variance(self, share_G: np.ndarray) -> np.ndarray:
        """v~_b = v_b / sum q v (unknown bins: the mean of known ones), floored; ones if none known."""
        v = self.variance_G
        known = np.isfinite(v)
        if not known.all():
            if not known.any():
                return np.ones(self.num_bins)
            v = v.copy()
            v[~known] = v[known].mean()
        scale = float(np.dot(share_G, v)) if share_G.sum() > 0 else float(v.mean())
        if scale <= 0:
            return np.ones(self.num_bins)
        return np.maximum(v / scale, self.config.variance_floor)


class SqrtAllocator(UniformAllocator):
    """Square-root (Neyman) allocator (registry name ``sqrt``), Thm 4.2 with the arm box.

    Real targets n_b from :func:`sqrt_allocation` on the estimated (or, with ``oracle``, the
    true) variances, rounded per prompt to integers with the exact total P n_bar.
    """

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        share = bin_share(bins, self.num_bins)
        assigned = bins >= 0
        target = np.full(bins.size, float(cfg.n_bar))
        if assigned.any():
            n_G = sqrt_allocation(self._relative_variance(share), share, cfg.n_bar, cfg.n_min, cfg.n_max)
            target[assigned] = n_G[bins[assigned]]
        return round_to_budget(target, bins.size * cfg.n_bar, cfg.n_min, cfg.n_max)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        if self.config.oracle and feedback.variance_G is not None:
            feedback.check_num_bins(self.num_bins)
            self.variance_G = np.asarray(feedback.variance_G, float).copy()
        else:
            self._track_variance(feedback)
        return {"rollout/mean_n": feedback.total / feedback.num_prompts, "rollout/mu": self.mu}


class RolloutGDRO(UniformAllocator):
    """Shadow-price mirror-descent allocator with an exact-budget planner (registry ``gdro``)."""

    def __init__(self, config: AllocatorConfig | None = None, seed: int | None = None):
        super().__init__(config, seed)
        self.mu = float(self.config.mu_init)
        self.logits_GA = np.zeros((self.num_bins, self.config.arms.size))
        self._sampled_G: np.ndarray | None = None
        self._arms = self.config.arms
        self._arms_float = self._arms.astype(float)
        self._plan_probs: tuple[np.ndarray, np.ndarray] | None = None  # (logits_GA it came from, p)
        # tie_broken's penalty 1e-9 (n - n_bar)^2, computed once (same values as allocation.tie_broken)
        self._tie_penalty = 1e-9 * (self._arms[None, :] - self.config.n_bar) ** 2

    def arm_probabilities(self) -> np.ndarray:
        """p_b over arms, shape (G, A): (1 - gamma) softmax(L_b) + gamma / A."""
        return exp3p_probabilities(self.logits_GA, self.config.gamma)

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None = None) -> np.ndarray:
        cfg = self.config
        arms = self._arms
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        probs = self.arm_probabilities()
        self._plan_probs = (self.logits_GA, probs)  # update() reuses them (logits_GA is replaced, never mutated)
        cumulative = probs.cumsum(axis=1)
        draws = self.rng.random(self.num_bins)
        self._sampled_G = arms[np.minimum((cumulative < draws[:, None]).sum(axis=1), arms.size - 1)]
        everyone = bool(bins.size) and bins.min() >= 0
        if everyone:  # the usual step: every prompt has a bin
            assigned, num_assigned, placed = None, bins.size, bins
        else:
            assigned = bins >= 0
            num_assigned = int(np.count_nonzero(assigned))
            placed = bins[assigned]
        n_P = np.full(bins.size, cfg.n_bar, np.int64)
        if not num_assigned:
            return n_P
        total = num_assigned * cfg.n_bar
        if cfg.planner_name == "exact":
            # log softmax(L_b) without the gamma floor: the floor makes every off-mode arm equally
            # unlikely, so it cannot tell a move of one arm from a move of ten (see module doc).
            log_soft = self.logits_GA - np.logaddexp.reduce(self.logits_GA, axis=1, keepdims=True)
            plan = plan_values(log_soft - self._tie_penalty, placed, total, cfg.n_min)
            if everyone:
                return plan
            n_P[assigned] = plan
            return n_P
        if assigned is None:
            assigned = np.ones(bins.size, bool)
        counts = bin_counts(bins, self.num_bins).astype(np.int64)
        weight = "count" if cfg.planner_name == "dp_count" else "bin"
        n_G, exact = exact_budget_plan(np.log(probs), counts, total, cfg.n_min, tie_center=cfg.n_bar,
                                       weight=weight)
        n_P[assigned] = n_G[placed]
        if not exact:
            preference = (probs @ arms)[placed] - n_P[assigned]
            n_P[assigned] = adjust_to_total(n_P[assigned], total, cfg.n_min, cfg.n_max, preference)
        return n_P

    def arm_costs(self, share_G: np.ndarray) -> np.ndarray:
        """cost_b(n) = v~_b n_bar / n + mu n / n_bar, shape (G, A)."""
        return arm_costs(self._relative_variance(share_G), self.mu, self._arms_float, self.config.n_bar)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        cfg = self.config
        self._track_variance(feedback)
        share = feedback.bin_share(self.num_bins)
        present = feedback.bin_nonempty(self.num_bins)  # = share > 0
        metrics = {"rollout/mean_n": feedback.total / feedback.num_prompts, "rollout/mu": self.mu}
        if self._sampled_G is None or feedback.num_assigned == 0:
            return metrics
        cached = self._plan_probs
        probs = cached[1] if cached is not None and cached[0] is self.logits_GA else self.arm_probabilities()
        self._plan_probs = None
        estimate = importance_weighted_cost(self.arm_costs(share), probs, self._sampled_G - cfg.n_min, cfg.feedback)
        self.logits_GA = mirror_descent_step(self.logits_GA, estimate, present, cfg.eta, cfg.score_decay)
        sampled_mean = float(share @ self._sampled_G)
        violation = (sampled_mean - cfg.n_bar) / cfg.n_bar
        self.mu = dual_step(self.mu, sampled_mean, cfg.n_bar, cfg.dual_lr)   # Eq. 21
        self._sampled_G = None
        entropy = -np.sum(probs * np.log(probs), axis=1)
        metrics.update({"rollout/mu": self.mu, "rollout/sampled_mean_n": sampled_mean,
                        "rollout/budget_violation": violation,
                        "rollout/arm_entropy": float(entropy[present].mean())})
        return metrics

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["logits"] = self.logits_GA.copy()
        state["sampled"] = None if self._sampled_G is None else self._sampled_G.copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.logits_GA = np.asarray(state["logits"], float).copy()
        self._sampled_G = None if state.get("sampled") is None else np.asarray(state["sampled"], np.int64)
