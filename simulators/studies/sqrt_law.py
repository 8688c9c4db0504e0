"""Study `sqrt-law`: uniform n vs Rollout-GDRO vs the square-root optimum at the same mean budget.

Eq. 33: WSE(t) = sum_b q_t(b) sigma_b / sqrt(n_b(t)); the reduction is 100 (1 - WSE / WSE_uniform)
with the same compute (the paper reports 22.6-37.1% on real runs). Two versions are reported:
with the controller's own EMA estimate of sigma_b (what a real run can log, as the paper did) and
with the simulator's true sigma_b (sqrt of the mean of 4 p (1 - p) over the bin's prompts). The
optimum is the box-constrained square-root law on the true variances (Thm 4.2), and the gap is
how far each allocation stays from it. Also: Eq. 28's variance proxy, the staircase of rollouts
by bin over steps, the shadow price, where the budget goes, and whether any of it changes learning.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from simulators.methods import METHODS
from simulators.parallel import RunSummary
from simulators.reporting import band, fmt, markdown_table, mean_ci, plt, prepare_output, save_figure, write_json
from simulators.studies.common import (StudySettings, bins_series, blocks, final_eval, run_methods, scalar_series,
                                       seed_mean, smooth)

DEFAULTS: dict[str, Any] = {"seeds": 5, "steps": 1000, "prompts": 14116, "batch": 256,
            "methods": ("grpo", "rollout_gdro", "sqrt_oracle", "knapsack")}
#: The default world, and a bimodal one (a much wider, heavier prompt-difficulty tail: many prompts
#: near-certain, many near-impossible, so bins differ more in reward variance and unequal allocation
#: has more room).
WORLDS = {"base": {}, "bimodal": {"prompt_difficulty_scale": 4.0, "difficulty_offset": -2.5,
                                  "prompt_difficulty_tail": 1.0}}


def headroom_table(n_bar: int = 4, n_min: int = 2, n_max: int = 12) -> str:
    """Best WSE reduction when a fraction f of prompts has sigma = 0 and the rest sigma = 1 (exact).

    Uses gdro_lab.diagnostics.se_report, so it is the same optimum the runs are scored against.
    """
    from gdro_lab.diagnostics import se_report
    rows = []
    for zero_share in (0.0, 0.25, 0.5, 0.6, 0.7, 0.75, 0.8):
        share = np.array([zero_share, 1 - zero_share])
        sigma = np.array([1e-6, 1.0])
        opt = se_report(share, sigma, np.full(2, float(n_bar)), n_bar, n_min, n_max)["se_sqrt_reduction_pct"]
        rows.append([f"{100 * zero_share:.0f}%", f"{opt:.1f}%"])
    return markdown_table(["share of prompts with σ ≈ 0", "best WSE reduction"], rows)


def _best_reduction(share_zero: float, ratio: float, n_bar: int, n_min: int, n_max: int) -> float:
    """Best WSE reduction of a two-bin batch: share ``share_zero`` at sigma 1/ratio, the rest at sigma 1."""
    from gdro_lab.diagnostics import se_report
    share = np.array([share_zero, 1 - share_zero])
    sigma = np.array([1.0 / ratio, 1.0])
    return float(se_report(share, sigma, np.full(2, float(n_bar)), n_bar, n_min, n_max)["se_sqrt_reduction_pct"])


def dispersion_table(n_bar: int = 4, n_min: int = 2, n_max: int = 12,
                     targets: Sequence[float] = (5.0, 10.0, 22.6, 33.4, 37.1)) -> tuple[list[dict[str, float]], str]:
    """What a given WSE reduction needs (exact, two-bin batch, gdro_lab's se_report optimum):

    - the share of the batch in bins of (near) zero reward variance (sigma ratio 10^6), and
    - at equal shares (50/50), the ratio of the two bins' sigma.
    Solved by bisection (scipy.optimize.brentq); NaN when even the extreme cannot reach the target.
    """
    from scipy.optimize import brentq
    rows, data = [], []
    for target in targets:
        def by_share(f: float) -> float:
            return _best_reduction(f, 1e6, n_bar, n_min, n_max) - target

        def by_ratio(log_r: float) -> float:
            return _best_reduction(0.5, float(np.exp(log_r)), n_bar, n_min, n_max) - target
        share = brentq(by_share, 0.0, 0.99, xtol=1e-4) if by_share(0.99) > 0 else float("nan")
        ratio = float(np.exp(brentq(by_ratio, 0.0, np.log(1e6), xtol=1e-4))) if by_ratio(np.log(1e6)) > 0 \
            else float("nan")
        data.append({"target_pct": target, "zero_variance_share": share, "sigma_ratio_equal_shares": ratio})
        rows.append([f"{target:.1f}%", "unreachable" if not np.isfinite(share) else f"{100 * share:.0f}%",
                     "unreachable (> 10^6)" if not np.isfinite(ratio) else f"{ratio:,.0f}×"])
    return data, markdown_table(["WSE reduction", "share of the batch with σ ≈ 0 needed",
                                 "σ spread needed at equal shares (two bins)"], rows)


def run(settings: StudySettings) -> Path:
    settings.validate()
    prepare_output(settings.out)
    methods = settings.methods or DEFAULTS["methods"]
    sections, total = [], 0.0
    for name, overrides in WORLDS.items():
        world_settings = replace(settings, world={**overrides, **settings.world})
        grouped, wall = run_methods(world_settings, methods, f"sqrt-law ({name})", subdir=name)
        total += wall
        sections.append((name, overrides, grouped))
    return write_report(sections, settings, total)


def _warmup(runs: Sequence[RunSummary]) -> int:
    """Steps of the first epoch (every prompt unassigned until seen once) are left out of averages."""
    cfg = runs[0].config
    return int(cfg["world"]["num_prompts"] // cfg["batch"])


def _horizon_mean(values_ST: np.ndarray, start: int) -> np.ndarray:
    tail = values_ST[:, start:]
    ok = np.isfinite(tail)
    return np.where(ok.any(axis=1), np.where(ok, tail, 0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1), np.nan)


def _variance_proxy_reduction(runs: Sequence[RunSummary], n_bar: float) -> np.ndarray:
    """Eq. 28: 100 (1 - sum q v / n / sum q v / n_bar) per step, with the logged sigma estimate (S x T)."""
    share, sigma, n = (bins_series(runs, f) for f in ("share", "sigma", "rollouts"))
    ok = np.isfinite(sigma) & np.isfinite(n) & (share > 0)
    actual = np.where(ok, share * sigma**2 / np.where(ok, n, 1), 0).sum(axis=2)
    uniform = np.where(ok, share * sigma**2 / n_bar, 0).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(uniform > 0, 100 * (1 - actual / uniform), np.nan)


def write_report(sections: list[tuple[str, dict[str, Any], dict[str, list[RunSummary]]]], settings: StudySettings,
                 wall: float) -> Path:
    out = settings.out
    first = next(iter(sections[0][2].values()))[0].config
    seeds = min(len(r) for r in sections[0][2].values())
    lines = [
        "# Study `sqrt-law`: the square-root law at equal rollout budget",
        "",
        f"{len(sections[0][2])} allocators × {seeds} seeds in {len(sections)} worlds, {first['steps']} steps, "
        f"{first['batch']} prompts per step, {first['world']['num_prompts']:,} prompts, n̄ = {first['n_bar']} "
        f"(n ∈ [{first['n_min']}, {first['n_max']}]). Seed means ± 95% t-intervals. Wall time {wall:.0f} s.",
        "",
        "*WSE reduction* = 100 (1 − WSE / WSE_uniform) of Eq. 33 at the same compute; *est. σ* uses the "
        "allocator's EMA of the within-prompt reward std per bin (what a real run logs), *true σ* the "
        "simulator's exact one; *sqrt optimum* is the box-constrained square-root law on the true variances "
        "(it minimises Eq. 28, so an allocation can score a slightly higher WSE reduction than it); "
        "*gap* = optimum − actual reduction.",
        "",
    ]
    summary: dict[str, Any] = {"study": "sqrt-law", "wall_s": wall, "config": first, "worlds": {}}
    dispersion, dispersion_md = dispersion_table(first["n_bar"], first["n_min"], first["n_max"])
    lines += ["## How much can the square-root law save at all?", "",
              "With n ∈ [2, 12] and n̄ = 4, the WSE reduction is bounded by how much of the batch has (near) zero "
              "reward variance, since only there can rollouts be taken away cheaply. Exact optimum for a two-bin "
              "batch:", "", headroom_table(first["n_bar"], first["n_min"], first["n_max"]), "",
              "So the paper's 22.6–37.1% corresponds to roughly 60–75% of the batch sitting in "
              "bins with almost no reward variance (all-fail or all-pass prompts).", "",
              "**SE-dispersion analysis: what a given reduction needs.** Solved exactly (bisection on the same "
              "optimum) for a two-bin batch, either by moving mass into a zero-variance bin or, at equal "
              "shares, by spreading the two bins' σ apart:", "", dispersion_md, "",
              "Bins built from noisy pass@k estimates keep σ ≈ 0.2–0.4 even in their mostly-solved or "
              "mostly-failed bins (spreads of a few ×), which is why the runs below stay far from the paper's "
              "figure; a reduction in the paper's range says more about how much of its batch was never or "
              "always solved than about the controller.", ""]
    summary["se_dispersion"] = dispersion
    for name, overrides, grouped in sections:
        section_lines, section_summary = _section(name, overrides, grouped, out)
        lines += section_lines
        summary["worlds"][name] = section_summary
    lines += ["## Run directories", "",
              "`runs/<world>/<method>/seed<k>/` in the gdro run format (not committed; regenerate with "
              "`gdro simulate sqrt-law`).", ""]
    write_json(out / "summary.json", summary)
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _section(name: str, overrides: dict[str, Any], grouped: dict[str, list[RunSummary]], out: Path
             ) -> tuple[list[str], dict[str, Any]]:
    first = next(iter(grouped.values()))[0].config
    start = _warmup(next(iter(grouped.values())))
    stats: dict[str, dict[str, list[float]]] = {}
    rows = []
    for method, runs in grouped.items():
        entry = {
            "reduction_estimated_pct": mean_ci(_horizon_mean(scalar_series(runs, "se_reduction_pct"), start)),
            "reduction_true_pct": mean_ci(_horizon_mean(scalar_series(runs, "sim/se_true_reduction_pct"), start)),
            "optimum_reduction_pct": mean_ci(_horizon_mean(scalar_series(runs, "sim/se_true_sqrt_reduction_pct"), start)),
            "variance_proxy_reduction_pct": mean_ci(_horizon_mean(_variance_proxy_reduction(runs, first["n_bar"]), start)),
            "accuracy": mean_ci(final_eval(runs, "accuracy")),
            "worst_group_accuracy": mean_ci(final_eval(runs, "worst_group_accuracy")),
            "rollouts_total": mean_ci(final_eval(runs, "rollouts_total")),
        }
        gap = (_horizon_mean(scalar_series(runs, "sim/se_true_sqrt_reduction_pct"), start)
               - _horizon_mean(scalar_series(runs, "sim/se_true_reduction_pct"), start))
        entry["gap_to_optimum_pp"] = mean_ci(gap)
        stats[method] = {k: [float(v[0]), float(v[1])] for k, v in entry.items()}
        e = stats[method]
        rows.append([METHODS[method].label, fmt(*e["reduction_estimated_pct"], 1), fmt(*e["reduction_true_pct"], 1),
                     fmt(*e["optimum_reduction_pct"], 1), fmt(*e["gap_to_optimum_pp"], 1),
                     fmt(*e["variance_proxy_reduction_pct"], 1), fmt(*e["accuracy"], 1, 100),
                     fmt(*e["worst_group_accuracy"], 1, 100), f"{e['rollouts_total'][0]:,.0f}"])
    table = markdown_table(["method", "WSE reduction, est. σ (%)", "WSE reduction, true σ (%)",
                            "sqrt optimum (%)", "gap to optimum (pp)", "Eq. 28 proxy reduction (%)",
                            "final acc (%)", "final worst-group (%)", "rollouts"], rows)
    paired_rows = []
    if "grpo" in grouped:
        for method, runs in grouped.items():
            if method == "grpo":
                continue
            d_acc = mean_ci(final_eval(runs, "accuracy") - final_eval(grouped["grpo"], "accuracy"))
            d_wg = mean_ci(final_eval(runs, "worst_group_accuracy") - final_eval(grouped["grpo"], "worst_group_accuracy"))
            stats[method]["delta_accuracy_vs_grpo"] = [float(d_acc[0]), float(d_acc[1])]
            stats[method]["delta_worst_group_vs_grpo"] = [float(d_wg[0]), float(d_wg[1])]
            paired_rows.append([METHODS[method].label, fmt(*d_acc, 2, 100), fmt(*d_wg, 2, 100)])
    figs = _figures(grouped, out, start, name)
    economics = _economics(grouped, start)
    initial = np.mean([r.evals["accuracy"][0] for r in next(iter(grouped.values()))])
    lines = [
        f"## World `{name}` ({', '.join(f'{k} = {v}' for k, v in overrides.items()) or 'the defaults'}; "
        f"initial mean accuracy {100 * initial:.0f}%)",
        "",
        f"Averages run over steps {start + 1}–{first['steps']} (the first epoch has no bins yet).",
        "",
        table,
        "",
        "### Does the variance reduction change learning? (paired by seed, vs GRPO)",
        "",
        markdown_table(["method − GRPO", "Δ final acc (pp)", "Δ worst-group (pp)"], paired_rows)
        if paired_rows else "_GRPO not run._",
        "",
        "### Where the budget goes (steps after the warm-up)",
        "",
        markdown_table(["method", "prompts in bins ≥ 5 (%)", "budget on bins ≥ 5 (%)", "rollouts/prompt there"],
                       [[METHODS[m].label, f"{v['prompt_share_high']:.1f}", f"{v['budget_share_high']:.1f}",
                         f"{v['rollouts_high']:.2f}"] for m, v in economics.items()]),
        "",
        "### Discussion (generated from the numbers above)",
        "",
        *_discussion(stats),
        "",
        f"![wse]({figs['wse']})",
        "",
        f"![staircase]({figs['staircase']})",
        "",
    ]
    return lines, {"overrides": overrides, "warmup_steps": start, "metrics": stats, "budget": economics}


def _economics(grouped: dict[str, list[RunSummary]], start: int) -> dict[str, dict[str, float]]:
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


def _discussion(stats: dict[str, dict[str, list[float]]]) -> list[str]:
    lines = []
    for method in ("rollout_gdro", "sqrt_oracle", "knapsack"):
        if method not in stats:
            continue
        e = stats[method]
        lines.append(f"- {METHODS[method].label}: WSE reduction {fmt(*e['reduction_estimated_pct'], 1)}% with the "
                     f"estimated σ and {fmt(*e['reduction_true_pct'], 1)}% with the true σ, against "
                     f"{e['optimum_reduction_pct'][0]:.1f}% at the square-root optimum (gap "
                     f"{fmt(*e['gap_to_optimum_pp'], 1)} pp).")
    if "rollout_gdro" in stats:
        r = stats["rollout_gdro"]["reduction_true_pct"][0]
        inside = 22.6 <= r <= 37.1
        lines.append(f"- The paper's 22.6–37.1% range is {'matched' if inside else 'not matched'} by Rollout-GDRO here "
                     f"({r:.1f}%); in this world the attainable optimum itself is "
                     f"{stats['rollout_gdro']['optimum_reduction_pct'][0]:.1f}%, set by how unequal the per-bin "
                     "reward variances are, so the paper's number says as much about its data as about the controller.")
        if "delta_worst_group_vs_grpo" in stats["rollout_gdro"]:
            d = stats["rollout_gdro"]["delta_worst_group_vs_grpo"]
            a = stats["rollout_gdro"]["delta_accuracy_vs_grpo"]
            lines.append(f"- Lower WSE buys little learning here: final accuracy {fmt(*a, 2, 100)} pp and worst-group "
                         f"{fmt(*d, 2, 100)} pp vs GRPO. WSE measures the noise of the reward-mean estimate; the "
                         "update's noise also depends on n through GRPO's normalisation, and hard prompts with "
                         "few successes need *more* rollouts to get any gradient (the knapsack argument), which the "
                         "square-root law on reward variance gives *fewer*.")
    return lines


def _figures(grouped: dict[str, list[RunSummary]], out: Path, start: int, name: str) -> dict[str, str]:
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
