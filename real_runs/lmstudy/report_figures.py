"""Figures of the CPU learning study's report: learning curves, per-skill results, traveling wave, staircase.

Read from the run directories (``gdro_lab.runformat.runlog.read_run``); seed means with 95% t-intervals
(``studykit.plots.band``). Held-out curves are of the **test** half.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from gdro_lab.runformat.runlog import RunData, read_run
from real_runs.lmstudy.labels import METHOD_LABELS
from studykit.plots import band, save_figure
from studykit.stats import mean_ci


def figure_curves(data: dict[str, Any], path: Path) -> str:
    """Held-out pass@1, pass@8, worst-group pass@1 and the training success rate against step.

    Seed mean ± 95% CI; the training curve is a 10-step running mean of each run's mean success.
    """
    fig, axes = plt.subplots(1, 4, figsize=(20, 3.8), layout="constrained")
    for axis, metric in zip(axes, ("pass@1", "pass@8", "worst-group pass@1")):
        for method, curve in data["curves"].items():
            band(axis, curve["step"], curve[metric], METHOD_LABELS[method])
        axis.set_title(f"held-out test {metric}")
        axis.set_xlabel("step")
    for method, curve in data["curves"].items():
        train = curve["train_success"]
        window = max(1, min(10, train.shape[1]))
        smooth = np.stack([np.convolve(x, np.ones(window) / window, mode="valid") for x in train])
        band(axes[3], np.arange(smooth.shape[1]) + window, smooth, METHOD_LABELS[method])
    axes[3].set_title(f"training mean success ({window}-step mean)" if data["curves"] else "training")
    axes[3].set_xlabel("step")
    axes[0].legend(fontsize=8)
    return save_figure(fig, path)


def figure_groups(data: dict[str, Any], groups: Sequence[str], path: Path) -> str:
    """Per-group held-out pass@1 at the last step (seed mean), warm start as a reference."""
    fig, axis = plt.subplots(figsize=(9, 3.6), layout="constrained")
    methods = list(data["per_group"])
    width = 0.8 / (len(methods) + 1)
    x = np.arange(len(groups))
    axis.bar(x, data["initial"]["per_group"], width, label="warm start", color="lightgray")
    for i, method in enumerate(methods):
        mean, half = mean_ci(data["per_group"][method])
        axis.bar(x + (i + 1) * width, mean, width, yerr=half, label=METHOD_LABELS[method], capsize=2)
    axis.set_xticks(x + 0.4, groups)
    axis.set_ylabel("held-out test pass@1")
    axis.legend(fontsize=8, ncols=3)
    return save_figure(fig, path)


def figure_wave(runs: dict[str, dict[int, Path]], path: Path) -> str:
    """Traveling wave: prompt share and adversary weight by difficulty bin over steps (seed 0)."""
    shown = [m for m in ("prompt_gdro", "joint", "grpo") if m in runs]
    fig, axes = plt.subplots(len(shown), 2, figsize=(12, 3.2 * len(shown)), squeeze=False, layout="constrained")
    for row, method in zip(axes, shown):
        run = read_run(runs[method][min(runs[method])])
        for axis, field in zip(row, ("share", "weight")):
            _heatmap(axis, run, field, f"{METHOD_LABELS[method]}: {field}")
    return save_figure(fig, path)


def figure_staircase(runs: dict[str, dict[int, Path]], path: Path) -> str:
    """Rollout staircase: mean rollouts per prompt by bin (seed mean over the run) and over steps."""
    shown = [m for m in ("rollout_gdro", "joint") if m in runs]
    fig, axes = plt.subplots(len(shown), 2, figsize=(12, 3.2 * len(shown)), squeeze=False, layout="constrained")
    for row, method in zip(axes, shown):
        found = [read_run(p).bins.get("rollouts") for p in runs[method].values()]
        mats = [m for m in found if m is not None]
        if not mats:
            continue
        length = min(len(m) for m in mats)
        stacked = np.stack([m[:length] for m in mats])
        with warnings.catch_warnings():  # bins that never held a prompt stay NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_G = np.nanmean(stacked, axis=(0, 1))
        row[0].step(np.arange(mean_G.size), mean_G, where="mid")
        row[0].set_title(f"{METHOD_LABELS[method]}: mean rollouts per prompt by bin")
        row[0].set_xlabel("bin (0 = hardest)")
        _heatmap(row[1], read_run(runs[method][min(runs[method])]), "rollouts",
                 f"{METHOD_LABELS[method]}: rollouts")
    return save_figure(fig, path)


def _heatmap(axis: Any, run: RunData, field: str, title: str) -> None:
    values = run.bins.get(field)
    axis.set_title(title)
    if values is None:
        axis.text(0.5, 0.5, f"not logged: {field}", ha="center", transform=axis.transAxes)
        return
    mesh = axis.imshow(values.T, aspect="auto", origin="lower", interpolation="nearest",
                       extent=(run.steps[0] - 0.5, run.steps[-1] + 0.5, -0.5, values.shape[1] - 0.5))
    axis.figure.colorbar(mesh, ax=axis)
    axis.set_xlabel("step")
    axis.set_ylabel("bin (0 = hardest)")
