"""Published per-prompt rollout allocators as registry controllers: Knapsack-RL, VIP, DUET and CERO.

All share the allocator interface (sum exactly P n_bar in [n_min, n_max], state dicts with the RNG) and
keep a per-prompt history (:class:`gdro_lab.controllers.prompt_stats.PromptStats`). The math:
:mod:`gdro_lab.allocation.knapsack`, :mod:`gdro_lab.allocation.vip`, :mod:`gdro_lab.allocation.duet`,
:mod:`gdro_lab.allocation.cero`.
- ``knapsack`` (arXiv 2509.25849): success estimate = the mean of the last 16 rollouts, trusted after 8, as the
  code's reward buffer;
- ``vip`` (arXiv 2602.01601): Beta posterior with the running batch success rate as prior mean; departs
  from VIP: no Gaussian process over prompt embeddings, so unseen prompts get the prior;
- ``duet`` (arXiv 2605.08441): n proportional to the same posterior's E[p (1 - p)], unseen prompts at the
  prior's value; departs from DUET: its surrogate (not available here) is replaced by the prompt's history;
- ``cero`` (arXiv 2606.05606): Beta(prior_a + s, prior_b + f) per prompt and the Fenchel duals of
  gdro_lab.allocation.cero; departs: the exact budget every step (lambda is logged, not planned with).
Without ``prompt_ids`` each plans n_bar for every prompt. Details:
docs/core-controllers-notes.md#gdro_lab-controllers-peer_allocators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gdro_lab._validate import ConfigError, require_choice, require_int, require_range
from gdro_lab.allocation.cero import cero_dual_step, cero_plan, lagrangian_choice
from gdro_lab.allocation.duet import duet_plan
from gdro_lab.allocation.knapsack import OBJECTIVES, knapsack_plan
from gdro_lab.allocation.vip import beta_expected_variance, convex_plan
from gdro_lab.checks import check_bins
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_stats import PromptStats
from gdro_lab.functional.update_rules import dual_step, ema_from_first


@dataclass(frozen=True)
class BoxConfig:
    """The fields every allocator takes from its loop: bins and the rollout box."""

    num_bins: int = 10
    """B: number of difficulty bins (for the per-bin variance log)."""
    n_min: int = 2
    """Smallest rollout count."""
    n_max: int = 12
    """Largest rollout count."""
    n_bar: int = 4
    """Mean rollouts per prompt; every plan spends exactly P n_bar rollouts."""
    variance_ema: float = 0.1
    """Weight of the newest per-bin variance estimate in the logged EMA (sigma per bin)."""

    def __post_init__(self) -> None:
        owner = type(self).__name__
        require_int(owner, "num_bins", self.num_bins, 1)
        require_int(owner, "n_min", self.n_min, 2)
        require_int(owner, "n_max", self.n_max, self.n_min)
        require_int(owner, "n_bar", self.n_bar, self.n_min, self.n_max)
        require_range(owner, "variance_ema", self.variance_ema, 0.0, 1.0, lo_open=True)


@dataclass(frozen=True)
class KnapsackConfig(BoxConfig):
    """Knapsack-RL (liziniu/KnapsackRL's defaults)."""

    alpha: float = 0.9
    """Confidence of the cost estimate log(1 - alpha) / log(max(p, 1 - p)) (the code's alpha)."""
    min_history: int = 8
    """Rollouts of a prompt seen before its estimate is trusted (the code's min_buffer_length)."""
    fallback: bool = True
    """Give the budget the effective prompts cannot use to the p = 0 prompts (the code's allow_fallback)."""
    objective: str = "paper"
    """The knapsack's objective: 'paper' = sum_i value(n_i; p_i) over every prompt (arXiv 2509.25849) or
    'code' = the released DP, which credits 0 to a prompt left at n_min (gdro_lab.allocation.knapsack)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require_range("KnapsackConfig", "alpha", self.alpha, 0.0, 1.0, lo_open=True, hi_open=True)
        require_int("KnapsackConfig", "min_history", self.min_history, 1)
        require_choice("KnapsackConfig", "objective", self.objective, OBJECTIVES)


@dataclass(frozen=True)
class BetaPosteriorConfig(BoxConfig):
    """A Beta posterior per prompt whose prior mean is the running batch success rate (VIP, DUET)."""

    prior_strength: float = 2.0
    """kappa0: pseudo-rollouts of the prior Beta(kappa0 m, kappa0 (1 - m)), m = running success rate."""
    history_decay: float = 0.7
    """Discount of a prompt's past counts at each new visit (1 = all history counts equally)."""
    success_ema: float = 0.1
    """Weight of the newest batch success rate in the prior mean m."""

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        require_range(owner, "prior_strength", self.prior_strength, 0.0, lo_open=True)
        require_range(owner, "history_decay", self.history_decay, 0.0, 1.0)
        require_range(owner, "success_ema", self.success_ema, 0.0, 1.0, lo_open=True)


@dataclass(frozen=True)
class VIPConfig(BetaPosteriorConfig):
    """VIP with a Beta posterior per prompt."""

    form: str = "rloo"
    """Variance per prompt: 'rloo' = w / (n - 1) (VIP's RLOO analysis) or 'sqrt' = w / n (Eq. 28)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require_choice("VIPConfig", "form", self.form, ("rloo", "sqrt"))


@dataclass(frozen=True)
class DUETConfig(BetaPosteriorConfig):
    """DUET's counts; the surrogate's prior_strength, history_decay and success_ema are VIP's defaults (the
    paper's surrogate and its settings were not available: gdro_lab.allocation.duet)."""


@dataclass(frozen=True)
class CEROConfig(BoxConfig):
    """CERO (gdro_lab.allocation.cero). The paper's defaults were not retrievable (its body was not at hand);
    each field says what it reconstructs and why its default is ours."""

    prior_a: float = 1.0
    """Beta prior pseudo-successes of every prompt (default: the uniform prior Beta(1, 1))."""
    prior_b: float = 1.0
    """Beta prior pseudo-failures of every prompt."""
    saturation: float = 4.0
    """s = c / K: the utility's saturation scale c in rollouts over the K epochs, per epoch; a prompt's share is
    clip(s log(v / theta), n_min, n_max) (default n_bar: at theta = v / e the share is n_bar)."""
    dual_lr: float = 0.005
    """eta: the prompt-level duals' OGD step, eta / sqrt(t) at a prompt's t-th visit (the O(sqrt K) schedule);
    theta is in units of v (<= 0.25) and its gradient in rollouts."""
    budget_lr: float = 0.01
    """eta_lambda: the budget-level dual's OGD step on the relative overspend (S_k - B_k) / B_k (logged only)."""
    history_decay: float = 1.0
    """Discount of a prompt's past counts at each new visit (1 = the plain conjugate update)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("prior_a", "prior_b", "saturation", "dual_lr", "budget_lr"):
            require_range("CEROConfig", name, getattr(self, name), 0.0, lo_open=True)
        require_range("CEROConfig", "history_decay", self.history_decay, 0.0, 1.0)


class _PerPromptAllocator:
    """Shared plumbing: the per-prompt history, the per-bin variance log, state with the history and RNG."""

    config_class: Any = BoxConfig
    state_floats: tuple[str, ...] = ()
    """Float attributes of a subclass saved in its state under their own names."""

    def __init__(self, config: Any = None, seed: int | None = None, decay: float = 1.0,
                 track: tuple[str, ...] = ("counts",)):
        self.config = config or self.config_class()
        self.rng = np.random.default_rng(seed)  # unused by the rules here; kept in the state
        self.variance_G = np.full(self.config.num_bins, np.nan)
        self.mu = float("nan")  # no shadow price
        self.stats = PromptStats(decay=decay, track=track)

    @property
    def num_bins(self) -> int:
        return int(self.config.num_bins)

    @property
    def prompts(self) -> Any:
        """The PromptIndex the history is indexed by (gdro_lab.controllers.prompts)."""
        return self.stats.prompts

    def bind_prompts(self, prompts: Any) -> None:
        """Share the run's PromptIndex (before the first update)."""
        self.stats.bind_prompts(prompts)

    def _check_plan_inputs(self, bins_P: np.ndarray, prompt_ids: Any) -> np.ndarray:
        bins = check_bins(type(self).__name__ + ".plan", "bins_P", bins_P, self.num_bins)
        if prompt_ids is not None and len(prompt_ids) != bins.size:
            raise ConfigError(f"{type(self).__name__}.plan: prompt_ids has {len(prompt_ids)} entries: "
                              f"must have one per prompt of bins_P ({bins.size})")
        return bins

    def _track_variance(self, feedback: StepFeedback) -> None:
        """EMA of the mean within-prompt reward variance (Bessel) per bin, as UniformAllocator logs it."""
        feedback.check_num_bins(self.num_bins)
        observed = feedback.variance_by_bin(self.num_bins, copy=False)
        self.variance_G = ema_from_first(self.variance_G, observed, self.config.variance_ema)

    def _rows(self, size: int, prompt_ids: Any) -> np.ndarray:
        """Rows of the plan's prompts (-1 without ids); ``self.stats.seen(rows)`` says which have a history."""
        return self.stats.rows(prompt_ids) if prompt_ids is not None else np.full(size, -1, np.int64)

    def _plan_seen(self, rows: np.ndarray, planner: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
        """n_bar for each prompt of ``rows`` without a history; the seen share the rest, ``planner(seen rows, total)``."""
        n_P = np.full(rows.size, self.config.n_bar, np.int64)
        seen = self.stats.seen(rows)
        if seen.any():
            n_P[seen] = planner(rows[seen], int(seen.sum()) * self.config.n_bar)
        return n_P

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        self._track_variance(feedback)
        rows = self._updated_rows = self.stats.record(feedback)
        return {"rollout/mean_n": float(np.mean(feedback.counts_P)), "rollout/mu": self.mu,
                "rollout/prompts_tracked": float(len(self.stats)),
                "rollout/prompts_first_visit": float(np.mean(self.stats.arrays["visits"][rows] == 1))}

    def state_dict(self) -> dict[str, Any]:
        return {"variance": self.variance_G.copy(), "rng": self.rng.bit_generator.state,
                "prompts": self.stats.state_dict(), **{name: getattr(self, name) for name in self.state_floats}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.variance_G = np.asarray(state["variance"], float).copy()
        self.rng.bit_generator.state = state["rng"]
        self.stats.load_state_dict(state["prompts"])
        for name in self.state_floats:
            setattr(self, name, float(state[name]))


class KnapsackAllocator(_PerPromptAllocator):
    """Knapsack-RL (registry ``knapsack``); see the module docstring and gdro_lab.allocation.knapsack."""

    config_class = KnapsackConfig

    def __init__(self, config: KnapsackConfig | None = None, seed: int | None = None):
        super().__init__(config, seed, track=("recent",))

    def estimates(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p_P, valid_P): mean of the last 16 rollouts, trusted once min_history rollouts are seen."""
        p = self.stats.recent_rate(rows)
        valid = self.stats.take("total", rows) >= self.config.min_history
        return np.where(valid, p, 0.5), valid

    def plan(self, bins_P: np.ndarray, prompt_ids: Any = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        p, valid = self.estimates(self._rows(bins.size, prompt_ids))
        return knapsack_plan(p, valid, bins.size * cfg.n_bar, cfg.n_min, cfg.n_max, cfg.n_bar, cfg.alpha,
                             cfg.fallback, cfg.objective)


class _BetaPosteriorAllocator(_PerPromptAllocator):
    """A Beta posterior per prompt with the running batch success rate (per rollout) as prior mean."""

    state_floats = ("success_mean",)

    def __init__(self, config: BetaPosteriorConfig | None = None, seed: int | None = None):
        config = config or self.config_class()
        super().__init__(config, seed, decay=config.history_decay)
        self.success_mean = float("nan")

    def weights(self, rows: np.ndarray) -> np.ndarray:
        """w_i = E[p (1 - p)] under the prompt's Beta posterior (module docstring), shape (P,)."""
        cfg = self.config
        m = min(max(self.success_mean if np.isfinite(self.success_mean) else 0.5, 1e-3), 1 - 1e-3)
        s = self.stats.take("successes", rows)
        n = self.stats.take("trials", rows)
        return beta_expected_variance(cfg.prior_strength * m + s, cfg.prior_strength * (1.0 - m) + n - s)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        metrics = super().update(feedback)
        rate = float(np.mean(np.asarray(feedback.successes_R, float)))
        self.success_mean = float(ema_from_first(np.array([self.success_mean]), np.array([rate]),
                                                 self.config.success_ema)[0])
        metrics["rollout/prior_success"] = self.success_mean
        return metrics


class VIPAllocator(_BetaPosteriorAllocator):
    """VIP with a Beta posterior (registry ``vip``); see the module docstring and gdro_lab.allocation.vip."""

    config_class = VIPConfig

    def plan(self, bins_P: np.ndarray, prompt_ids: Any = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        offset = 1.0 if cfg.form == "rloo" else 0.0
        return self._plan_seen(self._rows(bins.size, prompt_ids), lambda rows, total: convex_plan(
            self.weights(rows), total, cfg.n_min, cfg.n_max, offset)[0])


class DUETAllocator(_BetaPosteriorAllocator):
    """DUET's counts (registry ``duet``): n proportional to the surrogate E[p (1 - p)], every prompt planned."""

    config_class = DUETConfig

    def plan(self, bins_P: np.ndarray, prompt_ids: Any = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        score = self.weights(self._rows(bins.size, prompt_ids))  # unseen prompts: the prior's score
        return duet_plan(score, bins.size * cfg.n_bar, cfg.n_min, cfg.n_max)[0]


class CEROAllocator(_PerPromptAllocator):
    """CERO (registry ``cero``); see the module docstring and gdro_lab.allocation.cero. Per prompt: the Beta
    posterior's counts and the dual theta (``stats`` field ``dual``), theta0 = v0 e^(-n_bar/s) before the first visit
    (the price at which the prior's share is n_bar). Unseen prompts get n_bar, as in VIP; the seen share the rest."""

    config_class = CEROConfig
    state_floats = ("mu",)

    def __init__(self, config: CEROConfig | None = None, seed: int | None = None):
        config = config or CEROConfig()
        super().__init__(config, seed)
        self.stats = PromptStats(decay=config.history_decay, track=("counts",), extra=("dual",))
        v0 = float(beta_expected_variance(np.array(config.prior_a), np.array(config.prior_b)))
        self.theta0 = v0 * float(np.exp(-config.n_bar / config.saturation))
        self.mu = self.theta0  # lambda, the budget-level dual

    def values(self, rows: np.ndarray) -> np.ndarray:
        """v_i = E[p (1 - p)] under Beta(prior_a + s_i, prior_b + n_i - s_i), shape (P,)."""
        s, n = self.stats.take("successes", rows), self.stats.take("trials", rows)
        return beta_expected_variance(self.config.prior_a + s, self.config.prior_b + n - s)

    def duals(self, rows: np.ndarray) -> np.ndarray:
        """theta_i (theta0 for prompts not seen), shape (P,)."""
        return self.stats.take("dual", rows, missing=self.theta0)

    def plan(self, bins_P: np.ndarray, prompt_ids: Any = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        return self._plan_seen(self._rows(bins.size, prompt_ids), lambda rows, total: cero_plan(
            self.duals(rows), total, cfg.n_min, cfg.n_max))

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        """Dual steps at the step's theta and posterior (a prompt twice in a batch: its last step counts), then the
        posterior update."""
        cfg = self.config
        rows = self.stats.rows(feedback.index_in(self.prompts))
        n = np.asarray(feedback.counts_P, np.int64)
        theta = self.duals(rows)
        lr = cfg.dual_lr / np.sqrt(self.stats.take("visits", rows) + 1.0)
        new_theta = cero_dual_step(theta, n, self.values(rows), lr, cfg.saturation, cfg.n_min, cfg.n_max)
        spend = float(lagrangian_choice(theta, self.mu, cfg.n_min, cfg.n_max).sum())
        budget = float(n.size * cfg.n_bar)
        self.mu = dual_step(self.mu, spend, budget, cfg.budget_lr)  # Eq. 21's step: the same projected relative rule
        metrics = super().update(feedback)
        self.stats.arrays["dual"][rows] = new_theta
        metrics.update({"rollout/cero_spend_ratio": spend / budget, "rollout/cero_dual_mean": float(new_theta.mean())})
        return metrics
