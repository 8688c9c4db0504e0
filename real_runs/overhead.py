"""Where a `gdro train` process spent its time: compute against the trainer's own overhead.

compute  = generate + logprobs + update + sync (weights to the engine)
overhead = plan + reward + controllers + record + other + log + checkpoint
loop     = compute + overhead: every step's ``time/step`` plus logging and checkpoints.
Evaluation is reported apart. ``time/elapsed`` (:class:`RunClock`) is wall-clock seconds since the run
started, continued across a resume. Each phase, the shares and the clock: docs/train-notes.md#real_runs-overhead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping

import numpy as np

from gdro_lab.runformat.runlog import read_run

COMPUTE = ("generate", "logprobs", "update", "sync")
OVERHEAD = ("plan", "reward", "controllers", "record", "other", "log", "checkpoint")
IN_STEP = ("plan", "generate", "reward", "controllers", "logprobs", "update", "sync", "record")


class RunTimes:
    """Totals of a process's phases over its steps (``time/*`` seconds of each step, plus log,
    checkpoint and eval seconds measured outside ``time/step``)."""

    def __init__(self) -> None:
        self.steps = 0
        self.totals: dict[str, float] = {name: 0.0 for name in (*COMPUTE, *OVERHEAD, "eval")}

    def add_step(self, seconds: Mapping[str, float]) -> None:
        """One step's ``time/*`` scalars; ``other`` = time/step minus its named phases."""
        self.steps += 1
        named = 0.0
        for phase in IN_STEP:
            value = float(seconds.get(f"time/{phase}", 0.0))
            self.totals[phase] += value
            named += value
        self.totals["other"] += max(0.0, float(seconds.get("time/step", named)) - named)

    def add(self, phase: str, seconds: float) -> None:
        self.totals[phase] += float(seconds)

    def summary(self) -> dict[str, float]:
        """Seconds per phase, the loop, and each phase's share of the loop."""
        loop = sum(self.totals[p] for p in (*COMPUTE, *OVERHEAD))
        out = {f"seconds/{p}": v for p, v in self.totals.items()}
        out["seconds/loop"] = loop
        out["steps"] = float(self.steps)
        for phase in (*COMPUTE, *OVERHEAD):
            out[f"share/{phase}"] = self.totals[phase] / loop if loop else 0.0
        out["share/compute"] = sum(out[f"share/{p}"] for p in COMPUTE)
        out["share/overhead"] = sum(out[f"share/{p}"] for p in OVERHEAD)
        return out

    def lines(self) -> list[str]:
        """The printed summary (three lines)."""
        s = self.summary()
        compute = ", ".join(f"{p} {100 * s[f'share/{p}']:.1f}%" for p in COMPUTE)
        overhead = ", ".join(f"{p} {100 * s[f'share/{p}']:.2f}%" for p in OVERHEAD)
        return [f"time of {self.steps} step(s) in this process: {s['seconds/loop']:.2f} s "
                f"(+ {s['seconds/eval']:.2f} s evaluation)",
                f"  compute {100 * s['share/compute']:.1f}%: {compute}",
                f"  trainer overhead {100 * s['share/overhead']:.2f}%: {overhead}"]

    def write(self, run_dir: str | Path) -> None:
        """``RUN_DIR/timing.json``: the summary of the last process that wrote the run."""
        Path(run_dir, "timing.json").write_text(json.dumps(self.summary(), indent=1), encoding="utf-8")


class RunClock:
    """Wall-clock seconds since the run started (``time/elapsed``), cumulative across resumes.

    ``started``: this process's start (``time.perf_counter()``); ``before``: the seconds the run
    had logged when this process took it over (0 for a new run; :func:`logged_elapsed`)."""

    def __init__(self, started: float | None = None, before: float = 0.0) -> None:
        self.started = time.perf_counter() if started is None else float(started)
        self.before = float(before)

    def elapsed(self) -> float:
        return self.before + (time.perf_counter() - self.started)


def logged_elapsed(run_dir: str | Path, step: int) -> float:
    """The ``time/elapsed`` of ``step``'s record in ``RUN_DIR/steps.jsonl`` (the step a resume
    continues after); 0.0 for step 0. A run written before ``time/elapsed`` existed gets the sum of
    its records' ``time/step`` + ``time/eval`` up to ``step`` (start-up and checkpoints not counted)."""
    if step <= 0:
        return 0.0
    run = read_run(run_dir)
    kept = run.steps <= step
    logged = run.scalars.get("time/elapsed", np.full(run.steps.shape, np.nan))[kept]
    if np.isfinite(logged).any():
        return float(logged[np.isfinite(logged)][-1])
    total = np.zeros(int(kept.sum()))
    for name in ("time/step", "time/eval"):
        if name in run.scalars:
            total += np.nan_to_num(run.scalars[name][kept])
    return float(total.sum())
