"""Rollout allocators' shared configuration and the two baselines Rollout-GDRO is compared with (§3.3, Thm 4.2).

:class:`AllocatorConfig` (every allocator's configuration), :class:`UniformAllocator` (``uniform``:
n_i = n_bar, with the shared per-bin variance EMA) and :class:`SqrtAllocator` (``sqrt``: Thm 4.2's
square-root law, ``oracle`` for true variances). Rollout-GDRO: :mod:`gdro_lab.controllers.rollout_gdro`
(which re-exports these names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gdro_lab._validate import ConfigError, require_choice, require_int, require_range
from gdro_lab.allocation.sqrt_law import round_to_budget, sqrt_allocation
from gdro_lab.checks import check_bins
from gdro_lab.controllers.arm_updates import relative_variance
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.functional.diagnostics import bin_share
from gdro_lab.functional.update_rules import ema_from_first

PLANNERS = ("exact", "dp_count", "dp_bin")


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
    up by +-1 per prompt when no one-arm-per-bin plan hits the total."""
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
        require_choice(owner, "planner", self.planner, PLANNERS)
        require_range(owner, "variance_ema", self.variance_ema, 0.0, 1.0, lo_open=True)
        require_range(owner, "variance_floor", self.variance_floor, 0.0, lo_open=True)
        require_range(owner, "score_decay", self.score_decay, 0.0, 1.0, hi_open=True)

    @property
    def arms(self) -> np.ndarray:
        return np.arange(self.n_min, self.n_max + 1)


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
        :class:`~gdro_lab.controllers.prompts.PromptIndex`) lets a per-prompt allocator use a prompt's own
        history; the bin-level allocators here accept and ignore it.
        """
        return np.full(self._check_plan_inputs(bins_P, prompt_ids).size, self.config.n_bar, np.int64)

    def _check_plan_inputs(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None) -> np.ndarray:
        return self._checked_bins(bins_P, prompt_ids)[0]

    def _checked_bins(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None) -> tuple[np.ndarray, int]:
        """(bins_P checked, its smallest bin; 0 when empty)."""
        owner = type(self).__name__ + ".plan"
        bins = check_bins(owner, "bins_P", bins_P, self.num_bins)
        smallest = int(np.minimum.reduce(bins)) if bins.size else 0
        if prompt_ids is not None and len(prompt_ids) != bins.size:
            raise ConfigError(f"{owner}: prompt_ids has {len(prompt_ids)} entries: "
                              f"must have one per prompt of bins_P ({bins.size})")
        return bins, smallest

    def _track_variance(self, feedback: StepFeedback) -> np.ndarray:
        """Variance-proxy EMA per bin: ema_from_first with beta = variance_ema; absent bins unchanged
        (on lists: ema_from_first's per-bin loop, the same values)."""
        observed = feedback.variance_by_bin(self.num_bins, copy=False)
        beta = self.config.variance_ema
        self.variance_G = ema_from_first(self.variance_G.tolist(), observed.tolist(), beta)
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
        """v~_b = v_b / sum q v (unknown bins: the mean of known ones), floored; ones if none known
        (:func:`gdro_lab.controllers.arm_updates.relative_variance`)."""
        return relative_variance(self.variance_G, share_G, self.config.variance_floor)


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
