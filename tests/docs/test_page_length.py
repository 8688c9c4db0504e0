"""No page of the docs grows past what a reader takes in at one sitting: a page over LIMIT lines is split by
task (one page per thing a reader comes to do), its history moved to the changelog and its measured figures
to the measurements or benchmarks page.

One page is exempt by what it is: the changelog (history, newest first).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 450
EXEMPT = {"changelog.md"}


def long_pages(docs: Path, limit: int = LIMIT) -> list[str]:
    """``page: N lines`` for every Markdown page of ``docs`` (not its subfolders) over ``limit`` lines."""
    found = []
    for page in sorted(docs.glob("*.md")):
        lines = page.read_text(encoding="utf-8").count("\n")
        if page.name not in EXEMPT and lines > limit:
            found.append(f"{page.name}: {lines} lines")
    return found


def test_no_docs_page_is_over_the_limit() -> None:
    assert not long_pages(ROOT / "docs"), f"pages over {LIMIT} lines: split them by task\n" + "\n".join(
        long_pages(ROOT / "docs"))


def test_the_check_sees_a_long_page(tmp_path: Path) -> None:
    (tmp_path / "short.md").write_text("# Short\n" * 10)
    (tmp_path / "long.md").write_text("line\n" * (LIMIT + 1))
    (tmp_path / "changelog.md").write_text("line\n" * (LIMIT + 1))
    assert long_pages(tmp_path) == [f"long.md: {LIMIT + 1} lines"]
