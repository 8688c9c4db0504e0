"""The arena's report: one fair table per world (SE proxy vs the per-prompt oracle, held-out gains
over tuned GRPO, zero-variance share, wall time), the LM study's arena section when present, and
the decision (simulators/studies/allocation_arena.py describes the study)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab.methods import METHODS
from simulators.parallel import RunSummary
from simulators.studies.baselines import GAIN_METRICS
from simulators.studies.common import StudySettings, final_eval
from studykit.arena_settings import METHOD_SETTINGS
from studykit.stats import mean_ci
from studykit.tables import fmt, markdown_table, write_json

TARGET_FRACTION = 0.9
"""Issue 22: per-prompt Rollout-GDRO should reach 90% of the oracle's SE-proxy reduction in the bimodal world."""
LM_FILE = "lm-arena.json"


def _after_warmup(run: RunSummary, name: str) -> float:
    """Mean of a logged scalar over the steps after the first pass over the pool (NaN if none)."""
    cfg = run.config
    warm = cfg["world"]["num_prompts"] // cfg["batch"]
    values = run.scalars.get(name)
    if values is None:
        return float("nan")
    keep = (run.steps[: values.size] > warm) & np.isfinite(values)
    return float(values[keep].mean()) if keep.any() else float("nan")


def run_stats(runs: Sequence[RunSummary]) -> dict[str, list[float]]:
    """Per-method statistics at one learning rate, mean ± 95% half-width over seeds."""
    def per_seed(fn: Any) -> np.ndarray:
        return np.array([fn(r) for r in runs], float)

    def ratio(a: str, b: str) -> np.ndarray:
        """a / b per seed; undefined (NaN) where the oracle reduces nothing (b = 0, tiny runs)."""
        def one(r: RunSummary) -> float:
            den = _after_warmup(r, b)
            return _after_warmup(r, a) / den if den != 0 else float("nan")
        return per_seed(one)

    batch = runs[0].config["batch"]
    columns = {
        "var_reduction_pct": per_seed(lambda r: _after_warmup(r, "sim/prompt_var_reduction_pct")),
        "var_fraction_of_oracle": ratio("sim/prompt_var_reduction_pct", "sim/prompt_oracle_var_reduction_pct"),
        "wse_reduction_pct": per_seed(lambda r: _after_warmup(r, "sim/prompt_wse_reduction_pct")),
        "wse_fraction_of_oracle": ratio("sim/prompt_wse_reduction_pct", "sim/prompt_oracle_wse_reduction_pct"),
        "oracle_var_reduction_pct": per_seed(lambda r: _after_warmup(r, "sim/prompt_oracle_var_reduction_pct")),
        "zero_variance_share": per_seed(lambda r: _after_warmup(r, "zero_variance_frac")),
        "trained_share": per_seed(lambda r: _after_warmup(r, "compute/prompts_trained") / batch),
        "rollouts_generated_per_step": per_seed(lambda r: _after_warmup(r, "compute/rollouts_generated")),
        "tokens_generated_per_step": per_seed(lambda r: _after_warmup(r, "compute/tokens_generated")),
        "controller_ms_per_step": per_seed(lambda r: 1000 * r.timing["controller_s"] / r.timing["steps"]
                                           if r.timing else np.nan),
        "step_ms": per_seed(lambda r: 1000 * r.wall_s / r.config["steps"]),
    }
    return {k: [float(x) for x in mean_ci(v)] for k, v in columns.items()}


def se_table(stats: dict[str, dict[str, list[float]]]) -> str:
    rows = []
    for m, e in stats.items():
        rows.append([METHODS[m].label, fmt(*e["var_reduction_pct"], 1), fmt(*e["var_fraction_of_oracle"], 2),
                     fmt(*e["wse_reduction_pct"], 1), fmt(*e["wse_fraction_of_oracle"], 2),
                     fmt(*e["zero_variance_share"], 3), fmt(*e["trained_share"], 2),
                     f"{e['rollouts_generated_per_step'][0]:.0f}", fmt(e["tokens_generated_per_step"][0], np.nan, 0),
                     f"{e['controller_ms_per_step'][0]:.2f}",
                     f"{e['step_ms'][0]:.1f}"])
    return markdown_table(["method", "Eq. 28 red. (%)", "÷ oracle", "WSE red. (%)", "÷ oracle",
                           "zero-var share", "trained share", "rollouts/step", "tokens/step", "ctrl ms/step",
                           "step ms"], rows)


def gain_table(methods: Sequence[str], result: dict[str, Any]) -> str:
    """Per method: Δ vs tuned GRPO and vs GRPO at the same lr (every tuned metric), the step-matching
    factors with Δ mean acc vs the two step-matched GRPOs, and the tuned lr of each metric."""
    mean_acc = GAIN_METRICS[1][0]
    rows = []
    for m in methods:
        if m == "grpo":
            continue
        entry, match = result["gains"][m], result["step_matching"][m]
        rows.append([METHODS[m].label] + [fmt(*entry[metric]["vs_tuned"], 1, 100) for metric, _ in GAIN_METRICS]
                    + [fmt(*entry[metric].get("vs_tuned_tokens", [np.nan] * 2), 1, 100) for metric, _ in GAIN_METRICS]
                    + [fmt(*entry[metric]["vs_grpo"], 1, 100) for metric, _ in GAIN_METRICS]
                    + [f"{match['first']:.2f} / {match['second']:.2f}",
                       fmt(*entry[mean_acc]["vs_matched_first"], 1, 100),
                       fmt(*entry[mean_acc]["vs_matched_second"], 1, 100)]
                    + [" / ".join(f"{result['tuned_lr'][metric][x]:g}" for x in (m, "grpo")) for metric, _ in GAIN_METRICS])
    return markdown_table(["method"] + [f"Δ {label} vs tuned GRPO (pp)" for _, label in GAIN_METRICS]
                          + [f"Δ {label} vs tuned GRPO, equal tokens (pp)" for _, label in GAIN_METRICS]
                          + [f"Δ {label} vs GRPO, same lr (pp)" for _, label in GAIN_METRICS]
                          + ["c1 = E[m] / c2 = √E[m²]", "Δ mean acc vs GRPO at lr × c1 (pp)",
                             "Δ mean acc vs GRPO at lr × c2 (pp)"]
                          + [f"tuned lr ({label}): method / GRPO" for _, label in GAIN_METRICS], rows)


def grid_lines(methods: Sequence[str], result: dict[str, Any]) -> list[str]:
    """Each method's learning-rate grid as run (starting grid plus its extensions) and any best point at an edge."""
    grids = "; ".join(f"{METHODS[m].label} {{{', '.join(f'{v:.3g}' for v in result['lr_grid'][m])}}}" for m in methods)
    edges = ", ".join(result["edges"]) or "none"
    return [f"Learning-rate scales run (each method's own grid, sqrt(2) steps, extended while its best val point "
            f"was at an edge): {grids}. Best point still at an edge after the extension: {edges}.", ""]


def world_section(name: str, world: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    methods = world["methods"]
    grid, result = world["grid"], world["decision"]
    stats = {m: run_stats(grid[(m, 1.0)]) for m in methods}
    stats.update({m: run_stats(runs) for (m, _), runs in world["references"].items()})
    matched_rows, matched_summary = [], {}
    for m, entry in world.get("selector_matched", {}).items():
        gains = {metric: [float(x) for x in mean_ci(final_eval(grid[(m, 1.0)], metric) - final_eval(entry["runs"], metric))]
                 for metric, _ in GAIN_METRICS}
        matched_summary[m] = {"factor": entry["factor"], "gains": gains}
        matched_rows.append([METHODS[m].label, f"{entry['factor']:.2f}"]
                            + [fmt(*gains[metric], 1, 100) for metric, _ in GAIN_METRICS])
    matched_lines = []
    if matched_rows:
        matched_lines = ["Selectors against GRPO with their larger shared and group steps (lr_shared and lr_group x "
                         "the selector's mean batch ÷ prompts trained, both at lr scale 1, paired by seed): the "
                         "simulator's learner divides those steps by the prompts trained on but not the prompt-skill "
                         "step, so what a selector gains over tuned GRPO can be this normalisation rather than the "
                         "selection; in a language model's token-mean loss dropping zero-advantage groups rescales "
                         "the whole gradient instead.", "",
                         markdown_table(["method", "step factor"] + [f"Δ {label} vs step-matched GRPO (pp)"
                                                                    for _, label in GAIN_METRICS], matched_rows), ""]
    desc = ", ".join(f"{k} = {v}" for k, v in world["overrides"].items()) or "the default world"
    lines = [f"## World `{name}` ({desc})", "", "SE proxy, compute and time at lr scale 1 (means after the first "
             "pass over the pool; ÷ oracle = the reduction as a fraction of the per-prompt oracle's on the same "
             "batches, per seed):", "", se_table(stats), "", "Held-out test split, every method at its own tuned lr "
             "(val split), paired by seed; step-matched GRPO = GRPO at lr × c (c measured on the method's own lr-1 runs; "
             "where c is within 2% of 1, as for a method without an advantage multiplier, they are GRPO's own lr-1 "
             "runs):", "", gain_table(methods, result), "", *grid_lines(methods, result), *matched_lines]
    return lines, {"stats": stats, "decision": result, "selector_matched": matched_summary}


def world_rows(world: str, entry: dict[str, Any]) -> list[str]:
    """The decision's per-method lines of one world: SE-proxy reduction ÷ the oracle's, Δ mean and worst-group
    held-out accuracy vs tuned GRPO at equal rollouts and at equal tokens, tokens per step ÷ GRPO's,
    zero-variance share and time per step."""
    stats, gains = entry.get("stats", {}), entry["decision"]["gains"]
    if not stats:
        return []
    rollouts = sorted({f"{e['rollouts_generated_per_step'][0]:.0f}" for e in stats.values()})
    base = stats.get("grpo", {}).get("tokens_generated_per_step", [np.nan])[0]
    lines = [f"  {world}: every run generated {' / '.join(rollouts)} rollouts per step (equal rollouts; the tokens "
             "differ: equal tokens reads both runs where each had generated the smaller of their totals)",
             f"    {'method':<34} {'Eq.28 red. ÷ oracle':>20} {'Δ mean acc vs tuned':>20} {'Δ worst-group vs tuned':>23} "
             f"{'(equal tokens)':>15} {'(equal tokens)':>15} {'tokens ÷ GRPO':>14} {'zero-var share':>15} "
             f"{'ms/step (ctrl)':>15}"]
    worst, mean = GAIN_METRICS[0][0], GAIN_METRICS[1][0]
    for m, e in stats.items():
        g = gains.get(m)
        delta = [fmt(*g[k][v], 1, 100) if g else ("(is GRPO)" if m == "grpo" else "(SE only)")
                 for v in ("vs_tuned", "vs_tuned_tokens") for k in (mean, worst)]
        ratio = fmt(e.get("tokens_generated_per_step", [np.nan])[0] / base, np.nan, 3)
        lines.append(f"    {METHODS[m].label:<34} {fmt(*e['var_fraction_of_oracle'], 2):>20} {delta[0]:>20} {delta[1]:>23} "
                     f"{delta[2]:>15} {delta[3]:>15} {ratio:>14} "
                     f"{fmt(*e['zero_variance_share'], 3):>15} {e['step_ms'][0]:>8.1f} ({e['controller_ms_per_step'][0]:.2f})")
    return lines


def decision_lines(summary: dict[str, Any]) -> list[str]:
    lines = ["arena decision (simulator: held-out test split vs tuned GRPO, every method at its own tuned lr, paired "
             "seeds, 95% intervals, pp; times provisional, measured under load):"]
    for world, entry in summary["worlds"].items():
        lines += world_rows(world, entry)
    for world, entry in summary["worlds"].items():
        gains = entry["decision"]["gains"]
        for metric, label in GAIN_METRICS:
            for key, text in (("vs_tuned", ""), ("vs_tuned_tokens", " at equal tokens")):
                ci = {METHODS[m].label: g[metric].get(key, (np.nan, np.nan)) for m, g in gains.items()}
                better = [m for m, (mean, half) in ci.items() if mean - half > 0]
                worse = [m for m, (mean, half) in ci.items() if mean + half < 0]
                lines.append(f"  {world:<11} {label:<25} above tuned GRPO{text}: {', '.join(better) or 'none'}; "
                             f"below: {', '.join(worse) or 'none'}")
        for m, matched in entry.get("selector_matched", {}).items():
            mean, half = matched["gains"][GAIN_METRICS[1][0]]
            lines.append(f"  {world:<11} {METHODS[m].label} vs GRPO with its step (x{matched['factor']:.2f} shared/group): "
                         f"mean held-out acc {fmt(mean, half, 1, 100)} pp")
    if any(entry.get("selector_matched") for entry in summary["worlds"].values()):
        lines.append("  (selectors: the simulator's learner divides its shared and group steps by the prompts trained on, "
                     "not its prompt-skill step; a selector's gain over tuned GRPO that turns into a loss against GRPO "
                     "with the selector's step comes from that normalisation, not from the selection: this assumption "
                     "decides the selectors' verdict, and a token-mean LM loss has a different one)")
    for label, stats in (("bimodal world", summary["worlds"].get("bimodal", {}).get("stats", {})),
                         ("bimodal world at the sqrt-law scale", summary.get("paper_scale", {}))):
        if "gdro_prompt" not in stats:
            continue
        frac, half = stats["gdro_prompt"]["var_fraction_of_oracle"]
        reached = "reached" if frac - half >= TARGET_FRACTION else "NOT reached"
        line = (f"  per-prompt Rollout-GDRO, {label}: {100 * frac:.1f} ± {100 * half:.1f}% of the per-prompt "
                f"oracle's Eq. 28 reduction (target {100 * TARGET_FRACTION:.0f}%: {reached})")
        refs = (("prompt_bayes", "Bayes reference with the true prior"), ("prompt_stale", "oracle on p at the previous visit"),
                ("rollout_gdro", "bin-level Rollout-GDRO"))
        line += "".join(f"; {text} {100 * stats[m]['var_fraction_of_oracle'][0]:.1f}%" for m, text in refs if m in stats)
        lines.append(line)
        bayes = stats.get("prompt_bayes", {}).get("var_fraction_of_oracle", [float("nan")])[0]
        if reached == "NOT reached" and bayes < TARGET_FRACTION:
            lines.append(f"    why not: the Bayes reference ({100 * bayes:.1f}%) plans on the posterior mean of v_i (Eq. 28 "
                         "is linear in v_i, so that is the best plug-in given the data) from every past rollout of the "
                         "prompt under the pool's TRUE prior (it ignores drift); it also stays below the target, while "
                         "the oracle fed the true p of the previous visit is near 100%: what is missing is the "
                         "information in a prompt's few past rollouts, not the allocator's rule")
    lm = summary.get("lm")
    if lm:
        lines += lm.get("decision", [])
    return lines


def early_stop_lines(worlds: dict[str, dict[str, Any]]) -> list[str]:
    """One paragraph per early-stopping method (DUET): its loop settings and, per world, the share of rollouts
    it aborted and of tokens it saved (every step of its lr-1 runs, all seeds)."""
    lines = []
    for method, settings in METHOD_SETTINGS.items():
        parts = []
        for name, world in worlds.items():
            runs = world["grid"].get((method, 1.0), [])
            if not runs or "compute/rollouts_aborted" not in runs[0].scalars:
                continue
            aborted = sum(np.nansum(r.scalars["compute/rollouts_aborted"]) for r in runs)
            generated = sum(np.nansum(r.scalars["compute/rollouts_generated"]) for r in runs)
            saved = sum(np.nansum(r.scalars["compute/tokens_saved"]) for r in runs)
            tokens = sum(np.nansum(r.scalars["compute/tokens_generated"]) for r in runs)
            parts.append(f"{name} {100 * aborted / generated:.1f}% / {100 * saved / (tokens + saved):.1f}%")
        if parts:
            label = METHODS[method].label if method in METHODS else method
            lines += [f"**Early stopping ({label}).** Rollouts still running at {settings['abort_horizon']} + "
                      f"{settings['abort_grace']} tokens are aborted (out of the feedback and the update) unless kept "
                      f"with probability {settings['abort_keep_prob']:g} (then weighted 1 / "
                      f"{settings['abort_keep_prob']:g} in the update; studykit/arena_settings.py). Rollouts aborted / "
                      f"tokens saved, logged steps of its lr-1 runs: {'; '.join(parts)}. What decides its rows: "
                      "docs/arena.md.", ""]
    return lines


def write(settings: StudySettings, worlds: dict[str, dict[str, Any]], wall: float,
          paper_scale: dict[Any, list[RunSummary]] | None = None, *, defaults: dict[str, Any],
          world_names: Sequence[str]) -> Path:
    """The report. ``defaults`` (the study's full setting) and ``world_names`` (every world it runs)
    say whether this run was reduced; they are passed in so that this module does not import the study's."""
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    first = next(iter(worlds.values()))["grid"][("grpo", 1.0)][0].config
    summary: dict[str, Any] = {"study": "arena", "wall_s": wall, "config": first, "worlds": {}}
    body: list[str] = []
    for name, world in worlds.items():
        lines, entry = world_section(name, world)
        body += lines
        summary["worlds"][name] = entry
    scale_lines: list[str] = []
    if paper_scale:
        summary["paper_scale"] = {m: run_stats(runs) for (m, _), runs in paper_scale.items()}
        cfg = next(iter(paper_scale.values()))[0].config
        seeds = min(len(r) for r in paper_scale.values())
        scale_lines = ["## The bimodal world at the sqrt-law study's scale (SE proxy only)", "",
                       f"{cfg['world']['num_prompts']:,} prompts, {cfg['batch']} per step, {cfg['steps']} steps, "
                       f"{seeds} seeds, lr scale 1 (the scale at which a review measured bin-level Rollout-GDRO at "
                       "21.0% Eq. 28 reduction against the per-prompt oracle's 36.1%):", "",
                       se_table(summary["paper_scale"]), ""]
    lm_path = out / LM_FILE
    if lm_path.is_file():
        summary["lm"] = json.loads(lm_path.read_text(encoding="utf-8"))
    decision = decision_lines(summary)
    seeds = min(len(r) for r in next(iter(worlds.values()))["grid"].values())
    run_seconds = sum(r.wall_s for w in worlds.values() for key in ("grid", "references") for runs in w[key].values()
                      for r in runs) + sum(r.wall_s for runs in (paper_scale or {}).values() for r in runs)
    reduced = [f"{k} {getattr(settings, k)} (default {defaults[k]})" for k in ("seeds", "steps", "prompts", "batch")
               if getattr(settings, k) != defaults[k]]
    missing = [w for w in world_names if w not in worlds] + ([] if paper_scale else ["the paper-scale SE check"])
    setting = ("**Setting: the simulator part in full.**" if not reduced and not missing else
               "**Setting: simulator part REDUCED** (" + "; ".join(reduced + [f"not run: {', '.join(missing)}"] * bool(missing))
               + "): its numbers are of this setting only.")
    lm_file = out / LM_FILE
    lm_part = json.loads(lm_file.read_text(encoding="utf-8")) if lm_file.is_file() else {}
    setting += (f" **LM part: {lm_part['setting']}** (see its section)." if lm_part.get("setting") else
                " LM part: see its section." if lm_part else " **LM part: not run.**")
    start = ", ".join(f"{v:.3g}" for v in sorted(set(settings.lr_grid) | {1.0}))
    lines = [
        "# Study `arena`: rollout allocation and prompt selection at equal compute", "",
        f"{len(next(iter(worlds.values()))['methods'])} methods × {len(worlds)} world(s) "
        f"({', '.join(worlds)}) × {seeds} seeds; {first['steps']} steps, {first['batch']} prompts per step, "
        f"{first['world']['num_prompts']:,} training prompts, n̄ = {first['n_bar']} in [{first['n_min']}, "
        f"{first['n_max']}]. Learning rate tuned per method: each method on its own grid starting at scales "
        f"{{{start}}} (sqrt(2) steps, studykit/lrgrid.py), extended by sqrt(2) while its best point on the val "
        f"split for any tuned metric was an end (at most {settings.lr_extend} steps beyond each end); the grids "
        f"as run are listed per world. The grid and reference runs took {run_seconds:,.0f} s (this invocation {wall:.0f} s: "
        "unchanged runs are read from their digests) on a shared 2-core machine under load (times are provisional).",
        "", setting, "",
        "**Equal compute.** Every method generates exactly batch × n̄ rollouts per step (the column "
        "rollouts/step): the allocators spend the exact budget, GRESO replaces the prompts it skips before "
        "generation, and the groups DAPO's filter (also part of GRESO) drops after generation count as generated. "
        "A rollout's length comes from the world's length model (docs/simulator.md: it grows with the prompt's "
        "difficulty and, where the fit says so, with failure), so a method that moves rollouts between easy and hard "
        "prompts generates other tokens at the same rollouts (tokens/step): the gains at equal tokens read each method and tuned GRPO where both had "
        "generated the smaller of their two token totals (interpolated between evaluations; docs/arena.md); the "
        "LM section compares both too. Selectors train on fewer prompts per step (trained share), which makes their "
        "update larger per prompt: the tuned-lr comparison is the one that removes a step-size effect.", "",
        "**SE proxy per prompt** (gdro_lab/allocation/prompt_oracle.py): Eq. 28 = Σ v_i / n_i and Eq. 33 = Σ σ_i / √n_i with "
        "the true v_i = 4 p_i (1 − p_i); reductions against uniform n̄; the per-prompt oracle is the exact "
        "integer minimiser of Eq. 28 on the true p_i; the Bayes reference uses the pool's true distribution of p "
        "as its prior and each prompt's whole history (what rollouts can tell at best).", "",
        *early_stop_lines(worlds), "## Decision", "", "```", *decision, "```", "", *scale_lines, *body]
    if summary.get("lm"):
        lines += summary["lm"].get("markdown", [])
    else:
        lines += ["## LM study", "", f"Not run with this report (no {LM_FILE}): `gdro arena` runs it.", ""]
    command = ["gdro arena"] + [f"--{k.replace('_', '-')} {getattr(settings, k)}" for k in
                                ("seeds", "steps", "prompts", "batch") if getattr(settings, k) != defaults[k]]
    command += [f"--worlds {','.join(worlds)}"] * (len(worlds) < len(world_names)) + ["--no-paper-scale"] * (not paper_scale)
    lm = summary.get("lm") or {}
    command += ["--sim-only"] if not lm else [f"--lm-seeds {lm['seeds']}"] * (lm.get("seeds", 0) < lm.get("default_seeds", 0))
    command += ["--lm-grid coarse"] * bool(lm.get("coarse")) + ["--lm-reuse-only"] * bool(lm.get("reuse_only"))
    lines += ["## Reproduce", "", f"`nice -n 10 {' '.join(command)} --update-reports` (this report; every run whose "
              "config is unchanged is read from its digest under the output folder, so a rerun redoes only what "
              "changed" + ("; `--lm-reuse-only` summarises the LM runs already finished in the output folder: "
                           "without it the command runs the missing ones" if lm.get("reuse_only") else "") + ").", ""]
    write_json(out / "summary.json", summary)
    (out / "decision.txt").write_text("\n".join(decision) + "\n", encoding="utf-8")
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
