"""Online difficulty classifier: stable prompt id -> difficulty bin from recent pass@k (§2.3).

Follows the paper: a sliding window of each prompt's last H observations (Eq. 10), bins by
inner edges with bin 0 the hardest (Eq. 11), and a hysteresis margin delta. Departs from it:
- each observation is the *unbiased* pass@k of one visit with k <= n_min (default 2), since the
  code's "any of n_i correct" shifts meaning when Rollout-GDRO varies n_i;
- prompts never seen are *unassigned* (bin -1), since the code's accuracy 0 inflates accbin_0 early;
- an uncertainty-aware variant (the paper's future work): a Beta posterior over the window;
- ``exclude_extremes`` (the code's 3-bin option): a prompt leaving the extra class is re-binned
  without hysteresis, for simplicity. Detail: docs/core-controllers-notes.md#gdro_lab-controllers-difficulty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gdro_lab._validate import ConfigError, require, require_edges, require_int, require_range
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompts import PerPromptState, is_index_array
from gdro_lab.controllers.visit_history import History
from gdro_lab.functional.estimators import (PASSK_TABLE_LIMIT, beta_passk_posterior, edge_thresholds, hysteresis_movers,
                                            pass_at_k, passk_table)

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
    exclude_extremes: bool = False
    """Prompts whose window estimate is exactly 0 or 1 go to an extra last bin (module docstring)."""

    def __post_init__(self) -> None:
        require_edges("ClassifierConfig", "edges", self.edges)
        object.__setattr__(self, "edges", tuple(float(e) for e in self.edges))
        require_int("ClassifierConfig", "window", self.window, 1)
        require_int("ClassifierConfig", "k", self.k, 1)
        require_range("ClassifierConfig", "hysteresis", self.hysteresis, 0.0, 0.5, hi_open=True)
        require_range("ClassifierConfig", "prior_a", self.prior_a, 0.0, lo_open=True)
        require_range("ClassifierConfig", "prior_b", self.prior_b, 0.0, lo_open=True)
        require_range("ClassifierConfig", "credible", self.credible, 0.0, 1.0, lo_open=True, hi_open=True)
        require(isinstance(self.exclude_extremes, bool), "ClassifierConfig", "exclude_extremes", self.exclude_extremes,
                "true or false")

    @property
    def num_bins(self) -> int:
        """B = len(edges) + 1, plus the extremes' class when ``exclude_extremes`` is on."""
        return len(self.edges) + 1 + int(self.exclude_extremes)


class DifficultyClassifier(PerPromptState):
    """Window-mean pass@k with margin hysteresis (registry name ``window``).

    ``bins(prompts)`` gives each prompt's current bin (-1 if never seen); ``update(feedback)`` records
    one visit per prompt and re-bins the visited ones. Prompts are string ids or int indices of ``self.prompts``.
    """

    config_class = ClassifierConfig

    def __init__(self, config: ClassifierConfig | None = None, seed: int | None = None):
        self.config = config or ClassifierConfig()
        self.rng = np.random.default_rng(seed)  # unused by the rule; kept so every controller checkpoints one
        self._init_prompts()
        self._history = History(self.config.window)
        self._edges = np.asarray(self.config.edges)
        self._thresholds = edge_thresholds(self._edges)
        self._tracked = 0

    @property
    def num_bins(self) -> int:
        return self.config.num_bins

    def _tracks_prompts(self) -> bool:
        return self._tracked > 0

    def _capacity(self) -> History:
        """The history, grown to one row per index entry."""
        hist = self._history
        if len(self.prompts) > hist.bins.size:
            hist.grow(len(self.prompts))
        return hist

    def bins(self, prompt_ids: Sequence[str] | np.ndarray) -> np.ndarray:
        """Current bin of each prompt; -1 for prompts never observed."""
        rows = self._prompt_rows(prompt_ids, register=False)
        hist = self._capacity()
        if is_index_array(prompt_ids) or not rows.size or rows.min() >= 0:
            return hist.bins[rows]
        known = rows >= 0
        out = np.full(rows.size, -1, np.int64)
        out[known] = hist.bins[rows[known]]
        return out

    def estimates(self, prompt_ids: Sequence[str] | np.ndarray) -> np.ndarray:
        """Current point estimate of pass@k per prompt (NaN if never observed)."""
        rows = self._prompt_rows(prompt_ids, register=False)
        hist = self._capacity()
        out = np.full(rows.size, np.nan)
        seen = rows >= 0
        seen[seen] = hist.bins[rows[seen]] >= 0
        seen_rows = rows[seen]
        out[seen] = self._band(seen_rows, hist.length[seen_rows], hist.sums[seen_rows])[0]
        return out

    def _band(self, rows: np.ndarray, length: np.ndarray, sums: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(center, low, high) of the window estimate (``length`` visits in each window, >= 1, whose
        pass@k sum to ``sums``); hysteresis band estimate -/+ delta."""
        mean = sums / length
        delta = self.config.hysteresis
        return mean, mean - delta, mean + delta

    def _passk(self, feedback: StepFeedback) -> np.ndarray:
        """Unbiased pass@k of each prompt's visit (= estimators.pass_at_k, one table lookup)."""
        k = self.config.k
        if feedback.min_count < k or feedback.max_count > PASSK_TABLE_LIMIT:
            return pass_at_k(feedback.counts_P, feedback._successes_P, k)  # its error, or the per-pair path
        largest = feedback.max_count
        return passk_table(k, largest).ravel().take(feedback.counts_P * (largest + 1) + feedback._successes_P)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        """Record this step's visits (n_i rollouts, c_i successes) and re-bin the visited prompts."""
        counts = feedback.counts_P
        successes = feedback._successes_P
        passk = self._passk(feedback)
        rows = feedback.index_in(self.prompts)
        hist = self._capacity()
        if not hist.has_duplicates(rows):
            unique_rows = rows
            length, sums = hist.record(rows, passk, successes, counts)
        else:  # a prompt seen twice in one batch: write its visits one pass at a time, in order
            unique_rows = np.unique(rows)
            pending = np.arange(rows.size)
            while pending.size:
                _, first = np.unique(rows[pending], return_index=True)
                take = pending[first]
                hist.record(rows[take], passk[take], successes[take], counts[take])
                pending = np.setdiff1d(pending, take, assume_unique=True)
            length, sums = hist.length[unique_rows], hist.sums[unique_rows]
        previous = hist.bins[unique_rows]
        center, low, high = self._band(unique_rows, length, sums)
        metrics: dict[str, float] = {}
        if self.config.exclude_extremes:
            fresh, moved, extreme = self._rebin_with_extremes(unique_rows, previous, center, low, high)
            metrics["classifier/extreme_prompts"] = float(extreme)
        else:
            # only the prompts whose band clears an edge of their bin (and new prompts) change bin
            movers, moved_to, fresh = hysteresis_movers(previous, center, low, high, self._edges, *self._thresholds)
            hist.bins[unique_rows[movers]] = moved_to
            moved = movers.size - fresh
        self._tracked += fresh
        return {"classifier/tracked_prompts": float(self._tracked),
                "classifier/new_prompts": float(fresh),
                "classifier/moves": float(moved),
                "classifier/mean_passk": float(np.add.reduce(center) / center.size) if center.size else float("nan"),
                **metrics}

    def _extremes(self, rows: np.ndarray) -> np.ndarray:
        """Whether each row's window is all pass@k = 0 or all pass@k = 1 (its filled slots; exact values)."""
        hist = self._history
        _, rollouts_RH = hist.slots(rows)
        passk_RH = hist.passk[rows]
        filled = rollouts_RH > 0
        never = ~np.logical_or.reduce(filled & (passk_RH != 0.0), axis=1)
        always = np.logical_and.reduce(~filled | (passk_RH == 1.0), axis=1)
        return never | always

    def _rebin_with_extremes(self, rows: np.ndarray, previous: np.ndarray, center: np.ndarray, low: np.ndarray,
                             high: np.ndarray) -> tuple[int, int, int]:
        """Re-bin visited ``rows`` with the extremes' class (index num_bins - 1); returns (new prompts,
        moves of placed prompts, prompts now in the extremes' class). A prompt leaving that class is
        re-binned like a new one (previous -1 for the hysteresis rule)."""
        hist = self._history
        extra = self.config.num_bins - 1
        regular = np.where(previous == extra, -1, previous)
        movers, moved_to, _ = hysteresis_movers(regular, center, low, high, self._edges, *self._thresholds)
        new = regular.copy()
        new[movers] = moved_to
        extreme = self._extremes(rows)
        new[extreme] = extra
        hist.bins[rows] = new
        placed = previous >= 0
        return (int(np.count_nonzero(~placed)), int(np.count_nonzero(placed & (new != previous))),
                int(np.count_nonzero(extreme)))

    def state_dict(self) -> dict[str, Any]:
        """The tracked prompts' ids (index order), their windows and window sums of pass@k."""
        hist = self._history
        rows = np.flatnonzero(hist.bins >= 0)
        visits = hist.visits[rows]
        successes, rollouts = hist.slots(rows)
        return {"ids": self.prompts.ids_of(rows), "successes": successes,
                "failures": rollouts - successes, "length": np.minimum(visits, hist.window),
                "position": visits % hist.window, "bins": hist.bins[rows],
                "passk_sum": hist.sums[rows], "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict (also one written before interning): ids are interned into ``self.prompts``."""
        window = self.config.window
        try:
            ids = [str(pid) for pid in state["ids"]]
            n = len(ids)
            successes = np.asarray(state["successes"], np.int32).reshape(n, window)
            failures = np.asarray(state["failures"], np.int32).reshape(n, window)
            length, position, bins = (np.asarray(state[key], np.int64).reshape(n)
                                      for key in ("length", "position", "bins"))
            sums = None if state.get("passk_sum") is None else np.asarray(state["passk_sum"], float).reshape(n)
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"classifier state is invalid ({type(err).__name__}: {err}): it must come from "
                              f"state_dict() of a classifier with window={window}") from None
        if n and (bins.min() < 0 or bins.max() >= self.config.num_bins):
            raise ConfigError(f"classifier state has bins {int(bins.min())}..{int(bins.max())} but this classifier has "
                              f"{self.config.num_bins} (edges or exclude_extremes differ from the saved run's): "
                              "load it with the run's classifier settings")
        rows = self.prompts.intern(ids)
        hist = History(window, len(self.prompts))
        visits = successes + failures
        # per-visit pass@k is a function of the visit's (n, c); empty slots (n = 0) stay 0
        filled = visits > 0
        passk = np.zeros((n, window))
        passk[filled] = pass_at_k(visits[filled], successes[filled], self.config.k)
        hist.set_slots(rows, passk, successes, visits)
        # the running sums as saved (bit for bit); a state written before they were kept: summed afresh
        hist.sums[rows] = np.add.reduce(passk, axis=1) if sums is None else sums
        # a window not yet full has position = length; a full one any visit count with that position
        hist.visits[rows] = np.where(length < window, length, window + position)
        hist.bins[rows] = bins
        self._history = hist
        self._tracked = int(np.count_nonzero(hist.bins >= 0))
        self.rng.bit_generator.state = state["rng"]


class BayesDifficultyClassifier(DifficultyClassifier):
    """Uncertainty-aware variant (registry name ``bayes``): Beta posterior over the window.

    p ~ Beta(prior_a + sum c, prior_b + sum (n - c)) over the prompt's last H visits; the bin
    follows the posterior mean of pass@k = 1 - (1 - p)^k and changes only when the central
    ``credible`` interval of pass@k lies wholly beyond an edge (replaces the fixed margin).
    """

    def _band(self, rows: np.ndarray, length: np.ndarray, sums: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        hist = self._history
        cfg = self.config
        successes_RH, rollouts_RH = hist.slots(rows)
        successes = successes_RH.sum(axis=1)
        mean, low, high = beta_passk_posterior(successes, rollouts_RH.sum(axis=1) - successes,
                                               cfg.k, cfg.prior_a, cfg.prior_b, cfg.credible)
        # For skewed posteriors (k >= 4) the mean of pass@k can fall outside the central interval
        # of p mapped through 1 - (1 - p)^k; widen the band so it always holds its own center.
        return mean, np.minimum(low, mean), np.maximum(high, mean)
