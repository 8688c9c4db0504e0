"""Tuned baselines: every method on a learning-rate grid of sqrt(2) steps, extended while its best is at an edge.

Each method runs every seed at every point of its own grid (``studykit.lrgrid``), chosen per metric on
**val**, reported on **test**; generic over registered methods::

    grid = run_grid(settings, methods, root, "study")       # {(method, lr): [RunSummary per seed]}
    best_lr(grid, "prompt_gdro", "test/accuracy")           # chosen on val/accuracy

Detail: docs/studies-notes.md#simulators-studies-tuning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from gdro_lab.methods import METHODS
from simulators.parallel import RunSummary, run_jobs
from simulators.studies.common import StudySettings, final_eval, job, sim_config
from studykit import lrgrid
from studykit.stats import mean_ci
from studykit.tables import fmt, markdown_table

#: Metrics each method is tuned on (val split) and compared on (test split).
TUNED_METRICS = (("test/worst_group_accuracy", "worst-group held-out acc"), ("test/accuracy", "mean held-out acc"),
                 ("test/pass@8", "held-out pass@8"))
Grid = dict[tuple[str, float], list[RunSummary]]


def lr_dir(lr: float) -> str:
    return f"lr{lr:g}"


def start_grid(settings: StudySettings) -> tuple[float, ...]:
    """The starting grid: the settings' grid with lr scale 1 added (checked: sqrt(2) steps at most)."""
    return lrgrid.check_grid(tuple(settings.lr_grid) + (1.0,))


def method_grid(grid: Grid, method: str) -> list[float]:
    return sorted(lr for (m, lr) in grid if m == method)


def _run_points(settings: StudySettings, points: Sequence[tuple[str, float]], root: Path, description: str) -> Grid:
    keys = [(m, lr, s) for m, lr in points for s in range(settings.seeds)]
    jobs = [job(settings, sim_config(settings, m, s, lr_scale=lr), root / m / lr_dir(lr) / f"seed{s}",
                snapshots=lr == 1.0) for m, lr, s in keys]
    results = run_jobs(jobs, workers=settings.workers, progress=settings.progress, description=description)
    out: Grid = {}
    for (m, lr, _), summary in zip(keys, results):
        out.setdefault((m, lr), []).append(summary)
    return out


def run_grid(settings: StudySettings, methods: Sequence[str], root: Path, description: str) -> Grid:
    """Every method x its grid x seed into root/<method>/lr<x>/seed<k>, extending each method's grid
    while its best val point is at an edge (see the module docstring)."""
    return tuned_grid(settings, methods, lambda points, text: _run_points(settings, points, root, text), description)


def tuned_grid(settings: StudySettings, methods: Sequence[str],
               run_points: Callable[[list[tuple[str, float]], str], Grid], description: str) -> Grid:
    """Each method on the start grid, then one sqrt(2) step beyond an end per round while the method's
    best val point for any tuned metric is that end (at most ``settings.lr_extend`` steps per side).
    ``run_points(points, progress_text)`` runs (or reads) every seed of those (method, lr) points."""
    start = start_grid(settings)
    grid = run_points([(m, lr) for m in methods for lr in start], description)
    for round_ in range(1, 2 * settings.lr_extend + 1):
        todo = [(m, lr) for m in methods
                for lr in lrgrid.extension(method_grid(grid, m), [best_lr(grid, m, k) for k, _ in TUNED_METRICS],
                                           start, settings.lr_extend)]
        if not todo:
            break
        grid.update(run_points(todo, f"{description}, lr extension {round_}"))
    return grid


def best_lr(grid: Grid, method: str, metric: str) -> float:
    """The lr scale whose seed mean of the val split's ``metric`` is highest (ties: the smaller lr)."""
    val = metric.replace("test/", "val/")
    return lrgrid.best({lr: float(np.nanmean(final_eval(runs, val))) for (m, lr), runs in grid.items()
                        if m == method})


def edge_notes(grid: Grid, methods: Sequence[str], tuned: dict[str, dict[str, float]]) -> list[str]:
    """'<method> (<metric>)' for every best point still at the edge of its grid after the extension."""
    labels = dict(TUNED_METRICS)
    return sorted(f"{METHODS[m].label} ({labels[metric]})" for metric, by_method in tuned.items()
                  for m, lr in by_method.items() if m in methods and lrgrid.at_edge(method_grid(grid, m), lr))


def lr_table(grid: Grid, methods: Sequence[str]) -> tuple[dict[str, Any], str]:
    """Seed means of the held-out metrics at every learning-rate scale (val chooses, test reports)."""
    table: dict[str, Any] = {}
    rows = []
    names = ("val/accuracy", "val/worst_group_accuracy", "test/accuracy", "test/worst_group_accuracy", "accuracy")
    for m in methods:
        for lr in method_grid(grid, m):
            runs = grid[(m, lr)]
            entry = {k: list(map(float, mean_ci(final_eval(runs, k)))) for k in names}
            forgetting = [float(np.nanmean(r.scalars.get("sim/forgetting", np.array([np.nan])))) for r in runs]
            entry["forgetting"] = list(map(float, mean_ci(np.array(forgetting))))
            table.setdefault(m, {})[f"{lr:g}"] = entry
            rows.append([METHODS[m].label, f"{lr:g}"] + [fmt(*entry[k], 1, 100) for k in names]
                        + [fmt(*entry["forgetting"], 2, 1000)])
    return table, markdown_table(["method", "lr scale", "val acc (%)", "val worst-group (%)", "test acc (%)",
                                  "test worst-group (%)", "train acc (%)", "forgetting per step (x1e-3)"], rows)
