"""The calibration's numbers in README.md and docs/calibration.md are the generated reports' own tables."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports" / "calibration"


def test_lm_study_table_is_the_generated_one() -> None:
    table = (REPORTS / "lm-study" / "table.md").read_text().strip()
    assert table in (ROOT / "README.md").read_text()
    assert table in (ROOT / "docs" / "calibration.md").read_text()
    assert table in (REPORTS / "lm-study" / "report.md").read_text()


def test_recovery_table_is_the_generated_one() -> None:
    table = (REPORTS / "recovery" / "coverage.md").read_text().strip()
    assert table in (ROOT / "docs" / "calibration.md").read_text()
