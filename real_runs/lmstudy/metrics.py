"""Held-out metrics of the CPU learning study, per half of the held-out split.

From the trainer's per-half-group benchmarks (``lmstudy_{half}_{group}``): the mean over groups and the
worst group of ``/mean@8`` and ``/pass@8``. The **val** half chooses; the **test** half reports
(docs/lm-study-notes.md#real_runs-lmstudy-metrics).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from real_runs.lmstudy.tasks import SOURCE

#: report name -> (per-benchmark metric, reducer over groups)
METRICS = {
    "pass@1": ("mean@8", "mean"),
    "pass@8": ("pass@8", "mean"),
    "worst-group pass@1": ("mean@8", "min"),
    "worst-group pass@8": ("pass@8", "min"),
}


def benchmark(half: str, group: str) -> str:
    return f"{SOURCE}_{half}_{group}"


def eval_table(evals: Sequence[dict[str, Any]], groups: Sequence[str], half: str = "test") -> dict[str, np.ndarray]:
    """Per-evaluation arrays of one half: ``step`` (E,), each METRICS name (E,), and per group
    ``groups/mean@8`` / ``groups/pass@8`` (E, G)."""
    steps = np.array([int(e["step"]) for e in evals], dtype=np.int64)
    out: dict[str, np.ndarray] = {"step": steps}
    for name in {n for n, _ in METRICS.values()}:
        out[f"groups/{name}"] = np.array([[float(e["metrics"].get(f"{benchmark(half, g)}/{name}", np.nan))
                                           for g in groups] for e in evals]).reshape(len(steps), len(groups))
    for label, (name, reducer) in METRICS.items():
        per_group = out[f"groups/{name}"]
        out[label] = per_group.mean(axis=1) if reducer == "mean" else per_group.min(axis=1)
    return out


def final_metrics(path: Path, groups: Sequence[str], half: str) -> dict[str, float]:
    """The METRICS of a run's last evaluation on one half (read from its eval.jsonl)."""
    from gdro_lab.runformat.runlog import read_run

    evals = read_run(path).evals
    if not evals:
        raise ValueError(f"{path} has no evaluation in eval.jsonl: re-run it")
    table = eval_table(evals[-1:], groups, half)
    return {label: float(table[label][0]) for label in METRICS}
