"""The user pages say nothing about how the project was built or about one machine's load.

A reader has neither the people nor the machine that made the repository: "the lead", a helper's id,
"8 helpers share these 2 cores", a load average or "other jobs running" say nothing to them. Measured
figures state their conditions on the measurement pages (measurements, benchmarks), and the changelog
is history: those pages are exempt.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXEMPT = re.compile(r"docs/(changelog|(measurements|benchmarks)(-[\w-]+)?)\.md$")
BUILD_WORDS = re.compile(
    r"\bthe lead\b(?![-–\s]lag)|\(lead\b(?![-–\s]lag)|\bhelpers? (?:share\b|H\d)|\b\d+ helpers\b|\bH\d{2}[A-Z]{1,2}\b"
    r"|\bload average|\bother jobs\b|\bloaded (?:machine|core)|\bthis machine\b", re.IGNORECASE)


def build_words(text: str, page: str) -> list[str]:
    """``page:line: words`` for every phrase about how the project was built or one machine's load."""
    return [f"{page}:{number}: {match.group(0)!r}" for number, line in enumerate(text.split("\n"), start=1)
            for match in BUILD_WORDS.finditer(line)]


def test_no_user_page_talks_about_how_it_was_built() -> None:
    pages = [ROOT / "README.md", ROOT / "tests" / "README.md", ROOT / "constraints" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
    found = [hit for page in pages if page.is_file() and not EXEMPT.search(page.as_posix())
             for hit in build_words(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]
    assert not found, "words about how the project was built (say what the reader can use instead):\n" + \
        "\n".join(found)


def test_the_check_sees_build_words_and_not_the_lead_lag_gap() -> None:
    text = "8 helpers share these 2 cores\nthe lead does this\nthe lead-lag gap and the lead–lag gap\n" \
           "measured with other jobs running (load average 3.1)\nfigure helpers shared by the studies\n"
    assert build_words(text, "p.md") == ["p.md:1: '8 helpers'", "p.md:2: 'the lead'", "p.md:4: 'other jobs'",
                                         "p.md:4: 'load average'"]
