"""Figures of the `curriculum` study (simulators/studies/curriculum_study.py): learning curves, traveling
waves, the lead-lag gap, the rollout staircase, final bars and accuracy against the learning rate."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from gdro_lab.methods import METHODS
from simulators.parallel import RunSummary
from simulators.simulator_methods import method_names
from simulators.studies.common import bins_series, blocks, eval_series, final_eval, scalar_series, seed_mean, smooth
from simulators.studies.tuning import TUNED_METRICS as GAIN_METRICS
from simulators.studies.tuning import Grid
from studykit.plots import band, save_figure
from studykit.stats import mean_ci

#: Curves of the first panels (the curriculum study's METRICS[:3]).
CURVES = (("test/accuracy", "held-out acc"), ("test/worst_group_accuracy", "held-out worst-group"),
          ("accuracy", "train acc"))


def color(method: str) -> str:
    """One fixed colour per method across every figure."""
    order = method_names()
    return f"C{order.index(method) % 10}"


def figures(grouped: dict[str, list[RunSummary]], out: Path) -> dict[str, str]:
    figs: dict[str, str] = {}
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained")
    for ax, (name, label) in zip(axes.ravel(), CURVES + (("effective_support", "signal support (groups)"),)):
        for method, runs in grouped.items():
            steps, values = eval_series(runs, name)
            if name == "effective_support":
                steps, values = steps[1:], values[:, 1:]
            band(ax, steps, values, METHODS[method].label, color(method))
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    figs["curves"] = save_figure(fig, out / "fig_curves.png")

    wave_methods = [m for m in ("grpo", "class_gdro", "prompt_gdro", "joint") if m in grouped]
    if wave_methods:
        fig, axes = plt.subplots(len(wave_methods), 3, figsize=(14, 3.0 * len(wave_methods)), squeeze=False,
                                 layout="constrained")
        for row, method in enumerate(wave_methods):
            for col, (field, cmap) in enumerate((("share", "viridis"), ("weight", "magma"), ("reward", "coolwarm"))):
                series = seed_mean(bins_series(grouped[method], field))
                centers, grid = blocks(series, 60)
                ax = axes[row, col]
                kwargs = {"vmin": -1, "vmax": 1} if field == "reward" else {}
                image = ax.imshow(grid.T, aspect="auto", origin="lower", cmap=cmap,
                                  extent=(0, centers[-1] * 1.0 + 1, -0.5, grid.shape[1] - 0.5), **kwargs)
                fig.colorbar(image, ax=ax, fraction=0.04)
                ax.set_title(f"{METHODS[method].label}: {field} by bin", fontsize=9)
                ax.set_ylabel("bin (0 = hardest)")
                ax.set_xlabel("step")
        figs["wave"] = save_figure(fig, out / "fig_traveling_wave.png")

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained")
    for method, runs in grouped.items():
        if METHODS[method].weighter == "uniform":
            continue
        gap = smooth(scalar_series(runs, "lead_lag_gap"), 20)
        band(axes[0], np.arange(1, gap.shape[1] + 1), gap, METHODS[method].label, color(method))
    axes[0].axhline(0, color="k", lw=0.6)
    axes[0].set_title("lead-lag gap Δμ = μ_weight − μ_data (Eq. 32), 20-step mean")
    axes[0].set_xlabel("step")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    for method, runs in grouped.items():
        z = smooth(scalar_series(runs, "zero_variance_frac"), 20)
        band(axes[1], np.arange(1, z.shape[1] + 1), z, METHODS[method].label, color(method))
    axes[1].set_title("zero-variance prompts in the batch (no gradient)")
    axes[1].legend(fontsize=7)
    axes[1].set_xlabel("step")
    figs["leadlag"] = save_figure(fig, out / "fig_leadlag.png")

    alloc_methods = [m for m in grouped if METHODS[m].allocator != "uniform"]
    if alloc_methods:
        fig, axes = plt.subplots(1, len(alloc_methods), figsize=(4.2 * len(alloc_methods), 3.3), squeeze=False,
                                 layout="constrained")
        for ax, method in zip(axes[0], alloc_methods):
            series = seed_mean(bins_series(grouped[method], "rollouts"))
            centers, grid = blocks(series, 60)
            image = ax.imshow(grid.T, aspect="auto", origin="lower", cmap="viridis", vmin=2, vmax=12,
                              extent=(0, centers[-1] + 1, -0.5, grid.shape[1] - 0.5))
            ax.set_title(f"{METHODS[method].label}: rollouts per prompt", fontsize=9)
            ax.set_xlabel("step")
            ax.set_ylabel("bin")
        fig.colorbar(image, ax=axes[0].tolist(), fraction=0.02)
        figs["staircase"] = save_figure(fig, out / "fig_rollout_staircase.png")

    fig, ax = plt.subplots(figsize=(10, 3.8), layout="constrained")
    labels = [METHODS[m].label for m in grouped]
    x = np.arange(len(labels))
    for offset, (name, label) in zip((-0.2, 0.2), CURVES[:2]):
        means, halves = zip(*(mean_ci(final_eval(runs, name)) for runs in grouped.values()))
        ax.bar(x + offset, np.array(means) * 100, 0.4, yerr=np.nan_to_num(np.array(halves) * 100), label=label, capsize=3,
               color=[color(m) for m in grouped], alpha=1.0 if offset < 0 else 0.55, edgecolor="k", lw=0.5,
               hatch=None if offset < 0 else "//")
    ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("% at the last step")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    figs["bars"] = save_figure(fig, out / "fig_final.png")
    return figs


def lr_figure(grid: Grid, methods: Sequence[str], out: Path) -> str:
    fig, axes = plt.subplots(1, len(GAIN_METRICS), figsize=(5.5 * len(GAIN_METRICS), 3.8), layout="constrained")
    for ax, (metric, label) in zip(axes, GAIN_METRICS):
        for m in methods:
            lrs = sorted(lr for (mm, lr) in grid if mm == m)
            means, halves = zip(*(mean_ci(final_eval(grid[(m, lr)], metric)) for lr in lrs))
            ax.errorbar(lrs, np.array(means) * 100, yerr=np.nan_to_num(np.array(halves) * 100), label=METHODS[m].label,
                        color=color(m), marker="o", capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("learning-rate scale")
        ax.set_title(f"{label} (%) at the last step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save_figure(fig, out / "fig_lr.png")
