"""Study `sqrt-law`: uniform n vs Rollout-GDRO vs the square-root optimum at the same mean budget.

Eq. 33: WSE(t) = sum_b q_t(b) sigma_b / sqrt(n_b(t)); the reduction is 100 (1 - WSE / WSE_uniform),
with the controller's EMA sigma_b and with the true sigma_b, against the box-constrained square-root
optimum (Thm 4.2); plus the variance proxy, the budget, and held-out accuracy against the baselines
(simulators/studies/baselines.py). Detail: docs/studies-notes.md#simulators-studies-sqrt_law_study.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab.methods import METHODS
from simulators.parallel import RunSummary
from simulators.reporting import prepare_output
from simulators.studies import se_dispersion
from simulators.studies.baselines import Matched, decision, decision_markdown, decision_text, run_matched
from simulators.studies.common import StudySettings, bins_series, final_eval, scalar_series
from simulators.studies.paper_claims import claims
from simulators.studies.sqrt_law_plots import economics, figures
from simulators.studies.tuning import Grid, lr_table, run_grid
from studykit.claims import claims_markdown, claims_text
from studykit.lrgrid import sqrt2_grid
from studykit.stats import mean_ci
from studykit.stepmatch import MatchFactors
from studykit.tables import fmt, markdown_table, write_json

DEFAULTS: dict[str, Any] = {"seeds": 5, "steps": 1000, "prompts": 14116, "batch": 256,
            "methods": ("grpo", "rollout_gdro", "sqrt_oracle", "knapsack"), "lr_grid": sqrt2_grid(0.5, 2.0)}
#: The default world, and a bimodal one (a much wider, heavier prompt-difficulty tail: many prompts
#: near-certain, many near-impossible, so bins differ more in reward variance and unequal allocation
#: has more room).
WORLDS = {"base": {}, "bimodal": {"prompt_difficulty_scale": 4.0, "difficulty_offset": -2.5,
                                  "prompt_difficulty_tail": 1.0}}
#: Held-out (test split) metrics of the WSE table and the paired gains.
HELD_OUT = (("test/accuracy", "held-out acc"), ("test/worst_group_accuracy", "held-out worst-group"))


class World:
    """One world's runs: the lr grid of every method, step-matched GRPO, the decision and claims."""

    def __init__(self, name: str, overrides: dict[str, Any], grid: Grid, matched: Matched,
                 factors: dict[str, MatchFactors], methods: Sequence[str]):
        self.name, self.overrides, self.grid, self.methods = name, overrides, grid, tuple(methods)
        self.matched, self.factors = matched, factors
        self.grouped = {m: grid[(m, 1.0)] for m in methods}
        self.result = decision(grid, matched, factors, methods)
        self.claims = claims(grid, self.result, methods)


def run(settings: StudySettings) -> Path:
    settings.validate()
    prepare_output(settings.out)
    methods = tuple(settings.methods or DEFAULTS["methods"])
    if "grpo" not in methods:
        methods = ("grpo",) + methods
    worlds, total = [], 0.0
    for name, overrides in WORLDS.items():
        world_settings = replace(settings, world={**overrides, **settings.world})
        start = time.perf_counter()
        root = settings.out / "runs" / name
        grid = run_grid(world_settings, methods, root, f"sqrt-law ({name})")
        matched, factors = run_matched(world_settings, grid, methods, root)
        total += time.perf_counter() - start
        worlds.append(World(name, overrides, grid, matched, factors, methods))
    return write_report(worlds, settings, total)


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


def _world_config(world: World) -> dict[str, Any]:
    return dict(next(iter(world.grouped.values()))[0].config["world"])


def write_report(worlds: list[World], settings: StudySettings, wall: float) -> Path:
    out = settings.out
    first = next(iter(worlds[0].grouped.values()))[0].config
    seeds = min(len(r) for r in worlds[0].grouped.values())
    lr_grid = sorted({lr for g in worlds[0].result["lr_grid"].values() for lr in g})
    lines = [
        "# Study `sqrt-law`: the square-root law at equal rollout budget",
        "",
        f"{len(worlds[0].grouped)} allocators × up to {len(lr_grid)} learning-rate scales × {seeds} seeds in "
        f"{len(worlds)} worlds, {first['steps']} steps, {first['batch']} prompts per step, "
        f"{first['world']['num_prompts']:,} training prompts plus held-out prompts of every latent group (half of "
        f"the groups form the val split that chooses learning rates, the other half the test split that reports), "
        f"n̄ = {first['n_bar']} (n ∈ [{first['n_min']}, "
        f"{first['n_max']}]). Seed means ± 95% t-intervals; gains paired by seed. Wall time {wall:.0f} s with "
        f"{settings.workers} worker(s).",
        "",
        "*WSE reduction* = 100 (1 − WSE / WSE_uniform) of Eq. 33 at the same compute; *est. σ* uses the "
        "allocator's EMA of the within-prompt reward std per bin (what a real run logs), *true σ* the "
        "simulator's exact one; *sqrt optimum* is the box-constrained square-root law on the true variances "
        "(it minimises Eq. 28, so an allocation can score a slightly higher WSE reduction than it); "
        "*gap* = optimum − actual reduction. WSE and budget numbers are at the default learning rate.",
        "",
        "**Baselines** (as in the curriculum study): *GRPO* at the same (default) learning rate; *step-matched "
        "GRPO*: GRPO with its advantages scaled by the method's measured E[m] or √E[m²], which are 1 for every "
        "allocator here (they do not reweight), so it is GRPO itself; *tuned GRPO*: every method, GRPO "
        "included, at its own best learning-rate scale on a grid of √2 steps (here "
        f"{lr_grid[0]:g}–{lr_grid[-1]:g}, extended while the best point is at an edge), chosen on the **val** "
        "groups per metric, the gain measured on the **test** groups.",
        "",
    ]
    summary: dict[str, Any] = {"study": "sqrt-law", "wall_s": wall, "seeds": seeds, "config": first, "worlds": {}}
    summary["se_dispersion"], dispersion_lines = se_dispersion.section(first["n_bar"], first["n_min"], first["n_max"])
    lines += dispersion_lines
    texts = []
    for world in worlds:
        section_lines, section_summary = _section(world, out)
        lines += section_lines
        summary["worlds"][world.name] = section_summary
        texts.append(f"sqrt-law, world `{world.name}`:\n" + decision_text(world.result, claims_text(world.claims),
                                                                                    _world_config(world)))
    lines += ["## Run directories", "",
              "`runs/<world>/<method>/lr<scale>/seed<k>/` in the gdro run format (not committed; regenerate "
              "with `gdro simulate sqrt-law`).", "",
              "Reproduce: `gdro simulate sqrt-law" + _flags(settings) + "`", ""]
    write_json(out / "summary.json", summary)
    (out / "decision.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _flags(settings: StudySettings) -> str:
    parts = [f"--{name} {getattr(settings, name)}" for name in ("seeds", "steps", "prompts", "batch")
             if getattr(settings, name) != DEFAULTS[name]]
    if tuple(sorted(settings.lr_grid)) != tuple(sorted(DEFAULTS["lr_grid"])):
        parts.append("--lr-grid " + ",".join(f"{v:g}" for v in settings.lr_grid))
    if settings.methods and tuple(settings.methods) != tuple(DEFAULTS["methods"]):
        parts.append("--methods " + ",".join(settings.methods))
    return (" " + " ".join(parts)) if parts else ""


def _wse_stats(runs: Sequence[RunSummary], start: int, n_bar: int) -> dict[str, list[float]]:
    """WSE reductions (averaged after the warm-up) and held-out metrics at the last step, seed mean ± CI."""
    true_red = _horizon_mean(scalar_series(runs, "sim/se_true_reduction_pct"), start)
    optimum = _horizon_mean(scalar_series(runs, "sim/se_true_sqrt_reduction_pct"), start)
    entry = {
        "reduction_estimated_pct": mean_ci(_horizon_mean(scalar_series(runs, "se_reduction_pct"), start)),
        "reduction_true_pct": mean_ci(true_red),
        "optimum_reduction_pct": mean_ci(optimum),
        "gap_to_optimum_pp": mean_ci(optimum - true_red),
        "variance_proxy_reduction_pct": mean_ci(_horizon_mean(_variance_proxy_reduction(runs, n_bar), start)),
        "mean_multiplier": mean_ci(np.array([np.nanmean(r.scalars.get("multiplier_mean", np.array([np.nan])))
                                             for r in runs])),
        "rollouts_total": mean_ci(final_eval(runs, "rollouts_total")),
        **{name: mean_ci(final_eval(runs, name)) for name, _ in HELD_OUT},
        "accuracy": mean_ci(final_eval(runs, "accuracy")),
    }
    return {k: [float(v[0]), float(v[1])] for k, v in entry.items()}


def _section(world: World, out: Path) -> tuple[list[str], dict[str, Any]]:
    grouped = world.grouped
    first = next(iter(grouped.values()))[0].config
    start = _warmup(next(iter(grouped.values())))
    stats = {m: _wse_stats(runs, start, first["n_bar"]) for m, runs in grouped.items()}
    rows = [[METHODS[m].label] + [fmt(*e[k], 1) for k in ("reduction_estimated_pct", "reduction_true_pct",
                                                         "optimum_reduction_pct", "gap_to_optimum_pp",
                                                         "variance_proxy_reduction_pct")]
            + [fmt(*e[k], 1, 100) for k, _ in HELD_OUT] + [f"{e['rollouts_total'][0]:,.0f}"]
            for m, e in stats.items()]
    table = markdown_table(["method", "WSE reduction, est. σ (%)", "WSE reduction, true σ (%)", "sqrt optimum (%)",
                            "gap to optimum (pp)", "Eq. 28 proxy reduction (%)", "held-out acc (%)",
                            "held-out worst-group (%)", "rollouts"], rows)
    lr_stats, lr_md = lr_table(world.grid, world.methods)
    figs = figures(grouped, out, start, world.name)
    budget = economics(grouped, start)
    initial = np.mean([r.evals["accuracy"][0] for r in next(iter(grouped.values()))])
    described = ", ".join(f"{k} = {v}" for k, v in world.overrides.items()) or "the defaults"
    lines = [
        f"## World `{world.name}` ({described}; initial mean accuracy {100 * initial:.0f}%)", "",
        "### The decision (held-out test split)", "",
        "Gains in percentage points, paired by seed; the tuned column compares each method at its own best "
        "learning rate with GRPO at its own (lr scales in the last column).", "",
        decision_markdown(world.result), "",
        *[line.strip().replace("note: ", "Note: ") + ".\n" for line in decision_text(world.result, "").splitlines()
          if line.strip().startswith("note:")],
        "Paper claims (every claim of the paper's §4-5; *reproduced / refuted* only on the paper's own metric and "
        "scale, so a toy world's numbers are *direction only*, the size next to the paper's):", "",
        *claims_markdown(world.claims), "",
        "### Variance reduction at the default learning rate", "",
        f"Averages run over steps {start + 1}–{first['steps']} (the first epoch has no bins yet); accuracies "
        "at the last step, on the held-out test prompts.", "",
        table, "",
        "### Accuracy against the learning rate", "",
        lr_md, "",
        "### Where the budget goes (steps after the warm-up)", "",
        markdown_table(["method", "prompts in bins ≥ 5 (%)", "budget on bins ≥ 5 (%)", "rollouts/prompt there"],
                       [[METHODS[m].label, f"{v['prompt_share_high']:.1f}", f"{v['budget_share_high']:.1f}",
                         f"{v['rollouts_high']:.2f}"] for m, v in budget.items()]), "",
        "### Discussion (generated from the numbers above)", "",
        *_discussion(stats, world.result), "",
        f"![wse]({figs['wse']})", "",
        f"![staircase]({figs['staircase']})", "",
    ]
    return lines, {"overrides": world.overrides, "warmup_steps": start, "metrics": stats, "budget": budget,
                   "decision": world.result, "step_match_factor": {m: f.as_dict() for m, f in world.factors.items()},
                   "lr_sweep": lr_stats, "claims": world.claims}


def _discussion(stats: dict[str, dict[str, list[float]]], result: dict[str, Any]) -> list[str]:
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
        gains = result["gains"].get("rollout_gdro")
        if gains:
            acc, wg = gains["test/accuracy"], gains["test/worst_group_accuracy"]
            lines.append(f"- What the lower WSE buys in learning: held-out accuracy {fmt(*acc['vs_grpo'], 2, 100)} pp "
                         f"and worst-group {fmt(*wg['vs_grpo'], 2, 100)} pp vs GRPO at the same learning rate; "
                         f"{fmt(*acc['vs_tuned'], 2, 100)} pp and {fmt(*wg['vs_tuned'], 2, 100)} pp vs tuned GRPO. "
                         "WSE measures the noise of the reward-mean estimate; the update's noise also depends on n "
                         "through GRPO's normalisation, and hard prompts with few successes need *more* rollouts "
                         "to get any gradient (the knapsack argument), which the square-root law on reward "
                         "variance gives *fewer*.")
    return lines
