"""Every paragraph of the docs opens as many inline code spans as it closes.

An odd backtick flips code and prose for the rest of its paragraph (Markdown pairs them greedily), and
`mkdocs build --strict` does not see it: the page renders, wrong. Fenced blocks are skipped; a span
opened by N backticks is closed only by a run of exactly N (CommonMark), so ```x``` and ``a ` b`` are
one span each and `loss.py`` is never closed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _open_at_end(paragraph: str) -> bool:
    """True if a code span is still open at the end of ``paragraph``."""
    opened = 0
    for run in re.findall(r"`+", paragraph):
        if not opened:
            opened = len(run)
        elif len(run) == opened:
            opened = 0
    return bool(opened)


def unbalanced(text: str, page: str) -> list[str]:
    """``page:line`` of every paragraph (outside fenced blocks) with an odd number of code delimiters."""
    found, paragraph, start, fence = [], [], 1, None
    for number, line in enumerate([*text.split("\n"), ""], start=1):
        opener = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and opener:
            fence = opener.group(1)
            continue
        if fence is not None:
            fence = None if line.strip().startswith(fence) else fence
            continue
        if line.strip():
            paragraph.append(line) if paragraph else (paragraph.append(line), start := number)
            continue
        if _open_at_end("\n".join(paragraph)):
            found.append(f"{page}:{start}: {paragraph[0].strip()[:70]}")
        paragraph = []
    return found


def test_every_paragraph_of_the_docs_closes_its_code_spans() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [hit for page in pages for hit in unbalanced(page.read_text(encoding="utf-8"),
                                                         str(page.relative_to(ROOT)))]
    assert not found, "a paragraph with an unclosed code span (an odd backtick):\n" + "\n".join(found)


def test_the_check_sees_an_odd_backtick_and_not_a_fenced_one() -> None:
    text = "Fine `code` here.\n\n```text\na ` b\n```\n\n``a ` b`` ok, `x`\n"
    assert unbalanced(text, "p.md") == []  # ``a ` b`` is one span: `` opens, `` closes (the lone ` inside)
    text = "Fine `code` here.\n\nuniform in `0, 1) (a hash)\nand more.\n\nThe loss ([`loss.py``, pure)\n"
    assert unbalanced(text, "p.md") == ["p.md:3: uniform in `0, 1) (a hash)", "p.md:6: The loss ([`loss.py``, pure)"]
