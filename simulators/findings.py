"""The findings table of docs/simulator.md, built from the committed reports' summary.json files.

"Does Prompt-GDRO / Rollout-GDRO / joint beat *tuned* GRPO at equal compute?" is answered in the
docs by one table whose every number comes from a report's decision (``summary.json`` →
``decision.gains``); tests/simulators/test_sim_findings.py checks that the table in the docs is
exactly :func:`answer_table` of the committed reports, so the docs cannot drift from them.
Regenerate it with ``python -m simulators.findings`` after ``--update-reports``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from simulators.methods import get_method
from simulators.reporting import fmt, markdown_table

#: (report folder, sqrt-law world or "", what the row is called) in table order; methods come from the report.
ROWS = (
    ("curriculum", "", "default world, quick"),
    ("curriculum-all-methods", "", "default world, quick, all methods"),
    ("curriculum-full", "", "default world, paper-like scale (`--full`)"),
    ("curriculum-paper-1.7b", "", "paper-1.7b (hard)"),
    ("curriculum-paper-4b", "", "paper-4b (middle)"),
    ("curriculum-paper-8b", "", "paper-8b (easy)"),
    ("sqrt-law", "base", "sqrt-law, base world"),
    ("sqrt-law", "bimodal", "sqrt-law, bimodal world"),
)
METHODS = ("prompt_gdro", "rollout_gdro", "joint")
METRICS = (("test/worst_group_accuracy", "worst-group"), ("test/accuracy", "mean"))


def _decision(reports: Path, folder: str, world: str) -> dict[str, Any] | None:
    path = reports / folder / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    return summary["worlds"][world]["decision"] if world else summary["decision"]


def answer_table(reports: Path) -> str:
    """Markdown: per report and method, held-out gains (pp, paired, 95% CI) vs tuned and step-matched GRPO."""
    rows = []
    for folder, world, label in ROWS:
        result = _decision(reports, folder, world)
        if result is None:
            continue
        for method in METHODS:
            if method not in result["gains"]:
                continue
            gains = result["gains"][method]
            cells = [fmt(*gains[metric][key], 1, 100) for key in ("vs_tuned", "vs_step_matched")
                     for metric, _ in METRICS]
            lrs = " / ".join(f"{result['tuned_lr'][metric][method]:g}" for metric, _ in METRICS)
            rows.append([f"[{label}](../reports/{folder}/report.md)", get_method(method).label, *cells, lrs])
    header = ["world (report)", "method"] + [f"{name}: Δ vs {base} GRPO (pp)" for base in ("tuned", "step-matched")
                                             for _, name in METRICS] + ["method's tuned lr (wg / mean)"]
    return markdown_table(header, rows)


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent / "reports"
    sys.stdout.write(answer_table(Path(sys.argv[1]) if len(sys.argv) > 1 else root) + "\n")
