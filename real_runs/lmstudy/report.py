"""The study report: tables with 95% intervals, paired gains, learning curves, heatmaps, staircase.

Reads only run directories (``gdro_lab.runlog.read_run``) and the study's ``study.json``, so a
report can be rebuilt from a finished study without re-running it. Intervals are across seeds
(Student t, like the simulator studies); gains are paired by seed (same warm start, same data
order and sampler seed), which removes the seed-to-seed variation the methods share.

Held-out metrics are read from ``eval.jsonl`` under the project-wide names, one benchmark per
skill: ``lmstudy_{group}/mean@8`` (pass@1 estimated from 8 samples) and ``lmstudy_{group}/pass@8``;
the mean over groups (the pooled value: every group has the same number of problems) and the
worst group (the lowest group in that run at that step) are computed here. The step-0 point of
every curve is the warm start's evaluation with the same evaluator and the run's seed
(``initial-s{seed}.json``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab.runlog import RunData, read_run
from simulators.reporting import band, fmt, markdown_table, mean_ci, plt, save_figure, write_json

METHOD_LABELS = {
    "grpo": "GRPO",
    "grpo_matched": "GRPO, step-matched lr",
    "prompt_gdro": "Prompt-GDRO",
    "rollout_gdro": "Rollout-GDRO",
    "joint": "joint (Prompt+Rollout)",
}
METRICS = {  # report name -> (eval metric template, reducer over groups)
    "pass@1": ("lmstudy_{g}/mean@8", "mean"),
    "pass@8": ("lmstudy_{g}/pass@8", "mean"),
    "worst-group pass@1": ("lmstudy_{g}/mean@8", "min"),
    "worst-group pass@8": ("lmstudy_{g}/pass@8", "min"),
}
PAPER_GAIN = {"prompt_gdro": 10.6, "rollout_gdro": 10.1}  # relative pass@8 gain over GRPO, %


PASS1 = METRICS["pass@1"][0]


def eval_table(evals: Sequence[dict[str, Any]], groups: Sequence[str]) -> dict[str, np.ndarray]:
    """Per-evaluation arrays: ``step`` (E,), each METRICS name (E,), and each template (E, G)."""
    steps = np.array([int(e["step"]) for e in evals], dtype=np.int64)
    out: dict[str, np.ndarray] = {"step": steps}
    for template in {t for t, _ in METRICS.values()}:
        out[template] = np.array([[float(e["metrics"].get(template.format(g=g), np.nan)) for g in groups]
                                  for e in evals]).reshape(len(steps), len(groups))
    for name, (template, reducer) in METRICS.items():
        out[name] = out[template].mean(axis=1) if reducer == "mean" else out[template].min(axis=1)
    return out


def collect(runs: dict[str, dict[int, Path]], groups: Sequence[str],
            initial: dict[int, Path]) -> dict[str, Any]:
    """Metrics per method and seed: ``final[method][metric]`` (S,), ``curves``, and ``initial``.

    ``initial[metric]`` holds the warm start's evaluation per seed (S,); each run's curve starts
    with its seed's initial evaluation at step 0.
    """
    starts = {seed: json.loads(Path(path).read_text()) for seed, path in sorted(initial.items())}
    final: dict[str, dict[str, np.ndarray]] = {}
    per_group: dict[str, np.ndarray] = {}
    curves: dict[str, dict[str, Any]] = {}
    for method, by_seed in runs.items():
        tables, train, flat = [], [], []
        for seed, path in sorted(by_seed.items()):
            run = read_run(path)
            evals = run.evals
            train.append(run.scalars.get("mean_success", np.full(run.steps.size, np.nan)))
            flat.append(run.scalars.get("zero_variance_frac", np.full(run.steps.size, np.nan)))
            if not evals:
                raise ValueError(f"{path} has no evaluation in eval.jsonl: re-run it")
            tables.append(eval_table(([starts[seed]] if seed in starts else []) + evals, groups))
        final[method] = {m: np.array([t[m][-1] for t in tables]) for m in METRICS}
        per_group[method] = np.stack([t[PASS1][-1] for t in tables])
        length = min(t["step"].size for t in tables)
        steps = min(x.size for x in train)
        curves[method] = {"step": tables[0]["step"][:length], "train_success": np.stack([x[:steps] for x in train]),
                          "zero_variance": np.stack([x[:steps] for x in flat]),
                          **{m: np.stack([t[m][:length] for t in tables]) for m in METRICS}}
    first = [eval_table([record], groups) for record in starts.values()]
    out_initial: dict[str, np.ndarray] = {m: np.array([t[m][0] for t in first]) for m in METRICS}
    out_initial["per_group"] = (np.mean([t[PASS1][0] for t in first], axis=0) if first
                                else np.full(len(groups), np.nan))
    out_initial["seeds"] = np.array(sorted(starts))
    return {"final": final, "initial": out_initial, "per_group": per_group, "curves": curves}


def paired(final: dict[str, dict[str, np.ndarray]], method: str, baseline: str) -> dict[str, tuple[float, float]]:
    """Paired (by seed) difference method - baseline per metric: (mean, 95% half-width)."""
    out = {}
    for m in METRICS:
        diff = final[method][m] - final[baseline][m]
        mean, half = mean_ci(diff)
        out[m] = (float(mean), float(half))
    return out


def results_markdown(data: dict[str, Any]) -> str:
    """The results table and the two paired-gain tables."""
    final = data["final"]
    header = ["method"] + [f"{m} (%)" for m in METRICS]
    rows = [["warm start (step 0)"] + [fmt(*mean_ci(data["initial"][m]), digits=1, scale=100) for m in METRICS]]
    rows += [[METHOD_LABELS[k]] + [fmt(*mean_ci(v[m]), digits=1, scale=100) for m in METRICS]
             for k, v in final.items()]
    parts = ["## Held-out results at the last step", "", markdown_table(header, rows)]
    for baseline in ("grpo", "grpo_matched"):
        if baseline not in final:
            continue
        rows = [[f"{METHOD_LABELS[k]} − {METHOD_LABELS[baseline]}"]
                + [fmt(*paired(final, k, baseline)[m], digits=1, scale=100) for m in METRICS]
                for k in final if k not in (baseline, "grpo") or (baseline == "grpo_matched" and k == "grpo")]
        parts += ["", f"## Paired gains over {METHOD_LABELS[baseline]} (same seeds; percentage points)", "",
                  markdown_table(["difference"] + [f"Δ {m}" for m in METRICS], rows)]
    return "\n".join(parts)


def figure_curves(data: dict[str, Any], path: Path) -> str:
    """Held-out pass@1, pass@8, worst-group pass@1 and the training success rate against step.

    Seed mean ± 95% CI; the training curve is a 10-step running mean of each run's mean success.
    """
    fig, axes = plt.subplots(1, 4, figsize=(20, 3.8), layout="constrained")
    for axis, metric in zip(axes, ("pass@1", "pass@8", "worst-group pass@1")):
        for method, curve in data["curves"].items():
            band(axis, curve["step"], curve[metric], METHOD_LABELS[method])
        axis.set_title(f"held-out {metric}")
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
    axis.set_ylabel("held-out pass@1")
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


def write_summary(out: Path, data: dict[str, Any], extra: dict[str, Any]) -> None:
    """``summary.json``: every number of the report (seed arrays included)."""
    write_json(out / "summary.json", {"final": data["final"], "initial": data["initial"],
                                      "per_group_final_pass@1": data["per_group"], **extra})


def discussion(data: dict[str, Any], lr_scale: float) -> list[str]:
    """Bullet points generated from the numbers: learning, gains vs both baselines, the paper's +10%."""
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
                 "(4.30 for 3 seeds): only large or very consistent effects exclude 0.")
    lines.append(f"- **Step matching**: Prompt-GDRO multiplied advantages by {lr_scale:.3f} on average; "
                 f"step-matched GRPO ran with lr × {lr_scale:.3f}.")
    for method in ("prompt_gdro", "rollout_gdro", "joint"):
        if method not in final or "grpo" not in final:
            continue
        for baseline in ("grpo", "grpo_matched"):
            if baseline not in final:
                continue
            diffs = paired(final, method, baseline)
            base = float(np.mean(final[baseline]["pass@8"]))
            rel = 100 * (float(np.mean(final[method]["pass@8"])) / base - 1) if base > 0 else float("nan")
            parts = [f"{m} {fmt(*diffs[m], 1, 100)} pp" + (" (CI excludes 0)" if abs(diffs[m][0]) > diffs[m][1]
                                                           else "") for m in ("pass@1", "pass@8", "worst-group pass@8")]
            lines.append(f"- **{METHOD_LABELS[method]} − {METHOD_LABELS[baseline]}**: " + "; ".join(parts)
                         + f"; relative pass@8 {rel:+.1f}%"
                         + (f" (paper: +{PAPER_GAIN[method]}% over GRPO)" if method in PAPER_GAIN
                            and baseline == "grpo" else "") + ".")
    return lines


def write_report(study: dict[str, Any], groups: Sequence[str], report_dir: Path, title_note: str,
                 warm_summary: dict[str, Any], notes: Sequence[str]) -> Path:
    """Write report.md, figures and summary.json into ``report_dir``; returns report.md."""
    report_dir.mkdir(parents=True, exist_ok=True)
    runs = {m: r for m, r in study["runs"].items() if r}
    data = collect(runs, groups, study.get("initial", {}))
    figures = {
        "curves": figure_curves(data, report_dir / "fig_curves.png"),
        "groups": figure_groups(data, groups, report_dir / "fig_groups.png"),
        "wave": figure_wave(runs, report_dir / "fig_traveling_wave.png"),
        "staircase": figure_staircase(runs, report_dir / "fig_rollout_staircase.png"),
    }
    cfg = study["config"]
    accuracy = warm_summary.get("heldout_greedy_accuracy", {})
    warm_rows = [[g, f"{100 * accuracy.get(g, float('nan')):.1f}",
                  fmt(float(data["initial"]["per_group"][i]), float("nan"), 1, 100)]
                 for i, g in enumerate(groups)]
    text = [f"# A learning study on CPU{title_note}", "",
            f"{len(runs)} methods × {cfg['seeds']} seeds × {cfg['steps']} steps, {cfg['prompts_per_step']} prompts "
            f"per step, n̄ = {cfg['n_bar']} rollouts per prompt (arms {cfg['n_min']}..{cfg['n_max']}), GRPO lr "
            f"{cfg['lr']:g}; held-out: {cfg['heldout_per_group']} problems per group, 8 samples "
            f"each (temperature 0.6, top-p 0.8, top-k 20). Model: Qwen3, hidden {cfg['warm']['hidden_size']}, "
            f"{cfg['warm']['num_layers']} layers, {warm_summary.get('parameters', 0):,} parameters, warm-started for "
            f"{cfg['warm']['steps']} supervised steps ({warm_summary.get('seconds', 0):.0f} s, "
            f"{cfg['jobs'] * cfg.get('threads', 1)} threads) on a demonstrator whose "
            f"answers slip in {100 * cfg['warm'].get('slip_rate', 0.0):.0f}% of cases (a skill's systematic bug: "
            "no carry, smaller-from-larger, sign, quotient). RL wall time "
            f"{study['seconds'] / 60:.1f} min with {cfg['jobs']} parallel runs of {cfg.get('threads', 1)} thread(s) each. "
            "Intervals: 95% Student t across seeds; gains paired by seed.", "",
            "## Warm start (held-out, per group)", "",
            markdown_table(["group", "greedy exact match (%)", "sampled pass@1 at step 0, seed mean (%)"], warm_rows),
            "", results_markdown(data), "", "## Discussion (generated from the numbers above)", "",
            *discussion(data, study["lr_scale"]), *notes, "", "## Figures", "",
            f"![curves]({figures['curves']})", "", f"![groups]({figures['groups']})", "",
            "Traveling wave: share of the step's prompts and the adversary's weight per difficulty bin over "
            "steps (seed 0; bin 0 = hardest).", "", f"![wave]({figures['wave']})", "",
            "Rollout staircase: mean rollouts per prompt by bin (left, seed mean over the run) and over steps "
            "(right, seed 0).", "", f"![staircase]({figures['staircase']})", ""]
    path = report_dir / "report.md"
    path.write_text("\n".join(text), encoding="utf-8")
    write_summary(report_dir, data, {"lr_scale": study["lr_scale"], "seconds": study["seconds"],
                                     "config": cfg, "warm_start": {k: v for k, v in warm_summary.items()
                                                                   if k != "losses"}})
    return path
