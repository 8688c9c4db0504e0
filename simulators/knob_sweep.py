"""`gdro sweep`: a grid of simulator knobs x methods x seeds, with a report of paired gains over GRPO.

    gdro sweep --grid world.transfer=0,0.5,1 --grid prompt_gdro.eta=0.3,0.65 --methods grpo,prompt_gdro

Every cell of the grid (the cartesian product of the ``--grid`` values; keys as in ``--set``,
see simulators/knobs.py) runs every method at every seed, all at the default learning rate.
Within a cell the gains over GRPO are paired by seed (same world instance and batch order) with
95% t-intervals. The table goes to stdout and, with the figures-free report, to
``./gdro-runs/sweep/report.md`` and ``summary.json``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from gdro_lab import ConfigError, RunFormatError

METRICS = (("test/accuracy", "held-out acc"), ("test/worst_group_accuracy", "held-out worst-group"))


def parse_grid(items: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """``["world.transfer=0,0.5"]`` -> [("world.transfer", [0, 0.5])], keys checked like --set."""
    from simulators import knobs
    out = []
    for item in items:
        key, sep, text = item.partition("=")
        values = [knobs.parse_value(v.strip()) for v in text.split(",") if v.strip()]
        if not sep or not values:
            raise ConfigError(f"--grid {item!r}: write KEY=V1,V2,..., e.g. world.transfer=0,0.5,1")
        knobs.add({}, key.strip(), values[0], flag="--grid")
        out.append((key.strip(), values))
    if not out:
        raise ConfigError("give at least one --grid KEY=V1,V2,...")
    return out


def cells(grid: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    keys = [k for k, _ in grid]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in grid))]


def reproduce(args: argparse.Namespace) -> str:
    """The `gdro sweep` command that reruns this sweep (options that change results; not --out, --workers)."""
    defaults = _parser().parse_args([])
    parts = [f"--grid {g}" for g in args.grid]
    parts += [f"--plugin {m}" for m in args.plugin]
    if args.methods != defaults.methods:
        parts.append(f"--methods {args.methods}")
    if args.assignments:
        parts.append("--set " + " ".join(args.assignments))
    parts += [f"--{name} {getattr(args, name)}" for name in ("seeds", "steps", "prompts", "batch")
              if getattr(args, name) != getattr(defaults, name)]
    return "gdro sweep " + " ".join(parts)


def _parser() -> argparse.ArgumentParser:
    from simulators.cli import _Parser, _positive
    p = _Parser(prog="gdro sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="one knob and its values")
    p.add_argument("--methods", default="grpo,prompt_gdro,rollout_gdro", help="comma-separated methods")
    p.add_argument("--set", dest="assignments", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="fixed overrides for every cell")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE", help="import MODULE first")
    p.add_argument("--seeds", type=_positive, default=5)
    p.add_argument("--steps", type=_positive, default=400)
    p.add_argument("--prompts", type=_positive, default=4000)
    p.add_argument("--batch", type=_positive, default=128)
    p.add_argument("--workers", type=_positive, default=2)
    p.add_argument("--out", type=Path, default=Path("gdro-runs") / "sweep")
    p.add_argument("--update-reports", metavar="NAME",
                   help="also copy report.md and summary.json into the repository's reports/NAME "
                        "(e.g. sweep-curvature)")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None)
    return p


def run(args: argparse.Namespace) -> tuple[Path, str]:
    from gdro_lab.methods import METHODS, get_method
    from simulators import knobs
    from simulators.cli import _load_plugins
    from simulators.parallel import run_jobs
    from simulators.reporting import claim_output, prepare_output
    from simulators.simulator_methods import method_names
    from simulators.studies.common import StudySettings, final_eval, sim_config
    from studykit.stats import mean_ci
    from studykit.tables import fmt, markdown_table, write_json
    _load_plugins(args.plugin)
    grid = parse_grid(args.grid)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        get_method(m, method_names())
    if "grpo" not in methods:
        methods.insert(0, "grpo")
    fixed = knobs.parse_assignments(args.assignments)
    settings = StudySettings(out=args.out, seeds=args.seeds, steps=args.steps, prompts=args.prompts,
                             batch=args.batch, workers=args.workers, progress=args.progress, snapshot_seeds=0)
    settings.validate()
    combos = cells(grid)
    cell_overrides = []
    for cell in combos:
        overrides = {ns: dict(v) for ns, v in fixed.items()}
        for key, value in cell.items():
            knobs.add(overrides, key, value)
        knobs.validate(overrides)
        cell_overrides.append(overrides)
    claim_output(settings.out, command="gdro sweep")
    prepare_output(settings.out)
    print(f"gdro sweep: writing to {settings.out.resolve()}", file=sys.stderr, flush=True)  # the first line
    keys = [(c, m, s) for c in range(len(combos)) for m in methods for s in range(settings.seeds)]
    from dataclasses import replace
    jobs = [(sim_config(replace(settings, overrides=cell_overrides[c]), m, s),
             settings.out / "runs" / f"cell{c}" / m / f"seed{s}") for c, m, s in keys]
    start = time.perf_counter()
    results = run_jobs(jobs, workers=settings.workers, progress=settings.progress, description="sweep")
    wall = time.perf_counter() - start
    runs: dict[tuple[int, str], list[Any]] = {}
    for (c, m, _), summary in zip(keys, results):
        runs.setdefault((c, m), []).append(summary)
    rows, summary_cells = [], []
    for c, cell in enumerate(combos):
        entry: dict[str, Any] = {"cell": cell, "methods": {}}
        for m in methods:
            stats = {}
            for metric, _ in METRICS:
                value = list(map(float, mean_ci(final_eval(runs[(c, m)], metric))))
                gain = list(map(float, mean_ci(final_eval(runs[(c, m)], metric) - final_eval(runs[(c, "grpo")], metric))))
                stats[metric] = {"value": value, "gain_vs_grpo": gain}
            entry["methods"][m] = stats
            rows.append([", ".join(f"{k}={v}" for k, v in cell.items()), METHODS[m].label]
                        + [fmt(*stats[k]["value"], 1, 100) for k, _ in METRICS]
                        + ["—" if m == "grpo" else fmt(*stats[k]["gain_vs_grpo"], 1, 100) for k, _ in METRICS])
        summary_cells.append(entry)
    header = ["cell", "method"] + [f"{label} (%)" for _, label in METRICS] + [f"Δ {label} vs GRPO (pp)"
                                                                            for _, label in METRICS]
    table = markdown_table(header, rows)
    write_json(settings.out / "summary.json", {"study": "sweep", "wall_s": wall, "grid": grid, "fixed": fixed,
                                               "seeds": settings.seeds, "cells": summary_cells})
    text = [f"# gdro sweep: {len(combos)} cells × {len(methods)} methods × {settings.seeds} seeds", "",
            f"{settings.steps} steps, {settings.batch} prompts per step, {settings.prompts:,} prompts; every method "
            f"at the default learning rate; gains paired by seed with 95% t-intervals, on the held-out test split "
            f"(latent groups the val split does not hold: `world.heldout_split`). Wall time {wall:.0f} s.", "",
            table, "",
            "Paper claims: **none tested** here (a knob sweep at one learning rate, no tuned or step-matched "
            "baseline); `gdro simulate` prints every claim's verdict, untested ones included.", "",
            f"Reproduce: `{reproduce(args)}`", ""]
    path = settings.out / "report.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path, table


def main(argv: list[str] | None = None) -> int:
    """Entry point of `gdro sweep`; 0 ok, 2 bad arguments."""
    import json

    from simulators.cli import _Exit, checked_report_name, portable_words, update_reports
    from studykit.provenance import add_provenance, provenance
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(words)
        if args.update_reports is not None:
            checked_report_name(args.update_reports, "gdro sweep")
        settings = {k: v for k, v in vars(args).items() if k not in ("out", "workers", "progress", "update_reports")}
        made_by = provenance(["simulators.knob_sweep", "simulators.cli"], " ".join(["gdro sweep", *portable_words(words)]),
                             json.loads(json.dumps(settings, default=str)))  # the code as the sweep began
        path, table = run(args)
        add_provenance(path.parent / "summary.json", made_by)
        copied = update_reports(path.parent, args.update_reports) if args.update_reports else None
    except _Exit as done:
        return done.status
    except (ConfigError, RunFormatError) as err:
        print(f"gdro sweep: error: {err}", file=sys.stderr)
        return 2
    print(table)
    print(f"report: {path.resolve()}")
    if copied:
        print(f"updated: {copied.resolve()}")
    return 0
