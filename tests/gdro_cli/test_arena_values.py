"""gdro arena by value where sampled mutants survived its tests: every "(default N)" its help promises is
the parser's default, and an error of the simulator part is the one-line message, exit status 2."""

from __future__ import annotations

import re

import pytest

from gdro_cli import arena
from gdro_lab import ConfigError


def test_the_defaults_the_help_states_are_the_parsers():
    promised = {}
    for action in arena.build_parser()._actions:
        found = re.search(r"\(default (\S+?)[;)]", action.help or "")
        if found and action.default is not None:
            promised[action.dest] = (found.group(1), str(action.default))
    assert {"workers", "jobs"} <= set(promised)
    assert all(said == default for said, default in promised.values()), promised


@pytest.mark.parametrize("counts", [[], ["--workers", "1", "--jobs", "1", "--lm-seeds", "1"]])
def test_an_error_of_the_simulator_part_is_one_line(tmp_path, monkeypatch, capsys, counts):
    """(One worker, one job and one LM seed are valid counts: the run gets as far as the simulator part.)"""
    from simulators.studies import allocation_arena

    def fail(*args, **kwargs):
        raise ConfigError("world 'x' is invalid")

    monkeypatch.setattr(allocation_arena, "run", fail)
    assert arena.main(["--out", str(tmp_path / "arena"), "--sim-only", "--quick", *counts]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "gdro arena: error: world 'x' is invalid"


def test_the_committed_report_records_the_code_and_command_that_made_it(tmp_path, monkeypatch, capsys):
    """`gdro arena --update-reports` writes summary.json's provenance (the freshness test reads it): the digest
    of gdro_cli.arena's code as the run began and the command without one machine's flags."""
    import json

    from simulators import cli
    from simulators.studies import allocation_arena
    from studykit.provenance import code_digest

    def fake_run(settings, **kwargs):
        settings.out.mkdir(parents=True, exist_ok=True)
        (settings.out / "report.md").write_text("# arena\n")
        (settings.out / "summary.json").write_text(json.dumps({"study": "arena"}))
        (settings.out / "decision.txt").write_text("decision\n")
        return settings.out / "report.md"

    monkeypatch.setattr(allocation_arena, "run", fake_run)
    monkeypatch.setattr(cli, "repository_reports", lambda: tmp_path / "reports")
    words = ["--out", str(tmp_path / "arena"), "--sim-only", "--quick", "--workers", "1", "--jobs", "1",
             "--update-reports"]
    assert arena.main(words) == 0
    made = json.loads((tmp_path / "reports" / "arena" / "summary.json").read_text())["provenance"]
    assert made["entry"] == ["gdro_cli.arena"]
    assert made["code_digest"] == code_digest(["gdro_cli.arena"])["code_digest"]
    assert made["command"] == "gdro arena --sim-only --quick --update-reports"
    assert made["settings"]["quick"] is True and "out" not in made["settings"] and "jobs" not in made["settings"]
