"""Online difficulty classifier: stable prompt id -> difficulty bin from recent pass@k (§2.3).

Follows the paper: a sliding window of each prompt's last H observations (Eq. 10), bins by
inner edges with bin 0 the hardest (Eq. 11), and a hysteresis margin delta. Departs from it:
- each observation is the *unbiased* pass@k estimate 1 - C(n-c, k)/C(n, k) of one visit with
  k <= n_min (default k = 2 = n_min), not the code's "any of n_i correct", whose meaning shifts
  when Rollout-GDRO varies n_i; the window counts visits of the prompt, as the code does;
- prompts never seen are *unassigned* (bin -1), not silently put in bin 0 (the code gives
  them accuracy 0, inflating accbin_0 early in training);
- an uncertainty-aware variant (the paper's future work): Beta posterior on the per-rollout
  success rate over the window, bin by the posterior mean of pass@k, move only when the
  credible interval clears an edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from gdro_lab._validate import ConfigError, require_edges, require_int, require_range
from gdro_lab.estimators import beta_passk_posterior, hysteresis_bins, pass_at_k
from gdro_lab.feedback import StepFeedback

DEFAULT_EDGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class ClassifierConfig:
    """Configuration of the online difficulty classifier."""

    edges: tuple[float, ...] = DEFAULT_EDGES
    """Inner bin edges in (0, 1), increasing; B = len(edges) + 1 bins, bin 0 = lowest pass@k."""
    window: int = 50
    """H: number of most recent visits of a prompt that enter its estimate (paper code: 50)."""
    k: int = 2
    """k of pass@k; must be <= the smallest rollout count (n_min) so estimates are comparable."""
    hysteresis: float = 0.03
    """delta: a prompt changes bin only when its estimate crosses the edge by this margin."""
    prior_a: float = 1.0
    """Beta prior successes (uncertainty-aware variant only)."""
    prior_b: float = 1.0
    """Beta prior failures (uncertainty-aware variant only)."""
    credible: float = 0.8
    """Central credible mass whose interval must clear an edge (uncertainty-aware variant only)."""

    def __post_init__(self) -> None:
        require_edges("ClassifierConfig", "edges", self.edges)
        object.__setattr__(self, "edges", tuple(float(e) for e in self.edges))
        require_int("ClassifierConfig", "window", self.window, 1)
        require_int("ClassifierConfig", "k", self.k, 1)
        require_range("ClassifierConfig", "hysteresis", self.hysteresis, 0.0, 0.5, hi_open=True)
        require_range("ClassifierConfig", "prior_a", self.prior_a, 0.0, lo_open=True)
        require_range("ClassifierConfig", "prior_b", self.prior_b, 0.0, lo_open=True)
        require_range("ClassifierConfig", "credible", self.credible, 0.0, 1.0, lo_open=True, hi_open=True)

    @property
    def num_bins(self) -> int:
        return len(self.edges) + 1


@dataclass
class _History:
    """Ring buffers of the last H visits per tracked prompt (rows grow by doubling)."""

    window: int
    passk: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    successes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))
    failures: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))
    length: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    position: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bins: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def grow(self, rows: int) -> None:
        capacity = self.bins.size
        if rows <= capacity:
            return
        new_capacity = max(rows, 2 * capacity, 256)
        pad = new_capacity - capacity
        self.passk = np.vstack([self.passk.reshape(capacity, self.window), np.zeros((pad, self.window))])
        self.successes = np.vstack([self.successes.reshape(capacity, self.window),
                                    np.zeros((pad, self.window), np.int32)])
        self.failures = np.vstack([self.failures.reshape(capacity, self.window),
                                   np.zeros((pad, self.window), np.int32)])
        self.length = np.concatenate([self.length, np.zeros(pad, np.int64)])
        self.position = np.concatenate([self.position, np.zeros(pad, np.int64)])
        self.bins = np.concatenate([self.bins, np.full(pad, -1, np.int64)])


class DifficultyClassifier:
    """Window-mean pass@k with margin hysteresis (registry name ``window``).

    ``bins(ids)`` gives each prompt's current bin (-1 if never seen); ``update(feedback)``
    records one visit per prompt and re-bins the visited prompts.
    """

    config_class = ClassifierConfig

    def __init__(self, config: ClassifierConfig | None = None, seed: int | None = None):
        self.config = config or ClassifierConfig()
        self.rng = np.random.default_rng(seed)  # unused by the rule; kept so every controller checkpoints one
        self._index: dict[str, int] = {}
        self._ids: list[str] = []
        self._history = _History(self.config.window)
        self._edges = np.asarray(self.config.edges)

    @property
    def num_bins(self) -> int:
        return self.config.num_bins

    def _lookup(self, prompt_ids: Sequence[str]) -> np.ndarray:
        """Row of each id in the history (-1 for ids never seen)."""
        get = self._index.get
        return np.array([get(pid, -1) for pid in prompt_ids], dtype=np.int64)

    def bins(self, prompt_ids: Sequence[str]) -> np.ndarray:
        """Current bin of each prompt; -1 for prompts never observed."""
        rows = self._lookup(prompt_ids)
        if not self._ids:
            return rows
        return np.where(rows >= 0, self._history.bins[np.maximum(rows, 0)], -1)

    def estimates(self, prompt_ids: Sequence[str]) -> np.ndarray:
        """Current point estimate of pass@k per prompt (NaN if never observed)."""
        rows = self._lookup(prompt_ids)
        out = np.full(rows.size, np.nan)
        seen = rows >= 0
        out[seen] = self._band(rows[seen])[0]
        return out

    def _rows(self, prompt_ids: Sequence[str]) -> np.ndarray:
        """Rows of the ids, registering new ones."""
        rows = self._lookup(prompt_ids)
        for i in np.flatnonzero(rows < 0):
            pid = prompt_ids[int(i)]
            if not isinstance(pid, str):
                raise ConfigError(f"prompt ids must be strings, got {type(pid).__name__} {pid!r}: pass str ids")
            row = self._index.setdefault(pid, len(self._ids))
            if row == len(self._ids):
                self._ids.append(pid)
            rows[i] = row
        self._history.grow(len(self._ids))
        return rows

    def _band(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(center, low, high) of the window estimate; hysteresis band estimate -/+ delta."""
        hist = self._history
        mean = hist.passk[rows].sum(axis=1) / np.maximum(hist.length[rows], 1)
        delta = self.config.hysteresis
        return mean, mean - delta, mean + delta

    def _record(self, rows: np.ndarray, passk: np.ndarray, successes: np.ndarray, counts: np.ndarray) -> None:
        """Write one visit for each of ``rows`` (distinct) into the ring buffers."""
        hist = self._history
        slot = hist.position[rows]
        hist.passk[rows, slot] = passk
        hist.successes[rows, slot] = successes
        hist.failures[rows, slot] = counts - successes
        hist.position[rows] = (slot + 1) % self.config.window
        hist.length[rows] = np.minimum(hist.length[rows] + 1, self.config.window)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        """Record this step's visits (n_i rollouts, c_i successes) and re-bin the visited prompts."""
        counts = np.asarray(feedback.counts_P, np.int64)
        successes = feedback.successes_P()
        passk = pass_at_k(counts, successes, self.config.k)
        rows = self._rows(feedback.prompt_ids)
        hist = self._history
        unique_rows, first = np.unique(rows, return_index=True)
        if unique_rows.size == rows.size:
            self._record(rows, passk, successes, counts)
        else:  # a prompt seen twice in one batch: write its visits one pass at a time, in order
            pending = np.arange(rows.size)
            while pending.size:
                _, first = np.unique(rows[pending], return_index=True)
                take = pending[first]
                self._record(rows[take], passk[take], successes[take], counts[take])
                pending = np.setdiff1d(pending, take, assume_unique=True)
        previous = hist.bins[unique_rows].copy()
        center, low, high = self._band(unique_rows)
        hist.bins[unique_rows] = hysteresis_bins(previous, center, low, high, self._edges)
        moved = (previous >= 0) & (hist.bins[unique_rows] != previous)
        return {"classifier/tracked_prompts": float(len(self._ids)),
                "classifier/new_prompts": float(np.sum(previous < 0)),
                "classifier/moves": float(moved.sum()),
                "classifier/mean_passk": float(center.mean()) if center.size else float("nan")}

    def state_dict(self) -> dict[str, Any]:
        n = len(self._ids)
        hist = self._history
        return {"ids": list(self._ids), "successes": hist.successes[:n].copy(),
                "failures": hist.failures[:n].copy(), "length": hist.length[:n].copy(),
                "position": hist.position[:n].copy(), "bins": hist.bins[:n].copy(),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ids = list(state["ids"])
        self._ids = ids
        self._index = {pid: i for i, pid in enumerate(ids)}
        hist = _History(self.config.window)
        hist.grow(len(ids))
        n = len(ids)
        hist.successes[:n] = np.asarray(state["successes"]).reshape(n, self.config.window)
        hist.failures[:n] = np.asarray(state["failures"]).reshape(n, self.config.window)
        # per-visit pass@k is a function of the visit's (n, c); empty slots (n = 0) stay 0
        visits = hist.successes[:n] + hist.failures[:n]
        filled = visits > 0
        hist.passk[:n][filled] = pass_at_k(visits[filled], hist.successes[:n][filled], self.config.k)
        hist.length[:n] = state["length"]
        hist.position[:n] = state["position"]
        hist.bins[:n] = state["bins"]
        self._history = hist
        self.rng.bit_generator.state = state["rng"]


class BayesDifficultyClassifier(DifficultyClassifier):
    """Uncertainty-aware variant (registry name ``bayes``): Beta posterior over the window.

    p ~ Beta(prior_a + sum c, prior_b + sum (n - c)) over the prompt's last H visits; the bin
    follows the posterior mean of pass@k = 1 - (1 - p)^k and changes only when the central
    ``credible`` interval of pass@k lies wholly beyond an edge (replaces the fixed margin).
    """

    def _band(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        hist = self._history
        cfg = self.config
        mean, low, high = beta_passk_posterior(hist.successes[rows].sum(axis=1), hist.failures[rows].sum(axis=1),
                                               cfg.k, cfg.prior_a, cfg.prior_b, cfg.credible)
        # For skewed posteriors (k >= 4) the mean of pass@k can fall outside the central interval
        # of p mapped through 1 - (1 - p)^k; widen the band so it always holds its own center.
        return mean, np.minimum(low, mean), np.maximum(high, mean)
