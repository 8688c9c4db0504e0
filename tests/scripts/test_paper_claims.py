"""scripts/paper_claims.py: a claim's table lists the studies that judge it; those that leave it untested
are one line under the table, grouped by their reason, not a row each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scriptload import load_script

pc = load_script("paper_claims")


def claim(verdict: str, number: str) -> dict[str, str]:
    return {"key": "k", "claim": "a claim", "paper": "+1%", "verdict": verdict, "number": number}


@pytest.fixture
def fake_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    studies = {"a": claim("direction only, agrees", "+0.3"), "b": claim("untested", "study a measures it"),
               "c": claim("untested", "study a measures it"), "d": claim("untested", "a theorem")}
    for folder, entry in studies.items():
        (tmp_path / "reports" / folder).mkdir(parents=True)
        (tmp_path / "reports" / folder / "summary.json").write_text(json.dumps({"claims": [entry]}))
    monkeypatch.setattr(pc, "ROOT", tmp_path)
    monkeypatch.setattr(pc, "STUDIES", tuple((f, f"study {f}", f"cmd {f}") for f in studies))
    return tmp_path


def test_untested_studies_are_one_line_grouped_by_reason(fake_reports: Path) -> None:
    section = pc.render().split("### a claim", 1)[1].strip().splitlines()
    rows = [line for line in section if line.startswith("| ") and "verdict" not in line]
    assert rows == ["| a | **direction only, agrees** | +0.3 |"]
    assert section[-1] == "Not measured by b, c (study a measures it); d (a theorem)."


def test_a_claim_no_study_measures_has_no_table(fake_reports: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pc, "STUDIES", tuple(s for s in pc.STUDIES if s[0] != "a"))
    section = pc.render().split("### a claim", 1)[1]
    assert "| report | verdict |" not in section and "No study here measures it." in section
