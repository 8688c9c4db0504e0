"""The repository names no path of one machine, and its docs cite no issue numbers or commit hashes.

A reader has none of the author's folders: every tracked text file is searched for absolute paths
under a home or work folder (``/work/...``, ``/root/...``, ``/home/<user>/...``, ``/Users/<user>/...``),
an absolute virtualenv's python, and, in Markdown, scratch folders under ``/tmp`` (a page that needs
a temporary folder says ``$(mktemp -d)`` or a relative ``runs/...``). The pages of ``docs/`` (all but
the changelog, which is history) also cite no issue numbers (``issue 23``, ``#23``) and no commit
hashes: a reader cannot open them, and the page must say what it means instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".woff", ".woff2", ".ttf", ".gz", ".zip",
                   ".parquet", ".arrow", ".pt", ".safetensors", ".npz", ".npy"}

# Absolute folders of one machine; the lookbehind skips URLs (``https://host/home/x``) and relative
# paths (``../work/x``).
MACHINE_PATH = re.compile(
    r"(?<![\w.~/-])(?:/work/[\w.-]+|/root/[\w.-]+|/home/[\w.-]+/|/Users/[\w.-]+/|/mnt/[\w.-]+/"
    r"|/(?!path/to/)(?:[\w.-]+/)+\.?venv[\w.-]*/bin/python)"
)
# A scratch folder under /tmp written into a page as if the reader had it.
TMP_PATH = re.compile(r"(?<![\w.~/$}-])/tmp/[\w.-]+")
ISSUE_REF = re.compile(r"\b(?:issues?|PR|pull request)\s+#?\d+|(?<![\w&#/(\[])#\d+(?![\w-])", re.IGNORECASE)
# 7-40 lowercase hex characters with at least one letter and one digit, standing alone.
COMMIT_HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / name for name in out.decode().split("\0") if name]


def text_of(path: Path) -> str | None:
    if path.suffix.lower() in BINARY_SUFFIXES or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def hits(paths: list[Path], patterns: list[re.Pattern[str]]) -> list[str]:
    """``file:line: match`` for every match of any pattern."""
    found = []
    for path in paths:
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for pattern in patterns:
                found += [f"{path.relative_to(ROOT)}:{number}: {m.group(0)}" for m in pattern.finditer(line)]
    return found


def path_patterns(path: Path) -> list[re.Pattern[str]]:
    return [MACHINE_PATH, TMP_PATH] if path.suffix == ".md" else [MACHINE_PATH]


def machine_path_hits(paths: list[Path]) -> list[str]:
    return [h for p in paths for h in hits([p], path_patterns(p))]


@pytest.mark.parametrize("text", [
    "PYTHONPATH=. /work/venvs/base/bin/python benchmarks/bench_app.py",
    "GDRO_DATA=/work/shared/data bash scripts/mutation.sh",
    "see /home/alice/runs/x", "cd /root/gdro", "open /Users/bob/Desktop/x",
    "PYTHON=/opt/gdro/.venv/bin/python bash scripts/mutation.sh",
    "(`--out /work/runs/lm-study`)",
])
def test_machine_paths_are_found(text: str) -> None:
    assert MACHINE_PATH.search(text), text


@pytest.mark.parametrize("text", [
    ".venv/bin/python benchmarks/bench_app.py", "../shared/data", "https://example.org/home/alice/x",
    "~/work/gdro", "runs/lm-study", "PYTHON=/path/to/venv/bin/python", "$TMPDIR/x",
    "a folder like `$(mktemp -d)`", "the /work folder",
])
def test_relative_and_generic_paths_are_not_flagged(text: str) -> None:
    assert not MACHINE_PATH.search(text), text
    assert not TMP_PATH.search(text), text


def test_tmp_scratch_folders_are_found_and_a_default_of_tmpdir_is_not() -> None:
    assert TMP_PATH.search("gdro eval --out /tmp/ev_aime")
    assert not TMP_PATH.search('work="${TMPDIR:-/tmp}/gdro-mutation"')


@pytest.mark.parametrize("text", ["(issue 23)", "issues 7 and 8", "fixed in #23.", "Issue #19 point 1", "PR 4"])
def test_issue_references_are_found(text: str) -> None:
    assert ISSUE_REF.search(text), text


@pytest.mark.parametrize("text", ["[speed](benchmarks.md#4-speed)", "[x](#1)", "&#8212;", "colour #1f77b4",
                                  "a headline\n# Title", "C# code"])
def test_anchors_and_entities_are_not_issue_references(text: str) -> None:
    assert not ISSUE_REF.search(text), text


@pytest.mark.parametrize("text", ["against 1b2c5da", "main at a32dac7, then", "(commit 0b1e520)",
                                  "9713cf4's reports", "8f14e45fceea167a5a36dedd4bea2543"])
def test_commit_hashes_are_found(text: str) -> None:
    assert COMMIT_HASH.search(text), text


@pytest.mark.parametrize("text", ["seed*1000004+step", "14116 prompt ids", "deadbeef", "sha256",
                                  "x_ppo_update__mutmut_12", "0x7fffffff", "2026-12-01", "1e-12"])
def test_numbers_and_words_are_not_commit_hashes(text: str) -> None:
    assert not COMMIT_HASH.search(text), text


def test_no_machine_specific_path_in_any_tracked_file() -> None:
    this = Path(__file__).resolve()  # its own examples above are the only allowed ones
    found = machine_path_hits([p for p in tracked_files() if p.resolve() != this])
    assert not found, "paths of one machine (use repo-relative paths, $(mktemp -d) or runs/...):\n" + "\n".join(found)


def test_docs_cite_no_issue_numbers_or_commit_hashes() -> None:
    pages = [p for p in tracked_files() if p.parent == ROOT / "docs" and p.suffix == ".md"
             and p.name != "changelog.md"]
    assert pages, "no docs/*.md tracked"
    found = hits(pages, [ISSUE_REF, COMMIT_HASH])
    assert not found, "say what changed instead of citing an issue or a commit:\n" + "\n".join(found)


def test_every_relative_link_of_the_readme_and_the_reports_resolves() -> None:
    """mkdocs build --strict checks the links of docs/; this checks the README (outside the site) and the
    reports the site shows, whose links are relative to their own folder."""
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    broken = []
    pages = [ROOT / "README.md", *sorted((ROOT / "reports").rglob("*.md"))]
    for page in pages:
        for target in link.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


#: A path of this repository written in code or prose: a tracked folder, then a file with a suffix.
REPO_PATH = re.compile(r"(?<![\w./~$-])((?:gdro_lab|studykit|simulators|real_runs|apps|gdro_cli|tests|scripts|"
                       r"benchmarks|docs|constraints|reports|\.ci)/[\w./-]*\.(?:py|md|sh|toml|txt|json|in|yml))\b")


#: A placeholder, not a file: ``gpu-ENV.txt``, ``tests/pkg/sub/test_mod.py``, ``tests/...py``, ``tests/a.py``.
PLACEHOLDER = re.compile(r"[A-Z]{3}|/pkg/|\.\.\.|/[a-z]\.py$")


def stale_paths(files: list[Path], root: Path) -> list[str]:
    """'file:line: path' for every repository path cited in ``files`` that does not exist under ``root``."""
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for cited in REPO_PATH.findall(line):
                if not PLACEHOLDER.search(cited) and not (root / cited).exists():
                    found.append(f"{path.relative_to(root)}:{number}: {cited}")
    return found


def test_every_repository_path_cited_in_code_and_docs_exists() -> None:
    """A moved or renamed file leaves no stale citation behind (the changelog is history and keeps them;
    the tests plant paths of their own)."""
    files = [p for p in tracked_files() if p.suffix in {".py", ".md", ".sh", ".toml", ".yml", ".txt", ".in"}
             and p.name != "changelog.md" and p.relative_to(ROOT).parts[0] != "tests" or p == ROOT / "tests" / "README.md"]
    found = stale_paths(files, ROOT)
    assert not found, "cited paths that do not exist:\n" + "\n".join(found)


def test_the_path_check_sees_a_stale_citation(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("see docs/here.md and docs/gone.md, not https://x/docs/a.md "
                                               "nor constraints/gpu-ENV.txt\n")
    assert stale_paths([tmp_path / "docs" / "here.md"], tmp_path) == ["docs/here.md:1: docs/gone.md"]
