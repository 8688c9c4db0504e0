"""``gdro report RUN_DIR [...]``: the app's figures (:mod:`apps.report.figures`) as static PNGs.

Per run, ``<out>/<name>/`` (:func:`report_names`) receives the app's figures as PNGs; with two or more
runs ``<out>/compare.png`` overlays them. Nothing is replaced without ``--overwrite``; ``<out>`` is
``gdro-runs/reports`` unless ``--out`` (a new or empty folder, or one gdro report wrote); an unreadable
run is reported on one line and skipped; ``--jobs`` workers give the same bytes whatever their number.
A folder of runs (no ``meta.json``: ``gdro report gdro-runs/``) stands for every run folder under it (:func:`expand_folders`); one that holds none stops the report
on one line. The files: docs/app-data-notes.md#apps-report-cli.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Mapping, Sequence

from matplotlib.figure import Figure

from apps.data import identity, listing, loading, study
from apps.data.colours import group_colours
from apps.data.groups import Grouping
from apps.report.figures import (compare_figure, evaluations_figure, lead_lag_figure, outcomes_figure,
                                 rollout_budget_figure, save_png, se_proxy_figure, step_time_figure,
                                 traveling_wave_figure)
from studykit.args import OneLineParser
from gdro_lab._validate import ConfigError
from gdro_lab.runformat.output import claim_output
from gdro_lab.runformat.runlog import META_FILE, RunData

DEFAULT_OUT = Path("gdro-runs") / "reports"  # the ignored output folder, never the committed reports/


# ----------------------------------------------------------------------------- report folders

def report_names(runs: Mapping[Path, RunData]) -> dict[Path, str]:
    """Each run's report folder: the app's name of the run (:func:`apps.data.identity.group_runs` over the
    given runs, labelled by their folders relative to their common parent) as ``<group>_seed<k>``,
    in letters, digits, ``.``, ``-`` and ``_`` (``study: grpo lr×1`` -> ``study-grpo_lrx1``)."""
    grouping, labels = _grouping(runs)
    out = {}
    for path, label in labels.items():
        seed = grouping.seed_of.get(label)
        group = grouping.group_of.get(label, label).replace("×", "x").replace(": ", "-")
        out[path] = safe_name(group if seed is None else f"{group}_seed{seed}")
    return out


def _grouping(runs: Mapping[Path, RunData]) -> tuple[Grouping, dict[Path, str]]:
    """The app's grouping of the runs, and each run's label (its folder relative to the runs' common parent)."""
    paths = [path.resolve() for path in runs]
    base = Path(os.path.commonpath([str(path.parent) for path in paths])) if paths else Path(".")
    labels = {path: resolved.relative_to(base).as_posix() for path, resolved in zip(runs, paths)}
    grouping = identity.group_runs({labels[path]: run.config for path, run in runs.items()},
                                   producers={labels[path]: str(run.meta.get("producer", "")) for path, run in runs.items()})
    return grouping, labels


def safe_name(label: str) -> str:
    """A folder name from a run label (letters, digits, dot, dash, underscore)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "run"


def unique_name(name: str, taken: Mapping[str, object]) -> str:
    """``name``, or ``name-2``, ``name-3``... when an earlier run of this report already has it."""
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = f"{name}-{number}", number + 1
    return candidate


def expand_folders(paths: Sequence[Path]) -> tuple[list[Path], Path | None]:
    """Each path that is a run folder (or not a folder: it is reported later), and for a folder without
    a ``meta.json``, the run folders under it (:func:`apps.data.listing.find_candidates`); and the
    first such folder that holds none, or None."""
    out: list[Path] = []
    for path in paths:
        if (path / META_FILE).exists() or not path.is_dir():
            out.append(path)
            continue
        found, _ = listing.find_candidates(path)
        if not found:
            return out, path
        out.extend(found)
    return out, None


def write_report(run: RunData, out_dir: Path, step: int | None = None) -> list[Path]:
    """Write every per-run figure of ``run`` into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Callable[[], Figure]] = {
        "traveling_wave": lambda: traveling_wave_figure(run), "lead_lag": lambda: lead_lag_figure(run),
        "rollout_budget": lambda: rollout_budget_figure(run, step), "se_proxy": lambda: se_proxy_figure(run),
        "outcomes": lambda: outcomes_figure(run), "evaluations": lambda: evaluations_figure(run),
        "step_time": lambda: step_time_figure(run)}
    written = []
    for name, make in figures.items():
        target = out_dir / f"{name}.png"
        save_png(make(), target)
        written.append(target)
    return written


def write_reports(jobs: dict[Path, tuple[RunData, Path]], step: int | None, workers: int) -> list[list[Path]]:
    """Every run's figures ({run folder: (run, out folder)}), drawn by ``workers`` processes (in
    this process when 1); the files written, in the order of ``jobs``."""
    if workers <= 1 or len(jobs) <= 1:
        return [write_report(run, out_dir, step) for run, out_dir in jobs.values()]
    context = multiprocessing.get_context("spawn")  # a clean matplotlib per worker, whatever the parent holds
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        runs, out_dirs = zip(*jobs.values())  # each run goes to its worker as it is (not read again)
        return list(pool.map(write_report, runs, out_dirs, [step] * len(jobs)))


def default_jobs() -> int:
    """One worker per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# ----------------------------------------------------------------------------- command line

def build_parser() -> argparse.ArgumentParser:
    """Options of ``gdro report``."""
    parser = OneLineParser(prog="gdro report", description="Static PNG figures of run directories.")
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories to draw, or folders of runs (every run folder under them)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output folder; each run gets <out>/<name>/, its name in the app (default: gdro-runs/reports)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace figures already in the output folders (without it, existing figures "
                             "stop the report before anything is written)")
    parser.add_argument("--step", type=int, default=None, help="step of the budget frontier (default: last)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes drawing the runs (default: one per core, at most one per run)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry of ``gdro report``: 0 when every run was drawn, 1 when some could not be read."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.jobs is not None and args.jobs < 1:
        print(f"gdro report: --jobs {args.jobs} is not a number of workers: give 1 or more", file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"gdro report: --out {args.out} is a file, not a folder: give a folder for the figures", file=sys.stderr)
        return 2
    run_dirs, empty = expand_folders(args.run_dirs)
    if empty is not None:
        print(f"gdro report: {empty} holds no run directory (no meta.json under it): give run folders or the "
              "folder they are written under", file=sys.stderr)
        return 2
    entries = loading.discover_runs(None, run_dirs)
    if any(Path(args.out).resolve().is_relative_to(entry.path.resolve()) for entry in entries if entry.path.is_dir()):
        print(f"gdro report: --out {args.out} is inside a run directory; choose a folder outside the runs",
              file=sys.stderr)
        return 2
    readable: dict[Path, RunData] = {}
    failed = 0
    for entry in entries:
        try:
            run = loading.load_run(entry.path)
        except loading.RunLoadError as err:
            print(f"gdro report: skipped: {err}", file=sys.stderr)
            failed += 1
            continue
        if run.steps.size == 0:
            print(f"gdro report: skipped: {entry.path} has no steps logged yet", file=sys.stderr)
            failed += 1
            continue
        readable[entry.path] = run
    names = report_names(readable)
    loaded: dict[str, RunData] = {}
    for path, run in readable.items():
        loaded[unique_name(names[path], loaded)] = run
    targets = {name: args.out / name for name in loaded}
    if len(loaded) >= 2:
        targets["compare.png"] = args.out / "compare.png"
    existing = [path for path in targets.values() if path.exists() and (path.is_file() or any(path.iterdir()))]
    if existing and not args.overwrite:
        print(f"gdro report: {existing[0]} already holds a report ({len(existing)} in all): choose another --out "
              "or pass --overwrite", file=sys.stderr)
        return 2
    if not loaded:
        return 1  # every run was skipped, each with its line: nothing to write
    try:
        claim_output(args.out, "gdro report")  # never into a folder of the user's files; unwritable: fails here
    except ConfigError as err:
        print(f"gdro report: {err}", file=sys.stderr)
        return 2
    print(f"gdro report: writing to {args.out}", flush=True)
    jobs = {run.path: (run, targets[name]) for name, run in loaded.items()}
    for (run, out_dir), files in zip(jobs.values(), write_reports(jobs, args.step, args.jobs or default_jobs())):
        print(f"{run.path}: {len(files)} figures in {out_dir}")
    if len(loaded) >= 2:
        grouping, labels = _grouping(readable)
        by_label = {labels[path]: run for path, run in readable.items()}
        groups = study.group_runs(by_label, grouping)
        study_like = any(group.seeds >= 2 for group in groups)
        figure = compare_figure(loaded, groups, group_colours(grouping)) if study_like \
            else compare_figure(loaded)  # keyed by report name
        args.out.mkdir(parents=True, exist_ok=True)
        save_png(figure, args.out / "compare.png")
        print(f"compare: {args.out / 'compare.png'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
