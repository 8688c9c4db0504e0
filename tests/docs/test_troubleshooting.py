"""Every error line docs/troubleshooting.md quotes is one the code prints."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
PLACEHOLDERS = {"NAME", "MODULE", "PATH", "EXTRA"}


def quoted_lines(text: str) -> list[str]:
    """The first cell of each table row (the line the user sees), without its backticks."""
    rows = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines()
            if line.startswith("| `") and " | " in line]
    return [row.strip("`").strip() for row in rows]


def printed(line: str, table: str, sources: str) -> bool:
    """In the bad-inputs table (written by a test that runs each case), or, with placeholders, matching a
    message template of the code (each literal piece between placeholders appears in the sources)."""
    if line in table or any(answer.fullmatch(line) for answer in _answers(table)):
        return True
    pieces = [p for p in re.split("|".join(sorted(PLACEHOLDERS)), line) if p.strip()]
    return bool(pieces) and any(p != line for p in pieces) and all(_in_source(p, sources) for p in pieces)


def _answers(table: str) -> list[re.Pattern[str]]:
    """The table's answer cells (last column) as patterns: the table shortens long lists to '...'."""
    cells = [row.rstrip(" |").rsplit(" | ", 1)[-1] for row in table.splitlines() if row.startswith("| ")]
    return [re.compile(".*".join(re.escape(part) for part in cell.split("..."))) for cell in cells]


def _in_source(piece: str, sources: str) -> bool:
    """A literal piece of a message appears in the code, allowing f-string fields and split literals."""
    words = [re.escape(w) for w in piece.split()]
    return re.search(r"""[\s"'{}a-z_.!()\[\]f]*""".join(words), sources) is not None


def test_every_quoted_line_is_printed_by_the_code():
    testing = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    table = testing[testing.index("<!-- bad-inputs table: begin -->"):testing.index("<!-- bad-inputs table: end -->")]
    sources = "\n".join(p.read_text(encoding="utf-8") for pkg in ("gdro_cli", "real_runs", "simulators", "apps")
                        for p in (ROOT / pkg).rglob("*.py"))
    lines = quoted_lines(PAGE.read_text(encoding="utf-8"))
    assert len(lines) >= 30
    assert [line for line in lines if not printed(line, table, sources)] == []


def test_a_made_up_line_is_refused():
    assert not printed("gdro train: the moon is full: wait a month", "| x |", "print('hello')")
    assert printed("gdro eval: choose from a, b, c", "| bad | `cmd` | 2 | gdro eval: choose from a, ... |", "")
    assert not printed("gdro eval: choose from z", "| bad | `cmd` | 2 | gdro eval: choose from a, ... |", "")
    assert printed("gdro NAME: missing dependency (MODULE): install",
                   "", 'print(f"gdro {name}: missing dependency ({err.name}): install")')
