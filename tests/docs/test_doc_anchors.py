"""Every ``docs/<page>.md#anchor`` pointer written in code or docs lands on a heading of that page.

Docstrings send a reader to the design notes beside each module's page (``docs/train-notes.md#real_runs-loss``);
mkdocs checks the links between pages of the site, but nothing checks a pointer written as plain text in a
docstring, a comment or the README, so a renamed heading or a moved section would leave it dangling.

A page's anchors are computed the way the site computes them: Python-Markdown's ``toc`` extension with the
site's ``attr_list`` (an explicit ``{#id}`` wins, otherwise the slug of the heading's text: lowercase,
punctuation dropped, spaces to ``-``, a repeated slug numbered ``_1``, ``_2``), headings inside fenced code
blocks ignored. The changelog is history and keeps its old pointers.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import markdown
import pytest

from tests.docs.test_docs_hygiene import ROOT, text_of, tracked_files

#: ``docs/<page>.md#<anchor>`` as it is written in a docstring, a comment or a page.
POINTER = re.compile(r"(?<![\w./-])docs/([\w-]+\.md)#([\w-]+)")


def anchors_of_text(text: str) -> set[str]:
    """The heading anchors mkdocs gives a page with this Markdown."""
    md = markdown.Markdown(extensions=["toc", "attr_list", "tables", "admonition", "pymdownx.superfences"])
    md.convert(text)

    def walk(tokens: list[dict]) -> set[str]:
        return {t["id"] for t in tokens} | {a for t in tokens for a in walk(t["children"])}

    explicit = set(re.findall(r"""\bid=["']([\w-]+)["']""", text))  # <a id="..."> anchors written by hand
    return walk(md.toc_tokens) | explicit


@cache
def anchors_of_page(page: Path) -> frozenset[str]:
    return frozenset(anchors_of_text(page.read_text(encoding="utf-8")))


def dangling_pointers(files: list[Path], root: Path) -> list[str]:
    """``file:line: docs/page.md#anchor`` for every pointer whose page lacks the anchor (or is missing)."""
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for page, anchor in POINTER.findall(line):
                target = root / "docs" / page
                if not target.is_file() or anchor not in anchors_of_page(target):
                    found.append(f"{path.relative_to(root)}:{number}: docs/{page}#{anchor}")
    return found


def test_the_slug_rule_is_the_sites() -> None:
    text = ("# Design notes: the app\n\n## `gdro train`'s keys, in order\n\n### `real_runs.loss` {#real_runs-loss}\n\n"
            "## Design notes\n\n## Design notes\n\n```text\n# not a heading\n```\n")
    assert anchors_of_text(text) == {"design-notes-the-app", "gdro-trains-keys-in-order", "real_runs-loss",
                                     "design-notes", "design-notes_1"}


def test_every_docs_pointer_resolves_to_a_heading() -> None:
    this = Path(__file__).resolve()
    files = [p for p in tracked_files() if p.resolve() != this and p.name != "changelog.md"
             and p.relative_to(ROOT).parts[0] != "reports"]
    found = dangling_pointers(files, ROOT)
    assert not found, ("pointers to a heading that does not exist (rename the pointer, or the heading's "
                       "{#id}):\n" + "\n".join(found))


@pytest.mark.parametrize(("line", "dangling"), [
    ("Why: docs/notes.md#mod-a.", False),
    ("Why: docs/notes.md#mod-b.", True),           # no such heading
    ("Why: docs/gone.md#mod-a.", True),            # no such page
    ("Why: docs/notes.md#why-moda-is-so.", False),   # the dot dropped from the slug
])
def test_the_check_sees_a_dangling_pointer(tmp_path: Path, line: str, dangling: bool) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\n## `mod.a` {#mod-a}\n\n## Why mod.a is so\n")
    (tmp_path / "code.py").write_text(f'"""{line}"""\n')
    assert bool(dangling_pointers([tmp_path / "code.py"], tmp_path)) is dangling
