"""The CPU learning study end to end: run it (or read a finished one), measure the slips, write the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from real_runs.lmstudy import tasks
from real_runs.lmstudy.learning_study import StudyConfig

CAVEATS = [
    "- **The first pass over the pool is plain GRPO for every method**: the classifier bins a prompt only "
    "after its first visit, so during the first train_size / prompts_per_step steps every prompt is unassigned "
    "(multiplier 1, n̄ rollouts) and all methods of a seed at the same lr and advantage scale produce identical "
    "runs (the step-50 evaluations match exactly, a check of the pairing); the controllers act in the remaining "
    "steps.",
    "- **Why this need not reproduce the paper's +10%**: the paper trains 1.7-8B models for 1,000 steps on "
    "17k real problems and scores benchmarks whose hard tail is large; here a 0.5 M-parameter model learns for "
    "200 steps, and much of GRPO's held-out gain comes in the first pass over the pool, while every method is "
    "still GRPO (bullet above), so the controllers can only change the remaining 150 steps. What RL learns "
    "here is mostly to drop the demonstrator's slips (the section below).",
    "- **Step matching under AdamW** scales the advantages (`loss.adv_scale`), not the learning rate: Adam "
    "normalises the gradient's scale away, so Prompt-GDRO's mean multiplier does not make its step larger the "
    "way a larger learning rate would; what is left of a uniform scale is its balance with the KL term and the "
    "clips, which is what the two step-matched runs control for.",
]
SETTING_NOTES = {"default": "", "quick": " — QUICK setting (CI smoke run; numbers are not evidence)",
                 "small": " — SMALL setting (60 steps; not the default study)"}


def _log(text: str) -> None:
    print(text, flush=True)


def study_and_report(cfg: StudyConfig, out: Path, report_dir: Path, setting: str = "default",
                     report_only: bool = False, log: Callable[[str], None] = _log) -> Path:
    """Run the study (reusing finished runs) and write its report; returns report.md.

    ``report_only``: no training; report the seeds of ``out`` whose runs all finished.
    """
    from real_runs.lmstudy import slips
    from real_runs.lmstudy.labels import METHOD_LABELS
    from real_runs.lmstudy.study_plan import finished_study, run_study
    from real_runs.lmstudy.study_report import write_report
    from real_runs.lmstudy.warmstart import load_warm_start
    from studykit.tables import write_json

    result = finished_study(cfg, out) if report_only else run_study(cfg, out, log=log)
    warm = {}
    for seed, path in sorted(result["warm_paths"].items()):
        warm_file = Path(path) / "warmstart.json"
        if warm_file.is_file():
            warm[seed] = json.loads(warm_file.read_text())
    note = SETTING_NOTES[setting]
    complete = result.get("complete_seeds")
    if complete is not None and len(complete) < cfg.seeds:
        note += f" — PARTIAL: {len(complete)} of {cfg.seeds} seeds finished"
    measured = slips.measure_study({s: Path(p) for s, p in result["warm_paths"].items()}, result["runs"],
                                   tasks.heldout_halves(cfg.task_config())["test"],
                                   lambda path: load_warm_start(path)[:2])
    report_dir.mkdir(parents=True, exist_ok=True)
    write_json(report_dir / "slips.json", measured)
    return write_report(result, list(tasks.SKILLS), report_dir, note, warm,
                        CAVEATS + slips.markdown(measured, METHOD_LABELS))
