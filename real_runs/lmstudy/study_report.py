"""The study report: tables with 95% intervals, paired gains over three baselines, the paper's claims, figures.

Reads only run directories and the warm starts' evaluations, so a finished study's report can be rebuilt.
Intervals are across seeds (Student t); gains are paired by seed; held-out metrics are the **test**
half's. Detail: docs/lm-study-notes.md#real_runs-lmstudy-study_report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab.runformat.runlog import read_run
from real_runs.lmstudy.claim_verdicts import BASELINES, claims, gains, tuned_grpo
from real_runs.lmstudy.labels import METHOD_LABELS
from real_runs.lmstudy.metrics import METRICS, eval_table
from real_runs.lmstudy.report_figures import figure_curves, figure_groups, figure_staircase, figure_wave
from studykit.claims import claims_markdown, claims_text
from studykit.stats import mean_ci
from studykit.tables import fmt, markdown_table, write_json

#: What the intervals cover (every seed has its own warm start: study.warm_config).
INTERVALS = ("Intervals: 95% Student t across seeds. **Every seed starts from its own warm start** "
             "(supervised seed + study seed), so an interval on a method's result covers the warm start's variation "
             "as well as RL's sampling noise. Gains are paired by seed: what the methods of a seed share (its warm "
             "start, data order and sampler seed) cancels, and a gain's interval covers how the gain itself varies "
             "from one warm start (and its RL noise) to the next.")


def collect(runs: dict[str, dict[int, Path]], groups: Sequence[str], initial: dict[int, Path]) -> dict[str, Any]:
    """Test-half metrics per method and seed: ``final[method][metric]`` (S,), ``curves``, ``initial``.

    ``initial[metric]`` holds each seed's warm-start evaluation (S,); each run's curve starts with
    its seed's initial evaluation at step 0.
    """
    starts = {seed: json.loads(Path(path).read_text()) for seed, path in sorted(initial.items())}
    final: dict[str, dict[str, np.ndarray]] = {}
    per_group: dict[str, np.ndarray] = {}
    curves: dict[str, dict[str, Any]] = {}
    for method, by_seed in runs.items():
        tables, train, flat = [], [], []
        for seed, path in sorted(by_seed.items()):
            run = read_run(path)
            train.append(run.scalars.get("mean_success", np.full(run.steps.size, np.nan)))
            flat.append(run.scalars.get("zero_variance_frac", np.full(run.steps.size, np.nan)))
            if not run.evals:
                raise ValueError(f"{path} has no evaluation in eval.jsonl: re-run it")
            tables.append(eval_table(([starts[seed]] if seed in starts else []) + run.evals, groups))
        final[method] = {m: np.array([t[m][-1] for t in tables]) for m in METRICS}
        per_group[method] = np.stack([t["groups/mean@8"][-1] for t in tables])
        length = min(t["step"].size for t in tables)
        steps = min(x.size for x in train)
        curves[method] = {"step": tables[0]["step"][:length], "train_success": np.stack([x[:steps] for x in train]),
                          "zero_variance": np.stack([x[:steps] for x in flat]),
                          **{m: np.stack([t[m][:length] for t in tables]) for m in METRICS}}
    first = [eval_table([record], groups) for record in starts.values()]
    out_initial: dict[str, np.ndarray] = {m: np.array([t[m][0] for t in first]) for m in METRICS}
    out_initial["per_group"] = (np.mean([t["groups/mean@8"][0] for t in first], axis=0) if first
                                else np.full(len(groups), np.nan))
    out_initial["seeds"] = np.array(sorted(starts))
    return {"final": final, "initial": out_initial, "per_group": per_group, "curves": curves}


def results_markdown(data: dict[str, Any], tuned: dict[str, Any], result: dict[str, Any]) -> str:
    """The results table (test half) and one paired-gain table per baseline."""
    final = data["final"]
    rows = [["warm starts (step 0)"] + [fmt(*mean_ci(data["initial"][m]), digits=1, scale=100) for m in METRICS]]
    rows += [[METHOD_LABELS[k]] + [fmt(*mean_ci(v[m]), digits=1, scale=100) for m in METRICS] for k, v in final.items()]
    rows += [["tuned GRPO (lr × " + " / ".join(f"{tuned['lr_scale'][m]:g}" for m in METRICS) + ")"]
             + [fmt(*mean_ci(tuned["final"][m]), digits=1, scale=100) for m in METRICS]]
    parts = ["## Held-out test results at the last step", "", markdown_table(["method"] + [f"{m} (%)" for m in METRICS],
                                                                             rows)]
    table = gains(final, tuned)
    for key, label in BASELINES:
        rows = [[f"{METHOD_LABELS[m]} − {label}"] + [fmt(*by_base[key][metric], digits=1, scale=100)
                                                     for metric in METRICS]
                for m, by_base in table.items() if key in by_base]
        if key == "grpo":
            rows += [[f"tuned GRPO − GRPO"] + [fmt(*mean_ci(tuned["final"][metric] - final["grpo"][metric]), 1, 100)
                                               for metric in METRICS]]
        parts += ["", f"## Paired gains over {label} (same seeds; percentage points, test half)", "",
                  markdown_table(["difference"] + [f"Δ {m}" for m in METRICS], rows)]
    grid = ", ".join(f"{x:g}" for x in tuned["grid"])
    parts += ["", f"Tuned GRPO: learning rate × {{{grid}}} of the study's lr (√2 steps, extended while the best val "
              "point was at an edge), best point chosen per metric on the **val** half (seed means), reported on "
              "the test half" + (f"; still at the grid's edge for {', '.join(tuned['at_edge'])}" if tuned["at_edge"]
                                 else "") + "."]
    factors = result.get("factors")
    if factors:
        parts += ["", f"Step matching (studykit.stepmatch): Prompt-GDRO's multipliers over every trained prompt of "
                  f"its seeds had E[m] = {factors['first']:.3f} and √E[m²] = {factors['second']:.3f}; the step-matched "
                  "GRPO runs multiply every advantage by these (`loss.adv_scale`; under AdamW this is not the same "
                  "as scaling the learning rate); their config.json names them (`matched_to`, `match`)."]
    return "\n".join(parts)


DECISION_METRICS = ("pass@1", "pass@8", "worst-group pass@1")


def decision_text(table: dict[str, Any], tuned: dict[str, Any], factors: dict[str, float] | None,
                  seeds: Sequence[int], rows: Sequence[dict[str, str]]) -> str:
    """The plain-text decision (decision.txt, printed by ``gdro study lm``): every method's paired gain over
    GRPO, both step-matched GRPOs and tuned GRPO, the matching factors, tuned GRPO's lr, every paper claim."""
    lines = [f"decision (held-out test half; paired over {len(seeds)} seed(s), each from its own warm start; "
             "95% intervals, pp):"]
    for method in ("prompt_gdro", "rollout_gdro", "joint"):
        for metric in DECISION_METRICS if method in table else ():
            lines.append(f"  {METHOD_LABELS[method]:<24} {metric:<19} " + " | ".join(
                f"{label} {fmt(*table[method][key][metric], 1, 100)}" for key, label in BASELINES
                if key in table[method]))
    if factors:
        lines.append(f"  step matching: Prompt-GDRO's multipliers E[m] = {factors['first']:.3f}, "
                     f"√E[m²] = {factors['second']:.3f}; the step-matched GRPOs scale every advantage by them "
                     "(loss.adv_scale)")
    grid = ", ".join(f"{x:g}" for x in tuned["grid"])
    lines.append(f"  tuned GRPO: lr × {{{grid}}} (√2 steps, extended at the edges), chosen on the val half: "
                 + ", ".join(f"{m} × {tuned['lr_scale'][m]:g}" for m in DECISION_METRICS)
                 + (f"; still at the grid's edge for {', '.join(tuned['at_edge'])}" if tuned["at_edge"] else ""))
    lines.append("paper claims (reproduced / refuted only on the paper's own metric and scale; otherwise direction "
                 "only, with the size next to the paper's; untested where not measured):")
    lines.append(claims_text(rows))
    return "\n".join(lines)


def discussion(data: dict[str, Any]) -> list[str]:
    """Bullet points generated from the numbers: learning over the warm start, the signal, the intervals."""
    final, initial = data["final"], data["initial"]
    lines = []
    if "grpo" in final and initial["pass@1"].size == final["grpo"]["pass@1"].size:
        parts = []
        for metric in ("pass@1", "pass@8", "worst-group pass@1"):
            mean, half = mean_ci(final["grpo"][metric] - initial[metric])  # paired by seed
            verdict = ("one seed, no interval" if not np.isfinite(half) else
                       "CI excludes 0" if abs(mean) > half else "CI includes 0")
            parts.append(f"{metric} {fmt(mean, half, 1, 100)} pp ({verdict})")
        lines.append("- **GRPO vs the warm start** (does the real path learn?): " + "; ".join(parts) + ".")
        success_ST = data["curves"]["grpo"]["train_success"]
        if success_ST.size and np.isfinite(success_ST).any():
            width = max(1, success_ST.shape[1] // 10)
            first, last = np.nanmean(success_ST[:, :width]), np.nanmean(success_ST[:, -width:])
            lines.append(f"- **Training pool vs held-out** (GRPO): training-batch success {first:.3f} → {last:.3f} "
                         f"(first / last {width} steps, seed mean) against the held-out pass@1 change above; "
                         "a rise on the training pool that the held-out split does not share is the pool "
                         "being memorised, not a skill being learned.")
        flat_ST = data["curves"]["grpo"]["zero_variance"]
        if flat_ST.size and np.isfinite(flat_ST).any():
            lines.append(f"- **Signal**: on average {100 * np.nanmean(flat_ST):.1f}% of GRPO's prompt groups per step had "
                         "all-equal rewards (`zero_variance_frac`), so they carried no gradient for any method.")
    seeds = len(next(iter(final.values()))["pass@1"]) if final else 0
    lines.append(f"- Intervals over {seeds} seeds use Student t with {max(seeds - 1, 1)} degrees of freedom "
                 "(4.30 for 3 seeds): only large or very consistent effects exclude 0. " + INTERVALS)
    return lines


def write_report(study: dict[str, Any], groups: Sequence[str], report_dir: Path, title_note: str,
                 warm: dict[int, dict[str, Any]], notes: Sequence[str]) -> Path:
    """Write report.md, figures, summary.json and decision.txt into ``report_dir``; returns report.md."""
    report_dir.mkdir(parents=True, exist_ok=True)
    runs = {m: r for m, r in study["runs"].items() if r}
    data = collect(runs, groups, study.get("initial", {}))
    seeds = sorted(next(iter(runs.values())))
    tuned = tuned_grpo(study["grid"], groups, seeds)
    cfg = study["config"]
    rows = claims(data["final"], tuned, runs, 10, cfg["n_bar"])
    figures = {
        "curves": figure_curves(data, report_dir / "fig_curves.png"),
        "groups": figure_groups(data, groups, report_dir / "fig_groups.png"),
        "wave": figure_wave(runs, report_dir / "fig_traveling_wave.png"),
        "staircase": figure_staircase(runs, report_dir / "fig_rollout_staircase.png"),
    }
    first_warm = next(iter(warm.values()), {})
    accuracy = {g: np.array([w.get("heldout_greedy_accuracy", {}).get(g, np.nan) for w in warm.values()])
                for g in groups}
    warm_rows = [[g, fmt(*mean_ci(accuracy[g]), 1, 100), fmt(float(data["initial"]["per_group"][i]), float("nan"), 1, 100)]
                 for i, g in enumerate(groups)]
    warm_seconds = [w.get("seconds", float("nan")) for w in warm.values()]
    text = [f"# A learning study on CPU{title_note}", "",
            f"{len(runs)} methods and tuned GRPO × {cfg['seeds']} seeds × {cfg['steps']} steps, "
            f"{cfg['prompts_per_step']} prompts per step, n̄ = {cfg['n_bar']} rollouts per prompt (arms "
            f"{cfg['n_min']}..{cfg['n_max']}), lr {cfg['lr']:g}; held-out: {cfg['heldout_per_group']} problems per "
            "skill, split into a **val** half (chooses tuned GRPO's lr) and a **test** half (every number below), "
            f"8 samples each (temperature 0.6, top-p 0.8, top-k 20). Model: Qwen3, hidden {cfg['warm']['hidden_size']}, "
            f"{cfg['warm']['num_layers']} layers, {first_warm.get('parameters', 0):,} parameters; **each seed "
            f"warm-started separately** (supervised seed {cfg['warm']['seed']} + seed, {cfg['warm']['steps']} steps, "
            f"{np.nanmean(warm_seconds) if warm_seconds else float('nan'):.0f} s each with "
            f"{cfg.get('threads', 1)} thread(s), {cfg['jobs']} at a time) on a demonstrator whose answers slip in "
            f"{100 * cfg['warm'].get('slip_rate', 0.0):.0f}% of cases (a skill's systematic bug: no carry, "
            f"smaller-from-larger, sign, quotient). Wall time {study['seconds'] / 60:.1f} min (warm starts that were not "
            f"cached, and RL) with {cfg['jobs']} parallel processes of {cfg.get('threads', 1)} thread(s) each. " + INTERVALS, "",
            "## Warm starts (held-out, per skill)", "",
            markdown_table(["skill", "greedy exact match, whole held-out split, seed mean (%)",
                            "sampled pass@1 at step 0, test half, seed mean (%)"], warm_rows),
            "", results_markdown(data, tuned, study), "", "## Paper claims", "",
            "Every claim of the paper's §4-5. *Reproduced / refuted* only on the paper's own metric and scale "
            "(Qwen3 1.7-8B on the math benchmarks), which this study is not: its gains are *direction only*, the "
            "size next to the paper's. Gains are against tuned GRPO (val half), on the test half.", "",
            *claims_markdown(rows), "",
            "## Discussion (generated from the numbers above)", "", *discussion(data), *notes, "", "## Figures", "",
            f"![curves]({figures['curves']})", "", f"![groups]({figures['groups']})", "",
            "Traveling wave: share of the step's prompts and the adversary's weight per difficulty bin over "
            "steps (seed 0; bin 0 = hardest).", "", f"![wave]({figures['wave']})", "",
            "Rollout staircase: mean rollouts per prompt by bin (left, seed mean over the run) and over steps "
            "(right, seed 0).", "", f"![staircase]({figures['staircase']})", ""]
    path = report_dir / "report.md"
    path.write_text("\n".join(text), encoding="utf-8")
    (report_dir / "decision.txt").write_text(decision_text(gains(data["final"], tuned), tuned, study.get("factors"),
                                                           seeds, rows) + "\n", encoding="utf-8")
    write_json(report_dir / "summary.json", {
        "final": data["final"], "initial": data["initial"], "per_group_final_pass@1": data["per_group"],
        "tuned_grpo": tuned, "gains": gains(data["final"], tuned), "claims": rows, "factors": study.get("factors"),
        "seconds": study["seconds"], "config": cfg,
        "warm_starts": {str(s): {k: v for k, v in w.items() if k != "losses"} for s, w in warm.items()}})
    return path
