"""The calibration's numbers in docs/calibrate-predict.md and docs/calibration.md are the generated reports' own tables
(written there by `--update-docs` of simulators.calibrate.recovery / simulators.calibrate.lmcompare)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdro_lab import ConfigError
from simulators.calibrate.calibration_report import update_between

ROOT = Path(__file__).resolve().parents[3]
REPORTS = ROOT / "reports" / "calibration"
PENDING = "not generated yet"


def between(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split(f"<!-- calibration:{name} -->")[1].split(f"<!-- /calibration:{name} -->")[0].strip()


def test_lm_study_table_is_the_generated_one() -> None:
    """Before the LM study's comparison has run, both places say so; after, they hold its table."""
    docs = [ROOT / "docs" / "calibrate-predict.md", ROOT / "docs" / "calibration.md"]
    generated = REPORTS / "lm-study" / "table.md"
    if not generated.is_file():
        assert all(PENDING in between(doc, "lm-study") for doc in docs)
        return
    table = generated.read_text().strip()
    assert all(between(doc, "lm-study") == table for doc in docs)
    assert table in (REPORTS / "lm-study" / "report.md").read_text()


def test_recovery_table_is_the_generated_one() -> None:
    table = (REPORTS / "recovery" / "coverage.md").read_text().strip()
    assert between(ROOT / "docs" / "calibration.md", "recovery") == table


def test_gain_recovery_table_is_the_generated_one() -> None:
    generated = REPORTS / "gain-recovery" / "table.md"
    docs = between(ROOT / "docs" / "calibration.md", "gain-recovery")
    assert docs == generated.read_text().strip() if generated.is_file() else PENDING in docs


@pytest.mark.parametrize("name, generated", [("plan-loop", "plan-loop/table.md"),
                                                  ("plan-loop-320", "plan-loop-320/table.md")])
def test_plan_loop_tables_are_the_generated_ones(name: str, generated: str) -> None:
    """docs/calibration.md's plan loop tables are their reports' own."""
    docs = between(ROOT / "docs" / "calibration.md", name)
    path = REPORTS / generated
    assert docs == path.read_text().strip() if path.is_file() else PENDING in docs


def test_per_fit_errors_table_is_the_generated_one() -> None:
    """docs/calibration.md's table of the bootstrap's error interval beside the others is its report's own, once
    the command beside it has written reports/calibration/per-fit-errors."""
    path = REPORTS / "per-fit-errors" / "per-fit.md"
    assert between(ROOT / "docs" / "calibration.md", "per-fit-errors") == path.read_text().strip()


def test_update_between_replaces_only_the_marked_text(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("a\n<!-- calibration:x -->\nold\n<!-- /calibration:x -->\nb\n")
    update_between(doc, "x", "new\n")
    assert doc.read_text() == "a\n<!-- calibration:x -->\nnew\n<!-- /calibration:x -->\nb\n"
    with pytest.raises(ConfigError, match="calibration:y"):
        update_between(doc, "y", "t")
