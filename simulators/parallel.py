"""Run many (method, seed) simulations over worker processes, with one step-level progress report.

Each job writes its own run directory and returns a compact summary (``MemorySummary``; ``summarize``
reads a finished run into the same form); progress is a tqdm bar on a terminal, else a plain line
every few seconds. Detail: docs/simulator-notes.md#simulators-parallel.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from gdro_lab import read_run
from simulators.loop import run_simulation
from simulators.simulator_config import SimConfig

#: Step scalars kept in summaries (the rest stay in the run directory).
SUMMARY_SCALARS = (
    "mean_success", "sim/true_success", "zero_variance_frac", "mean_rollouts", "total_rollouts", "mu",
    "lead_lag_gap", "mu_weight", "mu_data", "effective_support", "prompt_gdro/effective_support",
    "se_actual", "se_uniform", "se_sqrt", "se_reduction_pct", "se_sqrt_reduction_pct",
    "sim/se_true_actual", "sim/se_true_uniform", "sim/se_true_sqrt", "sim/se_true_reduction_pct",
    "sim/se_true_sqrt_reduction_pct", "num_unassigned",
    "sim/prompt_var_reduction_pct", "sim/prompt_wse_reduction_pct", "sim/prompt_oracle_var_reduction_pct",
    "sim/prompt_oracle_wse_reduction_pct", "compute/rollouts_generated", "compute/rollouts_trained",
    "compute/prompts_trained", "compute/tokens_generated", "compute/tokens_trained", "select/skipped",
    "multiplier_mean", "multiplier_sq_mean", "sim/forgetting", "compute/rollouts_aborted", "compute/rollouts_kept_tail",
    "compute/tokens_saved",
)
SUMMARY_BINS = ("share", "weight", "multiplier", "rollouts", "reward", "success", "count", "sigma")


@dataclass
class RunSummary:
    """What a report needs from one run directory: step series, per-bin rows, evaluations."""

    method: str
    seed: int
    path: str
    steps: np.ndarray
    scalars: dict[str, np.ndarray]
    bins: dict[str, np.ndarray]
    eval_steps: np.ndarray
    evals: dict[str, np.ndarray]
    config: dict[str, Any]
    wall_s: float = float("nan")
    timing: dict[str, float] | None = None
    """Controller seconds and steps of the run (``on_close`` of the loop's observer); None when read back."""


def summarize(path: str | Path, wall_s: float = float("nan")) -> RunSummary:
    """Read a run directory into a :class:`RunSummary`."""
    run = read_run(path)
    names = sorted({k for record in run.evals for k in record["metrics"]})
    evals = {n: np.array([np.nan if r["metrics"].get(n) is None else r["metrics"][n] for r in run.evals], float)
             for n in names}
    return RunSummary(method=str(run.config.get("method")), seed=int(run.config.get("seed", -1)), path=str(path),
                      steps=run.steps, scalars={k: run.scalars[k] for k in SUMMARY_SCALARS if k in run.scalars},
                      bins={k: run.bins[k] for k in SUMMARY_BINS if k in run.bins},
                      eval_steps=np.array([r["step"] for r in run.evals], np.int64), evals=evals,
                      config=run.config, wall_s=wall_s)


class MemorySummary:
    """Observer of one run (``simulators.loop.Observer``) that keeps what a report needs."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.scalars: dict[str, list[float]] = {k: [] for k in SUMMARY_SCALARS}
        self.bins: dict[str, list[np.ndarray]] = {}
        self.eval_steps: list[int] = []
        self.evals: list[dict[str, float]] = []
        self.timing: dict[str, float] | None = None

    def on_step(self, step: int, scalars: Any, rows: Any) -> None:
        self.steps.append(step)
        for name, column in self.scalars.items():
            value = scalars.get(name)
            column.append(np.nan if value is None else float(value))
        for name in SUMMARY_BINS:
            if name in rows:
                self.bins.setdefault(name, []).append(np.asarray(rows[name], float))

    def on_eval(self, step: int, metrics: Any) -> None:
        self.eval_steps.append(step)
        self.evals.append({k: float(v) for k, v in metrics.items()})

    def on_close(self, timing: dict[str, float]) -> None:
        self.timing = dict(timing)

    def summary(self, method: str, seed: int, path: str, config: dict[str, Any], wall_s: float) -> RunSummary:
        names = sorted({k for record in self.evals for k in record})
        evals = {n: np.array([r.get(n, np.nan) for r in self.evals], float) for n in names}
        scalars = {k: np.array(v, float) for k, v in self.scalars.items() if v and np.isfinite(v).any()}
        bins = {k: np.stack(v) for k, v in self.bins.items()}
        return RunSummary(method=method, seed=seed, path=path, steps=np.array(self.steps, np.int64),
                          scalars=scalars, bins=bins, eval_steps=np.array(self.eval_steps, np.int64),
                          evals=evals, config=config, wall_s=wall_s, timing=self.timing)


_PROGRESS: Callable[[int], None] | None = None


def _init_worker(counter: Any) -> None:
    global _PROGRESS

    def bump(n: int) -> None:
        with counter.get_lock():
            counter.value += n

    _PROGRESS = bump


def _bump(n: int) -> None:
    if _PROGRESS is not None:
        _PROGRESS(n)


#: (config, out_dir) or (config, out_dir, write snapshots): the third item stays out of the config, so
#: seeds of one method share their config.json except the seed.
Job = tuple[Any, Path] | tuple[Any, Path, bool]


def _job(config: SimConfig, out_dir: str, snapshots: bool = True) -> RunSummary:
    from simulators.loop import _config_payload
    start = time.perf_counter()
    memory = MemorySummary()
    run_simulation(config, out_dir, progress=_bump, observer=memory, snapshots=snapshots)
    return memory.summary(config.method, config.seed, out_dir, _config_payload(config), time.perf_counter() - start)


def run_jobs(jobs: Sequence[Job], workers: int = 2, progress: bool | None = None,
             description: str = "simulate", job: Callable[[Any, str], Any] = _job) -> list[Any]:
    """Run every (config, out_dir) job; results in job order. ``workers=1`` runs in this process."""
    global _PROGRESS
    total = sum(j[0].steps for j in jobs)
    bar: Any = None
    if progress is True or (progress is None and sys.stderr.isatty()):
        bar = _make_bar(total, description, True)
    elif progress is None:
        bar = PlainProgress(total, description)
    results: list[Any] = [None] * len(jobs)
    try:
        if workers <= 1 or len(jobs) <= 1:
            _PROGRESS = None if bar is None else bar.update
            try:
                for index, (config, out_dir, *extra) in enumerate(jobs):
                    results[index] = job(config, str(out_dir), *extra)
            finally:
                _PROGRESS = None
            return results
        context = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        counter = context.Value("q", 0)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker,
                                 initargs=(counter,)) as pool:
            futures: dict[Future[Any], int] = {pool.submit(job, c, str(o), *extra): i
                                               for i, (c, o, *extra) in enumerate(jobs)}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                for future in done:
                    results[futures[future]] = future.result()
                if bar is not None:
                    bar.update(counter.value - bar.n)
        return results
    finally:
        if bar is not None:
            bar.close()


class PlainProgress:
    """Progress for logs: one plain line on stderr every ``every`` seconds (and at the end)."""

    def __init__(self, total: int, description: str, every: float = 5.0):
        self.total, self.description, self.every = max(total, 1), description, every
        self.n = 0
        self.start = self.last = time.perf_counter()

    def update(self, count: int) -> None:
        self.n += count
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self._line(now)

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        left = elapsed * (self.total - self.n) / self.n if self.n else float("nan")
        eta = f", about {left:.0f} s left" if self.n else ""
        print(f"{self.description}: {self.n:,}/{self.total:,} steps ({100 * self.n / self.total:.0f}%), "
              f"{elapsed:.0f} s{eta}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._line(time.perf_counter())


def _make_bar(total: int, description: str, show: bool) -> Any:
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=description, unit="step", unit_scale=True, file=sys.stderr, dynamic_ncols=True)
