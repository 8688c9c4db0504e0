"""What `gdro predict` shows: the one-screen summary, and the report (a table per metric, summary.json)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simulators.calibrate.predict import DECISIVE, LABELS, METHODS, METRICS, WIDENING, Calibrated, Settings
from studykit.tables import markdown_table, write_json


def _pp(entry: dict[str, Any] | None) -> str:
    """'median [wide_lo, wide_hi]' in pp ('n/a' without worlds; the median alone with one world)."""
    if not entry or not math.isfinite(entry["median"]):
        return "n/a"
    mid = f"{100 * entry['median']:+.1f}"
    return f"{mid} [{100 * entry['wide_lo']:+.1f}, {100 * entry['wide_hi']:+.1f}]" if math.isfinite(entry["lo"]) else mid


def _share(entry: dict[str, Any]) -> str:
    """'0.43 [0.40, 0.46]' (a rate: median [central 95%])."""
    return f"{entry['median']:.2f}" + (f" [{entry['lo']:.2f}, {entry['hi']:.2f}]" if math.isfinite(entry["lo"]) else "")


def _counts(entry: dict[str, Any]) -> str:
    return f"{entry['above_zero']}/{entry['below_zero']}"


def widening_text(summary: dict[str, Any]) -> str:
    """How the printed interval was widened: this fit's own bootstrap factors, or the global one."""
    how = summary.get("widening", {"source": "global"})
    if how["source"] != "bootstrap":
        return (f"their central 95% widened x{WIDENING:g}, one factor calibrated on known worlds; gdro predict "
                "--bootstrap B calibrates it for this fit")
    if how.get("method") == "error":
        halves = ", ".join(f"{metric.split('/')[-1]} +-{100 * h:.1f}" for metric, h in how["half_widths"].items())
        return (f"the median +- t x rms of each gain's errors in {how['count']} bootstrap refits of this fit, or the "
                f"central 95% where wider; median half-widths, pp: {halves}")
    factors = ", ".join(f"{metric.split('/')[-1]} x{f:.2f}" for metric, f in how["factors"].items())
    return f"their central 95% widened by this fit's own factor from {how['count']} bootstrap refits: {factors}"


def screen(summary: dict[str, Any], settings: Settings, cal: Calibrated, seconds: float) -> str:
    """One screen of plain text: the prediction per method, what decides it, the verdicts in words."""
    metric = METRICS[0][0]
    scales = np.array(summary["tuned_scale"])
    lines = [f"gdro predict: {settings.draws} worlds drawn from the fit x {settings.seeds} seeds, "
             f"{settings.steps} steps x {settings.batch} prompts, lr x{settings.lr_scale:g} of the reference "
             f"({seconds:.0f} s)",
             f"predicted gain in held-out accuracy, pp: median over the drawn worlds [95% interval: "
             f"{widening_text(summary)}]; worlds with a gain > 0 / < 0:",
             f"  {'method':<31} {'vs GRPO (same lr)':>24} {'vs tuned GRPO':>24} {'> 0 / < 0':>11} {'SE-proxy cut %':>15}"]
    for label, row in summary["methods"].items():
        se = row["se_reduction_pct"]
        shown = label in ("rollout_gdro", "joint") and se is not None and math.isfinite(se["median"])
        se_text = (f"{se['median']:.1f}" + (f" [{se['lo']:.1f}, {se['hi']:.1f}]" if math.isfinite(se["lo"]) else "")
                   if shown else "-")
        lines.append(f"  {LABELS[label]:<31} {_pp(row[metric]['vs_grpo']):>24} {_pp(row[metric]['vs_tuned']):>24} "
                     f"{_counts(row[metric]['vs_tuned']):>11} {se_text:>15}")
    grid = summary["grid"]
    lines.append(f"  tuned GRPO's lr: x{np.median(scales):.2g} of the planned lr (median over draws; sqrt(2) grid "
                 f"x{grid[0]:.3g}..x{grid[-1]:.3g}" + (", still at its edge in some draws after extending it)"
                                                        if np.any(np.isin(scales, (grid[0], grid[-1]))) else ")"))
    if settings.optimizer == "adam":
        lines.append("  optimizer adam: a constant advantage scale cancels, so step-matched GRPO equals GRPO here and "
                     "Prompt-GDRO's multipliers act as mean-1 weights")
    scaling, world = summary.get("scaling"), summary.get("grpo_final_success")
    if scaling and world and math.isfinite(world["median"]):
        lines.append(f"  ScaleRL's sigmoid (arXiv 2510.13786) of the sweep run at lr {scaling['lr']:g}: batch success "
                     f"{scaling['success']:.2f} at the planned {scaling['rollouts']:,.0f} rollouts (asymptote A "
                     f"{scaling['A']:.2f}, exponent B {scaling['B']:.2f}); the world: GRPO ends at {_share(world)}")
    if summary["methods"][METHODS[0]]["decided_by"]:
        lines.append("What decides the gain vs tuned GRPO: each parameter at the low / high end of its 95% interval, "
                     "the others at their medians (pp):")
        lines += [f"  {LABELS[label]}: {decided_text(summary, label, metric)}" for label in METHODS]
    lines.append("In plain words:")
    lines += [f"  {part}" for part in plain_words(summary, metric)]
    if cal.fit is None:
        lines.append("  note: no fit.json next to the world file: one world, no parameter uncertainty in the verdicts")
    return "\n".join(lines)


PLAIN = {"lr_group": "learning speed lr_group", "lr_prompt": "memorisation lr_prompt", "curvature": "price of a step curvature",
         "score_noise": "score noise tau", "transfer": "transfer", "update_noise": "update noise",
         "difficulty_offset": "difficulty offset", "unsolvable_frac": "never-solved share",
         "always_solved_frac": "always-solved share", "group_difficulty_scale": "group hardness scale",
         "group_difficulty_tail": "group hardness tail", "prompt_difficulty_scale": "prompt hardness scale",
         "prompt_difficulty_tail": "prompt hardness tail"}
"""The fitted parameters in words."""


def decided_text(summary: dict[str, Any], label: str, metric: str, top: int = 3) -> str:
    """'(median world -0.3) score noise tau -6.0 / +2.1 (flips), ...': the gain at the low / high end of the
    ``top`` parameters that move it most."""
    rows = summary["methods"][label]["decided_by"][metric]["vs_tuned"]
    parts = [f"{PLAIN.get(r['parameter'], r['parameter'])} " + " / ".join(f"{100 * g:+.1f}" for g in r["gains"])
             + (" (flips)" if r["flips"] else "") for r in rows[:top]]
    return f"(median world {100 * rows[0]['median_world']:+.1f}) " + ", ".join(parts) if rows else "-"


def verdict(entry: dict[str, Any], threshold: float, decisive: float = DECISIVE) -> str:
    """The verdict against a baseline from the counts of drawn worlds (``predict.over_worlds``)."""
    n, t = entry["worlds"], f"{100 * threshold:g} pp"
    need = decisive * n
    within = n - entry["above_threshold"] - entry["below_threshold"]
    if n < 2:
        return "no verdict (one world: no parameter uncertainty)"
    if entry["above_threshold"] >= need:
        return f"better by more than {t} in {entry['above_threshold']} of {n} worlds the data allow"
    if entry["below_threshold"] >= need:
        return f"worse by more than {t} in {entry['below_threshold']} of {n} worlds the data allow"
    if within >= need:
        return f"within ±{t} in {within} of {n} worlds the data allow"
    if entry["above_zero"] >= need:
        return f"better in {entry['above_zero']} of {n} worlds the data allow, by more than {t} in {entry['above_threshold']}"
    if entry["below_zero"] >= need:
        return f"worse in {entry['below_zero']} of {n} worlds the data allow, by more than {t} in {entry['below_threshold']}"
    return f"undecided: better in {entry['above_zero']}, worse in {entry['below_zero']} of {n} worlds the data allow"


def plain_words(summary: dict[str, Any], metric: str) -> list[str]:
    """One sentence per GDRO method: its verdict against tuned GRPO and the parameter that decides it."""
    parts = []
    for label in METHODS:
        entry = summary["methods"][label][metric]["vs_tuned"]
        text = f"{LABELS[label]} vs tuned GRPO: {verdict(entry, summary['threshold'], summary['decisive'])}"
        rows = summary["methods"][label]["decided_by"].get(metric, {}).get("vs_tuned", [])
        if rows and math.isfinite(rows[0]["moves"]):
            flips = sum(r["flips"] for r in rows[1:])
            text += (f"; decided most by the {PLAIN.get(rows[0]['parameter'], rows[0]['parameter'])} (moves it "
                     f"{100 * rows[0]['moves']:.1f} pp across its interval{', flips it' if rows[0]['flips'] else ''})")
            text += f"; {flips} other parameter{'s' * (flips != 1)} flip{'s' * (flips == 1)} it" if flips else ""
        parts.append(text + ".")
    return parts


def write_report(summary: dict[str, Any], settings: Settings, screen: str, out: Path) -> Path:
    """report.md and summary.json into ``out``; returns report.md."""
    lines = ["# Prediction in the calibrated world", "", "```", screen, "```", ""]
    for metric, label in METRICS:
        rows = [[LABELS[m], _pp(row[metric]["vs_grpo"]), _counts(row[metric]["vs_grpo"]), _pp(row[metric]["vs_tuned"]),
                 _counts(row[metric]["vs_tuned"]), verdict(row[metric]["vs_tuned"], settings.threshold)]
                for m, row in summary["methods"].items()]
        lines += [f"## {label} (pp)", "",
                  markdown_table(["method", "vs GRPO at the planned lr", "> 0 / < 0", "vs tuned GRPO", "> 0 / < 0",
                                  "verdict vs tuned GRPO"], rows), ""]
        if summary["methods"][METHODS[0]]["decided_by"]:
            lines += ["What decides the gain vs tuned GRPO (gain at the low / high end of each parameter's interval, "
                      "the others at their medians):", ""]
            lines += [f"- {LABELS[m]}: {decided_text(summary, m, metric, top=5)}" for m in METHODS] + [""]
    lines += ["Gains: each drawn world's seed-mean gain (parameter uncertainty and seed noise together); median over "
              f"the worlds and their central 95% (order statistics) widened about the median ({widening_text(summary)}; "
              "docs/calibration-fit.md#per-fit-widening). Verdicts: the counts of worlds beyond "
              f"±{100 * settings.threshold:g} pp; {100 * summary['decisive']:.0f}% of the worlds must agree. Runs: "
              "`runs/draw<j>/<method>/seed<s>` (gdro run format; j past the drawn worlds: the median world, then "
              "each parameter at its interval's low and high end, in the order of summary.json's decided_by).", ""]
    write_json(out / "summary.json", {"settings": {k: str(v) if isinstance(v, Path) else v
                                                   for k, v in settings.__dict__.items()}, **summary})
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
