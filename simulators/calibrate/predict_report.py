"""What `gdro predict` shows: the one-screen summary, and the report (a table per metric, summary.json)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simulators.calibrate.predict import LABELS, METHODS, METRICS, Calibrated, Settings
from studykit.tables import markdown_table, write_json


def _pp(entry: tuple[float, float]) -> str:
    mean, half = entry
    if not math.isfinite(mean):
        return "n/a"
    return f"{100 * mean:+.1f} ± {100 * half:.1f}" if math.isfinite(half) else f"{100 * mean:+.1f}"


def screen(summary: dict[str, Any], settings: Settings, cal: Calibrated, seconds: float) -> str:
    """One screen of plain text: the prediction per method."""
    metric = METRICS[0][0]
    scales = np.array(summary["tuned_scale"])
    lines = [f"gdro predict: {settings.draws} worlds drawn from the fit x {settings.seeds} seeds, "
             f"{settings.steps} steps x {settings.batch} prompts, lr x{settings.lr_scale:g} of the reference "
             f"({seconds:.0f} s)",
             "predicted gain in held-out accuracy, percentage points (95% interval: the fit's uncertainty and seed noise):",
             f"  {'method':<32} {'vs GRPO (same lr)':>18} {'vs tuned GRPO':>16} {'SE-proxy cut %':>15}  "
             "gain vs tuned GRPO most sensitive to"]
    for label, row in summary["methods"].items():
        se = row["se_reduction_pct"]
        shown = label in ("rollout_gdro", "joint") and math.isfinite(se[0])  # the allocators' own diagnostic
        se_text = (f"{se[0]:.1f} ± {se[1]:.1f}" if math.isfinite(se[1]) else f"{se[0]:.1f}") if shown else "-"
        sens = row["sensitive_to"]
        sens_text = (f"{PLAIN.get(sens['parameter'], sens['parameter'])} (rho {sens['spearman']:+.2f})"
                     if sens["parameter"] else "-")
        lines.append(f"  {LABELS[label]:<32} {_pp(row[metric]['vs_grpo']):>18} {_pp(row[metric]['vs_tuned']):>16} "
                     f"{se_text:>15}  {sens_text}")
    grid = summary["grid"]
    lines.append(f"  tuned GRPO's lr: x{np.median(scales):.2g} of the planned lr (median over draws; sqrt(2) grid "
                 f"x{grid[0]:.3g}..x{grid[-1]:.3g}" + (", still at its edge in some draws after extending it)"
                                                        if np.any(np.isin(scales, (grid[0], grid[-1]))) else ")"))
    if settings.optimizer == "adam":
        lines.append("  optimizer adam: a constant advantage scale cancels, so step-matched GRPO equals GRPO here and "
                     "Prompt-GDRO's multipliers act as mean-1 weights")
    lines.append("In plain words:")
    lines += [f"  {part}" for part in plain_words(summary, metric)]
    if cal.fit is None:
        lines.append("  note: no fit.json next to the world file: one world, no parameter uncertainty in the intervals")
    return "\n".join(lines)


PLAIN = {"lr_group": "learning speed lr_group", "lr_prompt": "memorisation lr_prompt", "curvature": "price of a step curvature",
         "score_noise": "score noise tau", "transfer": "transfer", "update_noise": "update noise",
         "difficulty_offset": "difficulty offset", "unsolvable_frac": "never-solved share",
         "always_solved_frac": "always-solved share", "group_difficulty_scale": "group hardness scale",
         "group_difficulty_tail": "group hardness tail", "prompt_difficulty_scale": "prompt hardness scale",
         "prompt_difficulty_tail": "prompt hardness tail"}
"""The fitted parameters in words (the screen's sensitivity column)."""


def plain_words(summary: dict[str, Any], metric: str) -> list[str]:
    """One sentence per GDRO method: does the calibrated world predict a gain over tuned GRPO, and on what does
    that turn?"""
    parts = []
    for label in METHODS:
        mean, half = summary["methods"][label][metric]["vs_tuned"]
        if not math.isfinite(half):
            verdict = "no interval (one draw)"
        elif mean - half > 0:
            verdict = "predicted to beat tuned GRPO"
        elif mean + half < 0:
            verdict = "predicted to lose to tuned GRPO"
        else:
            verdict = "not predicted to differ from tuned GRPO beyond the fit's uncertainty"
        sens = summary["methods"][label]["sensitive_to"]
        turns = (f"; it turns most on the {PLAIN.get(sens['parameter'], sens['parameter'])}" if sens["parameter"]
                 and abs(sens["spearman"]) >= 0.5 else "")
        parts.append(f"{LABELS[label]} {verdict} ({_pp((mean, half))} pp){turns}.")
    return parts


def write_report(summary: dict[str, Any], settings: Settings, screen: str, out: Path) -> Path:
    """report.md and summary.json into ``out``; returns report.md."""
    lines = ["# Prediction in the calibrated world", "", "```", screen, "```", ""]
    for metric, label in METRICS:
        rows = [[LABELS[m], _pp(row[metric]["vs_grpo"]), _pp(row[metric]["vs_tuned"])]
                for m, row in summary["methods"].items()]
        lines += [f"## {label} (pp)", "", markdown_table(["method", "vs GRPO at the planned lr", "vs tuned GRPO"], rows), ""]
    lines += ["Intervals: mean ± 1.96 sd over the drawn worlds of each world's seed-mean gain (parameter uncertainty "
              "and seed noise together). Runs: `runs/draw<j>/<method>/seed<s>` (gdro run format).", ""]
    write_json(out / "summary.json", {"settings": {k: str(v) if isinstance(v, Path) else v
                                                   for k, v in settings.__dict__.items()}, **summary})
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
