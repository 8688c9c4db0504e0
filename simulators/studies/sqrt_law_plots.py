"""Figures and the rollout-budget table of the `sqrt-law` study (simulators/studies/sqrt_law_study.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from gdro_lab.methods import METHODS
from simulators.parallel import RunSummary
from simulators.studies.common import bins_series, blocks, scalar_series, seed_mean, smooth
from studykit.plots import band, save_figure


def economics(grouped: dict[str, list[RunSummary]], start: int) -> dict[str, dict[str, float]]:
    out = {}
    for method, runs in grouped.items():
        count = bins_series(runs, "count")[:, start:]
        n = np.nan_to_num(bins_series(runs, "rollouts")[:, start:])
        G = count.shape[2]
        high = np.arange(G) >= G // 2
        budget = count * n
        out[method] = {"prompt_share_high": float(100 * count[..., high].sum() / max(count.sum(), 1)),
                       "budget_share_high": float(100 * budget[..., high].sum() / max(budget.sum(), 1)),
                       "rollouts_high": float(budget[..., high].sum() / max(count[..., high].sum(), 1))}
    return out


def figures(grouped: dict[str, list[RunSummary]], out: Path, start: int, name: str) -> dict[str, str]:
    figs = {}
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), layout="constrained")
    for method, runs in grouped.items():
        label = METHODS[method].label
        se = smooth(scalar_series(runs, "sim/se_true_actual"), 10)
        steps = np.arange(1, se.shape[1] + 1)
        band(axes[0], steps, se, label)
        band(axes[1], steps, smooth(scalar_series(runs, "sim/se_true_reduction_pct"), 10), label + " (true σ)")
    any_runs = next(iter(grouped.values()))
    opt = smooth(scalar_series(any_runs, "sim/se_true_sqrt"), 10)
    axes[0].plot(np.arange(1, opt.shape[1] + 1), seed_mean(opt), "k--", lw=1, label="sqrt optimum")
    axes[0].set_title("WSE (Eq. 33) with the true σ, 10-step mean")
    axes[1].plot(np.arange(1, opt.shape[1] + 1),
                 seed_mean(smooth(scalar_series(any_runs, "sim/se_true_sqrt_reduction_pct"), 10)), "k--", lw=1,
                 label="sqrt optimum")
    axes[1].axhspan(22.6, 37.1, color="grey", alpha=0.15, label="paper 22.6–37.1%")
    axes[1].set_title("WSE reduction vs uniform (%)")
    for method, runs in grouped.items():
        if METHODS[method].allocator == "gdro":
            band(axes[2], np.arange(1, len(runs[0].steps) + 1), scalar_series(runs, "mu"), METHODS[method].label)
    axes[2].set_title("shadow price μ (Eq. 21)")
    for ax in axes:
        ax.axvline(start, color="grey", lw=0.6, ls=":")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # the μ panel is empty without a Rollout-GDRO method
            ax.legend(fontsize=7)
    figs["wse"] = save_figure(fig, out / f"fig_wse_{name}.png")

    alloc = [m for m in grouped if METHODS[m].allocator != "uniform"]
    fig, axes = plt.subplots(2, max(len(alloc), 1), figsize=(4.6 * max(len(alloc), 1), 6.2), squeeze=False,
                             layout="constrained")
    image = None
    for col, method in enumerate(alloc):
        rollouts = seed_mean(bins_series(grouped[method], "rollouts"))
        centers, grid = blocks(rollouts, 60)
        image = axes[0, col].imshow(grid.T, aspect="auto", origin="lower", cmap="viridis", vmin=2, vmax=12,
                                    extent=(0, centers[-1] + 1, -0.5, grid.shape[1] - 0.5))
        axes[0, col].set_title(f"{METHODS[method].label}: rollouts per prompt", fontsize=9)
        axes[0, col].set_ylabel("bin (0 = hardest)")
        one = grouped[method][0].bins["rollouts"]
        for b in range(one.shape[1]):
            axes[1, col].plot(np.arange(1, one.shape[0] + 1), one[:, b], lw=0.8, label=f"bin {b}")
        axes[1, col].set_title("seed 0: n_b per step (the staircase)", fontsize=9)
        axes[1, col].set_xlabel("step")
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), fraction=0.02)
        axes[1, 0].legend(fontsize=6, ncol=2)
    figs["staircase"] = save_figure(fig, out / f"fig_staircase_{name}.png")
    return figs
