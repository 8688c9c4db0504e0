"""Reference allocators that only a simulator can run: they read the world's truth.

Registry-style controllers; before each plan the loop calls ``observe_truth(p_P, pool_p)``.
``prompt_oracle``: the exact minimiser of Eq. 28 per prompt on the true v_i; ``prompt_bayes``: the
same plan on the posterior mean of v_i under the true prior; ``prompt_stale``: the oracle on p_i at the
prompt's previous visit. What each tells apart: docs/simulator-notes.md#simulators-oracle.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gdro_lab import ConfigError
from gdro_lab.allocation.prompt_oracle import oracle_plan
from gdro_lab.controllers.peer_allocators import BoxConfig, _PerPromptAllocator


class PromptOracleAllocator(_PerPromptAllocator):
    """Exact per-prompt square-root law on the true variances (registry-style name ``prompt_oracle``)."""

    config_class = BoxConfig

    def __init__(self, config: BoxConfig | None = None, seed: int | None = None):
        super().__init__(config, seed)
        self._truth: np.ndarray | None = None

    def observe_truth(self, success_P: np.ndarray, pool_P: np.ndarray | None = None) -> None:
        """The true success probability of each prompt of the batch about to be planned (and of the pool)."""
        self._truth = np.asarray(success_P, float).copy()

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | None = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        if self._truth is None or self._truth.size != bins.size:
            raise ConfigError("prompt_oracle needs the batch's true success rates (observe_truth) before plan: "
                              "it runs only in the simulator")
        p, self._truth = self._truth, None
        return oracle_plan(4.0 * p * (1.0 - p), bins.size * cfg.n_bar, cfg.n_min, cfg.n_max)

    def update(self, feedback: Any) -> dict[str, float]:
        self._track_variance(feedback)  # no per-prompt history: the truth is given
        return {"rollout/mean_n": float(np.mean(feedback.counts_P)), "rollout/mu": self.mu}


class PromptBayesAllocator(_PerPromptAllocator):
    """Posterior-mean variances under the pool's true distribution of p (module docstring)."""

    config_class = BoxConfig
    GRID = (np.arange(400) + 0.5) / 400

    def __init__(self, config: BoxConfig | None = None, seed: int | None = None):
        super().__init__(config, seed, decay=1.0)
        self._prior: np.ndarray | None = None

    def observe_truth(self, success_P: np.ndarray, pool_P: np.ndarray | None = None) -> None:
        if pool_P is None:
            raise ConfigError("prompt_bayes needs the pool's true success rates: it runs only in the simulator")
        self._prior = np.histogram(np.asarray(pool_P, float), bins=self.GRID.size, range=(0.0, 1.0))[0] + 1e-3

    def variances(self, rows: np.ndarray) -> np.ndarray:
        """Posterior mean of 4 p (1 - p) per row (rows >= 0), shape (P,)."""
        if self._prior is None:
            raise ConfigError("prompt_bayes needs observe_truth before plan: it runs only in the simulator")
        s = self.stats.take("successes", rows)[:, None]
        m = self.stats.take("trials", rows)[:, None]
        grid = self.GRID[None, :]
        log_post = np.log(self._prior)[None, :] + s * np.log(grid) + (m - s) * np.log1p(-grid)
        weight = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        return (weight * 4.0 * grid * (1.0 - grid)).sum(axis=1) / weight.sum(axis=1)

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | None = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        rows = self._rows(bins.size, prompt_ids)
        return self._plan_seen(rows, lambda seen, total: oracle_plan(self.variances(seen), total, cfg.n_min, cfg.n_max))


class PromptStaleAllocator(_PerPromptAllocator):
    """The per-prompt oracle on each prompt's true p at its previous visit (module docstring)."""

    config_class = BoxConfig

    def __init__(self, config: BoxConfig | None = None, seed: int | None = None):
        super().__init__(config, seed, track=())
        self._truth: np.ndarray | None = None
        self.last_p = np.zeros(0)
        self._batch: tuple[np.ndarray, np.ndarray] | None = None

    def observe_truth(self, success_P: np.ndarray, pool_P: np.ndarray | None = None) -> None:
        self._truth = np.asarray(success_P, float).copy()

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | None = None) -> np.ndarray:
        cfg = self.config
        bins = self._check_plan_inputs(bins_P, prompt_ids)
        if prompt_ids is None or self._truth is None:
            raise ConfigError("prompt_stale needs prompt ids and observe_truth before plan: it runs only in the simulator")
        rows = self._rows(bins.size, prompt_ids)
        self._batch = (rows, self._truth)
        self._truth = None
        return self._plan_seen(rows, lambda seen, total: oracle_plan(
            4.0 * self.last_p[seen] * (1.0 - self.last_p[seen]), total, cfg.n_min, cfg.n_max))

    def update(self, feedback: Any) -> dict[str, float]:
        metrics = super().update(feedback)
        if self._batch is not None:
            _, truth = self._batch
            rows = self._updated_rows
            capacity = self.stats.arrays["visits"].size
            if self.last_p.size < capacity:
                self.last_p = np.concatenate([self.last_p, np.zeros(capacity - self.last_p.size)])
            self.last_p[rows] = truth
            self._batch = None
        return metrics

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        tracked = np.flatnonzero(self.stats.arrays["visits"] > 0)
        state["last_p"] = self.last_p[tracked].copy()  # in the order of state["prompts"]["ids"]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        rows = self.stats.rows(np.asarray(self.stats.prompts.intern(state["prompts"]["ids"]), np.int64))
        self.last_p = np.zeros(self.stats.arrays["visits"].size)
        self.last_p[rows] = np.asarray(state["last_p"], float)
