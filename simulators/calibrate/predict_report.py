"""The report of `gdro predict`: the screen, a table per metric, the per-draw gains, summary.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulators.calibrate.predict import LABELS, METRICS, Settings, _pp
from simulators.reporting import markdown_table, write_json


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
