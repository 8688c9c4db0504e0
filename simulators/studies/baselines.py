"""Fair baselines and the decision: GRPO at the same lr, step-matched GRPO (two moments) and tuned GRPO.

GRPO at lr scale 1; step-matched GRPO (``studykit.stepmatch``: advantages x c1 = E[m] or c2 =
sqrt(E[m^2])); tuned GRPO (lr chosen on **val**, reported on **test**, ``simulators.studies.tuning``).
Gains are paired by seed: mean ± t_{0.975,S-1} sd/√S. Why two moments:
docs/studies-notes.md#simulators-studies-baselines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from gdro_lab.methods import get_method
from simulators.parallel import RunSummary, run_jobs
from simulators.studies.common import StudySettings, final_eval, job, sim_config
from simulators.studies.tuning import TUNED_METRICS, Grid, best_lr, edge_notes, method_grid
from studykit.stats import paired_ci
from studykit.stepmatch import MatchFactors, match_factors
from studykit.tables import fmt, markdown_table

#: Metrics of the decision (each tuned on val, reported on test).
GAIN_METRICS = TUNED_METRICS
#: (key in the decision, column label): the baselines every method's gain is measured against.
BASELINES = (("vs_grpo", "vs GRPO"), ("vs_matched_first", "vs step-matched E[m]"),
             ("vs_matched_second", "vs step-matched √E[m²]"), ("vs_tuned", "vs tuned GRPO"))
KINDS = ("first", "second")
#: The ``match`` key a step-matched run's config.json carries (with ``matched_to``: the method), for the app.
MATCH = {"first": "first_moment", "second": "second_moment"}
Matched = dict[tuple[str, str], list[RunSummary]]


def mean_forgetting(runs: Sequence[RunSummary]) -> float:
    """Seed mean of the mean step price (curvature x mean dz^2, ``sim/forgetting``) over the logged steps."""
    return float(np.nanmean([np.nanmean(r.scalars.get("sim/forgetting", np.array([np.nan]))) for r in runs]))


def run_matched(settings: StudySettings, grid: Grid, methods: Sequence[str], root: Path
                ) -> tuple[Matched, dict[str, MatchFactors]]:
    """GRPO at lr x c1 and lr x c2 of every method (GRPO's own lr-1 runs where a factor is within 2% of 1)."""
    factors = {m: match_factors([r.scalars for r in grid[(m, 1.0)]]) for m in methods if m != "grpo"}
    todo = {(m, k): round(getattr(f, k), 4) for m, f in factors.items() for k in KINDS
            if abs(getattr(f, k) - 1.0) > 0.02}
    keys = [(m, k, s) for (m, k) in todo for s in range(settings.seeds)]
    jobs = [job(settings, sim_config(settings, "grpo", s, lr_scale=todo[(m, k)], matched_to=m, match=MATCH[k]),
                root / f"grpo_matched_{m}_{k}" / f"seed{s}", snapshots=False) for m, k, s in keys]
    results = run_jobs(jobs, workers=settings.workers, progress=settings.progress,
                       description="step-matched GRPO") if jobs else []
    matched: Matched = {(m, k): grid[("grpo", 1.0)] for m in factors for k in KINDS if (m, k) not in todo}
    for (m, k, _), summary in zip(keys, results):
        matched.setdefault((m, k), []).append(summary)
    return matched, factors


def _paired(a: Sequence[RunSummary], b: Sequence[RunSummary], metric: str) -> list[float]:
    return list(paired_ci(final_eval(a, metric), final_eval(b, metric)))


def decision(grid: Grid, matched: Matched, factors: dict[str, MatchFactors], methods: Sequence[str]
             ) -> dict[str, Any]:
    """Per method and metric: its gain over GRPO (both at lr 1), the two step-matched GRPOs and tuned GRPO;
    the tuned lr of every method; each method's grid; the step-matching factors and their forgetting check."""
    tuned = {metric: {m: best_lr(grid, m, metric) for m in methods} for metric, _ in GAIN_METRICS}
    out: dict[str, Any] = {"tuned_lr": tuned, "lr_grid": {m: method_grid(grid, m) for m in methods},
                           "edges": edge_notes(grid, methods, tuned), "gains": {}, "step_matching": {}}
    base = grid[("grpo", 1.0)]
    for m in methods:
        if m == "grpo":
            continue
        own = mean_forgetting(grid[(m, 1.0)])
        out["step_matching"][m] = {**factors[m].as_dict(), "forgetting": own,
                                   **{f"forgetting_ratio_{k}": mean_forgetting(matched[(m, k)]) / own
                                      if own > 0 else float("nan") for k in KINDS}}
        entry: dict[str, Any] = {}
        for metric, _ in GAIN_METRICS:
            lr_m, lr_g = tuned[metric][m], tuned[metric]["grpo"]
            entry[metric] = {"vs_grpo": _paired(grid[(m, 1.0)], base, metric),
                             **{f"vs_matched_{k}": _paired(grid[(m, 1.0)], matched[(m, k)], metric) for k in KINDS},
                             "vs_tuned": _paired(grid[(m, lr_m)], grid[("grpo", lr_g)], metric)}
        out["gains"][m] = entry
    return out


def decision_markdown(result: dict[str, Any]) -> str:
    rows = []
    for m, entry in result["gains"].items():
        for metric, label in GAIN_METRICS:
            g = entry[metric]
            rows.append([get_method(m).label, label] + [fmt(*g[k], digits=1, scale=100) for k, _ in BASELINES]
                        + [f"{result['tuned_lr'][metric][m]:g} / {result['tuned_lr'][metric]['grpo']:g}"])
    return markdown_table(["method", "metric (test groups)"] + [f"Δ {label} (pp)" for _, label in BASELINES]
                          + ["tuned lr: method / GRPO"], rows)


def matching_markdown(result: dict[str, Any]) -> str:
    """The step-matching factors and the numerical check of the price match."""
    rows = [[get_method(m).label, f"{e['first']:.2f}", f"{e['second']:.2f}", f"{1000 * e['forgetting']:.2f}",
             f"{e['forgetting_ratio_first']:.2f}", f"{e['forgetting_ratio_second']:.2f}"]
            for m, e in result["step_matching"].items()]
    return markdown_table(["method", "c1 = E[m]", "c2 = √E[m²]", "method's forgetting per step (×1e-3)",
                           "GRPO at lr × c1: forgetting / method's", "GRPO at lr × c2: forgetting / method's"], rows)


def tuned_line(result: dict[str, Any]) -> str:
    """Every method's tuned lr scale per metric and the grid it was chosen on (one line)."""
    grids = result["lr_grid"]
    low, high = min(min(g) for g in grids.values()), max(max(g) for g in grids.values())
    parts = [f"{label.removeprefix('held-out ').removesuffix(' held-out acc')}: "
             + ", ".join(f"{get_method(m).label} {lr:.3g}" for m, lr in result["tuned_lr"][metric].items())
             for metric, label in GAIN_METRICS]
    return (f"  tuned lr scales (best on the val groups; grid of √2 steps, {low:.3g}–{high:.3g}, extended while "
            f"the best point is at an edge): " + " | ".join(parts))


def assumptions_line(world: Mapping[str, Any]) -> str:
    """What decides the verdicts: the world's assumptions, set by hand (docs/simulator-findings.md)."""
    return ("  what decides it (assumptions of the world, set by hand, not measured): the price of a step "
            f"(world.curvature = {world.get('curvature', float('nan')):g}; at 0 Prompt-GDRO beats GRPO: "
            "reports/sweep-curvature), the score noise tau (world.score_noise = "
            f"{world.get('score_noise', float('nan')):g}; Rollout-GDRO's gain grows with it) and the learning "
            "rate (compare the same-lr and tuned columns); `gdro calibrate` fits them to a real model")


def decision_text(result: dict[str, Any], claim_text: str, world: Mapping[str, Any] | None = None) -> str:
    """The plain-text decision printed on stdout at the end of a study: the gains against every baseline,
    both step-matching factors, the tuned lr scales, what decides the verdict (with ``world``), and
    every paper claim (``claim_text``: tested or untested)."""
    lines = ["decision (held-out test split: latent groups the lr tuning never saw; paired over seeds, "
             "95% intervals, in pp):"]
    for m, entry in result["gains"].items():
        for metric, label in GAIN_METRICS:
            g = entry[metric]
            lines.append(f"  {get_method(m).label:<26} {label:<25} "
                         + " | ".join(f"{name.removeprefix('vs ')} {fmt(*g[k], 1, 100)}" for k, name in BASELINES))
    for m, e in result["step_matching"].items():
        lines.append(f"  step matching, {get_method(m).label}: E[m] = {e['first']:.2f}, √E[m²] = {e['second']:.2f}; "
                     f"GRPO's step price there is {e['forgetting_ratio_first']:.2f}x and "
                     f"{e['forgetting_ratio_second']:.2f}x the method's")
    lines.append(tuned_line(result))
    if world is not None:
        lines.append(assumptions_line(world))
    if result["edges"]:
        lines.append("  note: best learning rate still at the edge of the grid after extension for "
                     + ", ".join(result["edges"]) + " (raise --lr-extend)")
    lines.append("paper claims (reproduced / refuted only on the paper's own metric and scale; otherwise "
                 "direction only, with the size next to the paper's):")
    lines.append(claim_text)
    return "\n".join(lines)
