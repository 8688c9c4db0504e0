"""Which run of the CPU learning study runs when, and what a (possibly interrupted) study folder holds.

Warm starts first, then per seed the evaluation, Prompt-GDRO, GRPO, Rollout-GDRO, joint and GRPO's lr
grid; step-matched GRPO once Prompt-GDRO finished on every seed; grid extensions once the grid
finished. A finished run directory is reused. The order in full: docs/lm-study-notes.md#real_runs-lmstudy-study_plan.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

import numpy as np

from studykit import lrgrid
from studykit.stepmatch import MatchFactors, match_factors
from real_runs.lmstudy import tasks
from real_runs.lmstudy.metrics import final_metrics
from real_runs.lmstudy.learning_study import (MATCHED, METHODS, StudyConfig, finished, grid_name, initial_eval,
                                     label_matched, run_name, run_one, warm_config)

#: Val metrics GRPO's learning rate is tuned on (each picks its own best point).
TUNED = ("pass@1", "pass@8", "worst-group pass@1")
START = (lrgrid.point(1 / lrgrid.SQRT2), 1.0, lrgrid.point(lrgrid.SQRT2))


@dataclass(frozen=True)
class Task:
    """One unit of work for a worker: the warm start's evaluation or one training run."""

    seed: int
    name: str
    """``warm`` (the seed's warm start), ``initial``, a METHODS name, or ``grpo_lr<x>`` (a grid point)."""
    lr_scale: float = 1.0
    adv_scale: float = 1.0


class Plan:
    """The study's state: finished runs, the step-matching factors, GRPO's grid, and what to run next."""

    def __init__(self, cfg: StudyConfig, out: Path, warm_paths: dict[int, Path] | None = None,
                 log: Callable[[str], None] = print):
        self.cfg, self.out, self.log = cfg, out, log
        self.warm_paths: dict[int, Path] = dict(warm_paths or {})
        self.runs: dict[str, dict[int, Path]] = {}
        self.grid: dict[float, dict[int, Path]] = {}
        self.scales = list(START)
        self.factors: MatchFactors | None = None
        order = ("initial", "prompt_gdro", "grpo", "rollout_gdro", "joint")
        self.queue = [Task(s, "warm") for s in range(cfg.seeds) if s not in self.warm_paths]
        self.queue += [Task(s, name) for s in range(cfg.seeds) for name in order]
        self.queue += [Task(s, grid_name(x), lr_scale=x) for s in range(cfg.seeds) for x in START if x != 1.0]
        self.initial: dict[int, Path] = {}

    def take(self, slots: int) -> list[Task]:
        """Up to ``slots`` tasks to start now, in queue order among those whose seed's warm start is ready
        (new ones are planned once their inputs have finished)."""
        if not self.queue:
            self._plan_matched()
            self._plan_extension()
        ready = [t for t in self.queue if t.name == "warm" or t.seed in self.warm_paths][:slots]
        self.queue = [t for t in self.queue if t not in ready]
        return ready

    def done(self, task: Task, path: Path) -> None:
        if task.name == "warm":
            self.warm_paths[task.seed] = path
            return
        if task.name == "initial":
            self.initial[task.seed] = path
            return
        self.runs.setdefault(task.name, {})[task.seed] = path
        if task.name == "grpo" or task.name.startswith("grpo_lr"):
            self.grid.setdefault(task.lr_scale, {})[task.seed] = path

    def _all(self, by_seed: dict[int, Path] | None) -> bool:
        return by_seed is not None and len(by_seed) == self.cfg.seeds

    def _plan_matched(self) -> None:
        if self.factors is not None or not self._all(self.runs.get("prompt_gdro")):
            return
        self.factors = match_factors([read_scalars(p) for p in self.runs["prompt_gdro"].values()])
        self.log(f"step-matched GRPO: advantages x {self.factors.first:.3f} (E[m]) and x {self.factors.second:.3f} "
                 f"(sqrt E[m^2]), from Prompt-GDRO's {self.cfg.seeds} seed(s)")
        for name, kind in MATCHED.items():
            factor = getattr(self.factors, kind)
            if abs(factor - 1.0) <= 0.02:
                self.runs[name] = self.runs.setdefault("grpo", {})  # GRPO's own runs, filled as they finish
            else:
                self.queue += [Task(s, name, adv_scale=round(factor, 4)) for s in range(self.cfg.seeds)]

    def _plan_extension(self) -> None:
        if not all(self._all(self.grid.get(x)) for x in self.scales):
            return
        bests = [best_scale(self.grid, metric) for metric in TUNED]
        for x in lrgrid.extension(self.scales, bests, START, self.cfg.lr_extend):
            self.log(f"tuned GRPO: best val point at the edge of its grid, adding lr x {x:g}")
            self.scales.append(x)
            self.queue += [Task(s, grid_name(x), lr_scale=x) for s in range(self.cfg.seeds)]

    def result(self) -> dict[str, Any]:
        return {"runs": {m: dict(self.runs.get(m, {})) for m in METHODS}, "grid": self.grid,
                "initial": self.initial, "factors": self.factors.as_dict() if self.factors else None,
                "warm_paths": {s: str(p) for s, p in self.warm_paths.items()}}


def read_scalars(path: Path) -> dict[str, np.ndarray]:
    from gdro_lab.runformat.runlog import read_run

    return read_run(path).scalars


def best_scale(grid: dict[float, dict[int, Path]], metric: str) -> float:
    """The grid point whose seed mean of ``metric`` on the val half is highest (ties: the smaller lr)."""
    groups = list(tasks.SKILLS)
    return lrgrid.best({x: float(np.mean([final_metrics(p, groups, "val")[metric] for p in by_seed.values()]))
                        for x, by_seed in grid.items()})


def build_warm_start(cfg: StudyConfig, seed: int) -> str:
    """Seed ``seed``'s warm start (cached), built in a worker with ``cfg.threads`` threads."""
    import torch

    from real_runs.lmstudy.warmstart import warm_start

    torch.set_num_threads(cfg.threads)
    return str(warm_start(warm_config(cfg, seed), log=lambda _: None))


def run_study(cfg: StudyConfig, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every task of the :class:`Plan` (warm starts included) in a pool of ``cfg.jobs`` processes."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    plan = Plan(cfg, out, log=log)
    running: dict[Future[str], Task] = {}
    warm_done: list[float] = []
    with ProcessPoolExecutor(max_workers=cfg.jobs, mp_context=get_context("spawn")) as pool:
        while True:
            for task in plan.take(cfg.jobs - len(running)):
                if task.name == "warm":
                    future = pool.submit(build_warm_start, cfg, task.seed)
                elif task.name == "initial":
                    future = pool.submit(initial_eval, cfg, task.seed, out / "initial", plan.warm_paths[task.seed])
                else:
                    future = pool.submit(run_one, cfg, task.name, task.seed, out / "runs", plan.warm_paths[task.seed],
                                         task.lr_scale, task.adv_scale)
                running[future] = task
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                task = running.pop(future)
                plan.done(task, Path(future.result()))
                if task.name == "warm":
                    warm_done.append(time.perf_counter() - started)
                log(f"done: {task.name} seed {task.seed} ({(time.perf_counter() - started) / 60:.1f} min)")
    result = plan.result()
    result.update({"warm_seconds": max(warm_done, default=0.0), "seconds": time.perf_counter() - started,
                   "config": dataclasses.asdict(cfg), "complete_seeds": list(range(cfg.seeds))})
    return result


def finished_study(cfg: StudyConfig, out: Path) -> dict[str, Any]:
    """What a (possibly interrupted) study folder holds: the seeds with every method and grid point finished."""
    from real_runs.lmstudy.warmstart import default_cache_root

    runs_dir = out / "runs"
    names = set(METHODS) | {p.name.rsplit("-s", 1)[0] for p in runs_dir.glob("grpo_lr*-s*")} if runs_dir.is_dir() \
        else set(METHODS)
    found = {n: {s: runs_dir / run_name(n, s) for s in range(cfg.seeds) if finished(runs_dir / run_name(n, s))}
             for n in names}
    initial = {s: out / "initial" / f"initial-s{s}.json" for s in range(cfg.seeds)
               if (out / "initial" / f"initial-s{s}.json").is_file()}
    factors = (match_factors([read_scalars(p) for p in found["prompt_gdro"].values()])
               if found.get("prompt_gdro") else None)
    for name, kind in MATCHED.items():
        if factors is not None and abs(getattr(factors, kind) - 1.0) <= 0.02:
            found[name] = dict(found.get("grpo", {}))
        else:
            for path in found.get(name, {}).values():
                label_matched(path)  # runs of a study made before the labels existed get them here
    grid_names = sorted(n for n in found if n == "grpo" or n.startswith("grpo_lr"))
    complete = [s for s in range(cfg.seeds) if s in initial and all(s in found.get(m, {}) for m in METHODS)
                and all(s in found[n] for n in grid_names)]
    if not complete:
        raise FileNotFoundError(f"{out} holds no seed with every method finished: run the study first")
    grid = {_scale(n): {s: found[n][s] for s in complete} for n in grid_names}
    return {"runs": {m: {s: found[m][s] for s in complete} for m in METHODS}, "grid": grid,
            "initial": {s: initial[s] for s in complete},
            "factors": factors.as_dict() if factors else None,
            "warm_paths": {s: str(default_cache_root() / f"warmstart-{warm_config(cfg, s).key()}") for s in complete},
            "warm_seconds": float("nan"), "seconds": _span_seconds(found),
            "config": dataclasses.asdict(cfg), "complete_seeds": complete}


def _scale(name: str) -> float:
    """The lr scale of a grid run's name (its 6 digits snap back to the sqrt(2) point: lrgrid.point)."""
    return 1.0 if name == "grpo" else lrgrid.point(float(name.removeprefix("grpo_lr")))


def _span_seconds(runs: dict[str, dict[int, Path]]) -> float:
    """Wall time of the RL part from the files: the length of the union of the runs' own spans (each
    from its ``meta.json`` creation to its last evaluation written), so that the time between two
    sittings of a study stopped and started again is not counted (the warm starts' evaluations,
    which run before the first run, have no start time on file and are not counted either)."""
    import datetime as dt

    paths = {p for by_seed in runs.values() for p in by_seed.values()}
    spans = [(dt.datetime.fromisoformat(json.loads((p / "meta.json").read_text())["created"]).timestamp(),
              (p / "eval.jsonl").stat().st_mtime) for p in paths]
    return union_length(spans) if spans else math.nan


def union_length(spans: list[tuple[float, float]]) -> float:
    """The total length covered by the intervals ``spans`` (overlaps counted once)."""
    total, end = 0.0, -math.inf
    for low, high in sorted(spans):
        if high > end:
            total += high - max(low, end)
            end = high
    return total