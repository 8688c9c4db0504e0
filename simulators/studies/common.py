"""Settings and job lists shared by the studies."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from gdro_lab import ConfigError
from simulators.parallel import Job, RunSummary
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig
from studykit.lrgrid import sqrt2_grid


@dataclass(frozen=True)
class StudySettings:
    """Command-line settings of one study (None = the study's default)."""

    out: Path
    seeds: int
    steps: int
    prompts: int
    batch: int
    workers: int = 2
    methods: tuple[str, ...] = ()
    eval_every: int = 20
    snapshot_every: int = 0
    snapshot_seeds: int = 1
    progress: bool | None = None
    world: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    """--set / --config overrides by namespace (simulators.knobs)."""
    lr_grid: tuple[float, ...] = sqrt2_grid(0.5, 2.0)
    """Starting learning-rate scales of the tuned baselines (sqrt(2) steps at most; studykit.lrgrid):
    each method at its best one on the val split, its grid extended while that is an edge."""
    lr_extend: int = 8
    """Most sqrt(2) steps a method's grid is extended beyond each end of ``lr_grid``."""
    log_every: int = 10
    """Steps between step records in the run directories."""
    full: bool = False
    """The study at its full size (--full) rather than the quick default."""
    preset: str = ""
    """World preset name (simulators.presets), already merged into ``overrides``; for the report."""

    def validate(self) -> None:
        for name in ("seeds", "steps", "prompts", "batch", "workers", "eval_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"--{name.replace('_', '-')}={value!r} is invalid: must be an integer >= 1")
        if not isinstance(self.lr_extend, int) or self.lr_extend < 0:
            raise ConfigError(f"--lr-extend={self.lr_extend!r} is invalid: must be an integer >= 0")
        from studykit.lrgrid import check_grid
        check_grid(tuple(self.lr_grid) + (1.0,))
        if self.batch > self.prompts:
            raise ConfigError(f"--batch={self.batch} is invalid: must be at most --prompts={self.prompts}")

    def world_config(self) -> WorldConfig:
        """The default world at --prompts; a small pool gets fewer latent groups (>= 8 prompts each)."""
        values = {"num_groups": max(1, min(WorldConfig.num_groups, self.prompts // 8)), **self.world}
        return WorldConfig(num_prompts=self.prompts, **values)


def sim_config(settings: StudySettings, method: str, seed: int, defaults: Mapping[str, Any] | None = None,
               **overrides: Any) -> SimConfig:
    """SimConfig of one run. Every seed of a method gets the same config except ``seed`` (the app
    groups runs by their config without the seed); which seeds actually write snapshots is decided
    by :func:`job` (only seeds < snapshot_seeds: about 8 MB each at 14k prompts). ``defaults``: run
    fields a study gives this method, under the user's ``--set`` knobs; ``overrides``: over them."""
    snapshot_every = settings.snapshot_every if settings.snapshot_seeds > 0 else -1
    from simulators.knobs import apply
    base = SimConfig(method=method, seed=seed, steps=settings.steps, batch=settings.batch,
                     eval_every=min(settings.eval_every, settings.steps), snapshot_every=snapshot_every,
                     log_every=settings.log_every, world=settings.world_config(), **dict(defaults or {}))
    return replace(apply(base, settings.overrides), **overrides)


def job(settings: StudySettings, config: SimConfig, out_dir: Path, snapshots: bool = True) -> Job:
    """A run_jobs job: ``config`` into ``out_dir``, writing snapshots only for seeds < snapshot_seeds
    (and only where ``snapshots``); the config itself is the same for every seed."""
    return (config, out_dir, snapshots and config.seed < settings.snapshot_seeds)


def final_eval(runs: Sequence[RunSummary], name: str) -> np.ndarray:
    """Last evaluation of ``name`` per seed."""
    return np.array([r.evals[name][-1] if name in r.evals else np.nan for r in runs])


def eval_series(runs: Sequence[RunSummary], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(eval steps, values S x E) truncated to the shortest run."""
    length = min(len(r.eval_steps) for r in runs)
    return runs[0].eval_steps[:length], np.stack([r.evals[name][:length] for r in runs])


def scalar_series(runs: Sequence[RunSummary], name: str) -> np.ndarray:
    length = min(len(r.steps) for r in runs)
    return np.stack([r.scalars.get(name, np.full(len(r.steps), np.nan))[:length] for r in runs])


def bins_series(runs: Sequence[RunSummary], name: str) -> np.ndarray:
    """S x T x G per-bin rows."""
    length = min(len(r.steps) for r in runs)
    return np.stack([r.bins[name][:length] for r in runs])


def seed_mean(values: np.ndarray) -> np.ndarray:
    """NaN-aware mean over the first axis (seeds), NaN where no seed has a value, without warnings."""
    arr = np.asarray(values, float)
    ok = np.isfinite(arr)
    total = np.where(ok, arr, 0.0).sum(axis=0)
    count = ok.sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average along the last axis, NaN-aware (same length)."""
    arr = np.asarray(values, float)
    if window <= 1:
        return arr
    finite = np.isfinite(arr)
    filled = np.where(finite, arr, 0.0)
    kernel = np.ones(window)
    num = np.apply_along_axis(lambda v: np.convolve(v, kernel)[: v.size], -1, filled)
    den = np.apply_along_axis(lambda v: np.convolve(v, kernel)[: v.size], -1, finite.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def blocks(values_TG: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Average T rows into ``count`` blocks (NaN-aware): (block centers, count x G)."""
    T = values_TG.shape[0]
    edges = np.linspace(0, T, min(count, T) + 1).astype(int)
    rows = []
    for a, b in zip(edges[:-1], edges[1:]):
        with np.errstate(invalid="ignore"):
            chunk = values_TG[a:b]
            ok = np.isfinite(chunk)
            rows.append(np.where(ok.any(axis=0), np.nansum(np.where(ok, chunk, 0), axis=0) / np.maximum(ok.sum(axis=0), 1), np.nan))
    return (edges[:-1] + edges[1:]) / 2.0 + 1, np.array(rows)
