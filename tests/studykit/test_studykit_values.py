"""studykit by value where sampled mutants survived their tests: the lr grid's extension stops max_steps
sqrt(2) steps above the starting grid as it does below, and a report's code digest follows relative imports
(one and two levels up) to every file a study runs, and only those."""

from __future__ import annotations

import math

from studykit import lrgrid
from studykit.provenance import closure


def test_the_extension_stops_max_steps_above_the_starting_grid():
    start = lrgrid.sqrt2_grid(0.5, 2.0)
    grown = list(start) + [lrgrid.point(2.0 * math.sqrt(2) ** k) for k in (1, 2)]
    assert lrgrid.extension(grown, [max(grown)], start, max_steps=2) == []
    assert lrgrid.extension(grown, [max(grown)], start, max_steps=3) == [lrgrid.point(2.0 * math.sqrt(2) ** 3)]


def test_the_digests_closure_follows_relative_imports_and_nothing_else(tmp_path):
    files = {"gdro_lab/__init__.py": "", "gdro_lab/top.py": "X = 1\n", "gdro_lab/unused.py": "",
             "gdro_lab/sub/__init__.py": "", "gdro_lab/sub/b.py": "import numpy\n",
             "gdro_lab/sub/a.py": "from ..top import X\nfrom . import b\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = [str(p.relative_to(tmp_path)) for p in closure(["gdro_lab.sub.a"], root=tmp_path)]
    assert found == ["gdro_lab/__init__.py", "gdro_lab/sub/__init__.py", "gdro_lab/sub/a.py", "gdro_lab/sub/b.py",
                     "gdro_lab/top.py"]


def test_provenance_keeps_a_summary_strict_json(tmp_path):
    """A summary.json holding NaN (json.loads reads it, other readers do not) is refused, not written back."""
    import json

    import pytest

    from studykit.provenance import add_provenance

    summary = tmp_path / "summary.json"
    summary.write_text('{"gain": 1.5}')
    add_provenance(summary, {"entry": ["simulators.cli"]})
    assert json.loads(summary.read_text()) == {"gain": 1.5, "provenance": {"entry": ["simulators.cli"]}}
    summary.write_text('{"gain": NaN}')
    with pytest.raises(ValueError):
        add_provenance(summary, {"entry": ["simulators.cli"]})


def test_the_committed_reports_are_every_summary_but_a_calibrations_predictions(tmp_path):
    from studykit.provenance import OTHER_RESULTS, committed_reports

    for name in ("reports/arena/summary.json", "reports/calibration/lm-world/predict/summary.json",
                 "reports/sweep/a/summary.json", OTHER_RESULTS[0]):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    found = [p.relative_to(tmp_path).as_posix() for p in committed_reports(tmp_path)]
    assert found == sorted(["reports/arena/summary.json", "reports/sweep/a/summary.json", OTHER_RESULTS[0]])


def test_the_check_lists_each_stale_report_in_its_line(monkeypatch, capsys):
    from pathlib import Path

    from studykit import provenance

    reports = [Path("reports/a/summary.json"), Path("reports/b/summary.json")]
    monkeypatch.setattr(provenance, "committed_reports", lambda: reports)
    monkeypatch.setattr(provenance, "freshness", lambda s: None if "b" in s.parts else "reports/a: the code changed")
    assert provenance.main(["check"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "reports/a: the code changed", "provenance: 2 reports checked, 1 stale without saying so"]
