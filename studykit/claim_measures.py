"""Per-run statistics of the paper's mechanism claims (studykit.claims), from the standard step record.

Every function takes runs that expose ``scalars`` (name -> per-logged-step array) and ``bins``
(name -> steps x G array), as ``gdro_lab.runformat.runlog.RunData`` and the simulator's summaries do, and
returns one value per run (seed). Steps before the classifier has binned anything log NaN for
the bin statistics and are skipped ("binned steps"). G bins, bin 0 = hardest.

    wave            mean of mu_data over the last tenth of binned steps - over the first tenth
    leadlag_early   mean of mu_weight - mu_data over the first quarter of binned steps    (Eq. 32)
    leadlag_decays  that minus the same mean over the last quarter
    frontier        mean of mu_weight over the steps from the 60th percentile on - (G - 1)/2  (Fig. 1)
    wse             mean of se_reduction_pct over the binned steps                          (Eq. 33)
    economics       mean over steps of sum_{b >= G/2} q_b n_b / (n_bar sum_{b >= G/2} q_b)   (Fig. 9)
    budget_shift    100 x the budget share sum_{b >= 0.7 G} q_b n_b / sum_b q_b n_b, last minus first quarter
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from studykit.claims import Measurement
from studykit.stats import mean_ci
from studykit.tables import fmt


class RunLike(Protocol):
    """A run's step series: ``gdro_lab.runformat.runlog.RunData`` or the simulator's ``RunSummary``."""

    @property
    def scalars(self) -> Mapping[str, np.ndarray]: ...

    @property
    def bins(self) -> Mapping[str, np.ndarray]: ...


def _series(run: RunLike, name: str) -> np.ndarray:
    values = np.asarray(run.scalars.get(name, np.array([])), float)
    return values[np.isfinite(values)]


def _part(values: np.ndarray, start: float, stop: float) -> float:
    """Mean of values[start n : stop n] (at least one value), NaN when empty."""
    n = values.size
    if n == 0:
        return float("nan")
    lo = min(int(math.floor(start * n)), n - 1)
    hi = max(int(math.ceil(stop * n)), lo + 1)
    return float(values[lo:hi].mean())


def wave(runs: Sequence[RunLike]) -> np.ndarray:
    return np.array([_part(_series(r, "mu_data"), 0.9, 1.0) - _part(_series(r, "mu_data"), 0.0, 0.1) for r in runs])


def lead_lag(runs: Sequence[RunLike]) -> tuple[np.ndarray, np.ndarray]:
    """(early gap, early minus late gap) per run; the gap is mu_weight - mu_data (Eq. 32)."""
    early, decay = [], []
    for r in runs:
        w = np.asarray(r.scalars.get("mu_weight", np.array([])), float)
        d = np.asarray(r.scalars.get("mu_data", np.array([])), float)
        gap = (w - d)[np.isfinite(w - d)] if w.size == d.size else np.array([])
        early.append(_part(gap, 0.0, 0.25))
        decay.append(_part(gap, 0.0, 0.25) - _part(gap, 0.75, 1.0))
    return np.array(early), np.array(decay)


def frontier(runs: Sequence[RunLike], num_bins: int) -> np.ndarray:
    return np.array([_part(_series(r, "mu_weight"), 0.6, 1.0) - (num_bins - 1) / 2.0 for r in runs])


def wse(runs: Sequence[RunLike]) -> np.ndarray:
    return np.array([float(np.mean(s)) if (s := _series(r, "se_reduction_pct")).size else np.nan for r in runs])


def _budget(run: RunLike) -> tuple[np.ndarray, np.ndarray]:
    """(share q_b, rollouts per prompt n_b) over the binned steps, NaN rollouts of empty bins as 0."""
    share = np.asarray(run.bins.get("share", np.zeros((0, 0))), float)
    rollouts = np.asarray(run.bins.get("rollouts", np.zeros((0, 0))), float)
    if share.shape != rollouts.shape or share.size == 0:
        return np.zeros((0, 0)), np.zeros((0, 0))
    binned = np.nansum(share, axis=1) > 0
    return np.nan_to_num(share[binned]), np.nan_to_num(rollouts[binned])


def economics(runs: Sequence[RunLike], n_bar: float) -> np.ndarray:
    out = []
    for r in runs:
        share, n = _budget(r)
        high = np.arange(share.shape[1]) >= share.shape[1] / 2 if share.size else np.zeros(0, bool)
        mass = share[:, high].sum(axis=1) if share.size else np.zeros(0)
        ok = mass > 0
        ratio = (share[ok][:, high] * n[ok][:, high]).sum(axis=1) / (n_bar * mass[ok]) if ok.any() else np.array([])
        out.append(float(ratio.mean()) if ratio.size else np.nan)
    return np.array(out)


def budget_shift(runs: Sequence[RunLike]) -> np.ndarray:
    out = []
    for r in runs:
        share, n = _budget(r)
        if not share.size:
            out.append(np.nan)
            continue
        high = np.arange(share.shape[1]) >= math.ceil(0.7 * share.shape[1])
        spent = (share * n).sum(axis=1)
        frac = np.where(spent > 0, (share[:, high] * n[:, high]).sum(axis=1) / np.where(spent > 0, spent, 1), np.nan)
        frac = frac[np.isfinite(frac)]
        out.append(100.0 * (_part(frac, 0.75, 1.0) - _part(frac, 0.0, 0.25)))
    return np.array(out)


def measurement(key: str, values_S: Any, metric: str, evidence: str, unit: str, digits: int = 2,
                what: str = "") -> Measurement:
    """A Measurement of per-seed values: their mean ± 95% t-interval, with the number in words."""
    mean, half = mean_ci(np.asarray(values_S, float))
    return Measurement(key, float(mean), float(half), metric, evidence,
                       f"{fmt(mean, half, digits)}{unit}" + (f" {what}" if what else ""))


def mechanism_measurements(data_runs: Sequence[RunLike], weighter_runs: Sequence[RunLike],
                           allocator_runs: Sequence[RunLike], num_bins: int, n_bar: float, evidence: str
                           ) -> dict[str, Measurement]:
    """The mechanism claims a study's runs can measure: ``data_runs`` for the wave, ``weighter_runs``
    (Prompt-GDRO) for the lead-lag gap and the frontier, ``allocator_runs`` (Rollout-GDRO) for the
    SE proxy and the budget (an empty sequence leaves those claims untested)."""
    from studykit.claims import BY_KEY
    out: dict[str, Measurement] = {}

    def add(key: str, values: np.ndarray, unit: str, digits: int, what: str) -> None:
        if np.isfinite(values).any():
            out[key] = measurement(key, values, BY_KEY[key].metric, evidence, unit, digits, what)

    if data_runs:
        add("wave", wave(data_runs), " bins", 2, "rise of the data's mean bin index (last - first tenth of the run)")
    if weighter_runs:
        early, decay = lead_lag(weighter_runs)
        add("leadlag_early", early, " bins", 2, "mean gap over the first quarter of the binned steps")
        add("leadlag_decays", decay, " bins", 2, "first minus last quarter")
        add("frontier_weights", frontier(weighter_runs, num_bins), " bins", 2,
            "adversary's mean bin index above the middle bin, steps from the 60th percentile on")
    if allocator_runs:
        add("wse", wse(allocator_runs), "%", 1, "mean WSE reduction over the binned steps (own sigma estimate)")
        add("economics", economics(allocator_runs, n_bar), "x", 2,
            "rollouts per prompt on bins >= G/2 over n_bar (at most n_max / n_bar)")
        add("budget_shift", budget_shift(allocator_runs), " pp", 1,
            "budget share on bins >= 0.7 G, last minus first quarter")
    return out
