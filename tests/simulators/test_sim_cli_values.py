"""`gdro simulate`'s output folder by value: without --out a study writes to gdro-runs/<its report name>
(the study, -full, -<preset>), where `gdro report` and the app look; --out wins. A sampled mutant of that
default survived the tests that reach simulators/cli.py."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from simulators import cli


@pytest.mark.parametrize("argv, folder", [(["arena"], "arena"), (["arena", "--full"], "arena-full"),
                                          (["sqrt-law", "--preset", "paper-4b"], "sqrt-law-paper-4b"),
                                          (["arena", "--out", "elsewhere"], "elsewhere")])
def test_a_study_without_out_writes_under_gdro_runs_by_its_report_name(argv, folder):
    args = cli.build_parser().parse_args(argv)
    settings = cli._settings(args, importlib.import_module(f"simulators.studies.{cli.MODULES[args.study]}"))
    assert Path(settings.out) == (Path(folder) if "--out" in argv else Path("gdro-runs") / folder)
