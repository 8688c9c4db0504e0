"""Which code made a report: the digest of the source files a study depends on.

A committed report (``reports/<name>/summary.json``) carries a ``provenance`` block::

    {"entry": ["simulators.studies.curriculum_study"], "code_digest": "<sha256>", "files": 57,
     "command": "gdro simulate --update-reports", "settings": {...}}

``code_digest`` is the sha256 over the sorted (path, sha256 of the file's bytes) pairs of every
source file the entry modules import, followed transitively through the project's own packages
(``gdro_lab``, ``simulators``, ``studykit``, ``real_runs``, ``apps``, ``gdro_cli``). The imports are
read from the source (``ast``), not from ``sys.modules``, so an import inside a function counts and
the digest does not depend on what else the process imported. A change to any such file changes the
digest: tests/studykit/test_report_freshness.py fails until the report is regenerated, or until the
report states that it is stale (``provenance.stale``: which commit made it and the digest of that
commit's code) with a line in its report.md.

    python -m studykit.provenance digest simulators.studies.curriculum_study   # the current digest
    python -m studykit.provenance check                                 # every committed report
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gdro_lab", "simulators", "studykit", "real_runs", "apps", "gdro_cli")
STALE_LINE = "**Stale report**"  # the line a stale report's report.md opens its stale note with


def module_file(module: str, root: Path = ROOT) -> Path | None:
    """The source file of a project module (``a.b`` -> ``a/b.py`` or ``a/b/__init__.py``), else None.

    This module is left out: it measures the code and cannot change a result."""
    if module.split(".")[0] not in PACKAGES or module == __name__ or module == "studykit.provenance":
        return None
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported(path: Path, module: str) -> Iterable[str]:
    """Every module name an ``import`` statement of ``path`` may name (``from a import b``: a and a.b)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def closure(entries: Sequence[str], root: Path = ROOT) -> list[Path]:
    """The source files of ``entries`` and of every project module they import, transitively (sorted).

    A module's parent packages count too (``a.b`` runs ``a/__init__.py`` first)."""
    seen: dict[str, Path] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            path = module_file(prefix, root)
            if prefix in seen or path is None:
                continue
            seen[prefix] = path
            todo.extend(_imported(path, prefix))
    missing = [e for e in entries if e not in seen]
    if missing:
        raise ValueError(f"entry module {missing[0]!r} is not a source file under {root}: name a project module")
    return sorted(set(seen.values()))


def code_digest(entries: Sequence[str], root: Path = ROOT) -> dict[str, Any]:
    """``{"entry", "code_digest", "files"}`` of the entry modules' import closure under ``root``."""
    files = closure(entries, root)
    outer = hashlib.sha256()
    for path in files:
        outer.update(path.relative_to(root).as_posix().encode() + b"\0")
        outer.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return {"entry": list(entries), "code_digest": outer.hexdigest(), "files": len(files)}


def provenance(entries: Sequence[str], command: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The block a study writes into its summary.json: the digest, the command and the settings."""
    return {**code_digest(entries), "command": command, "settings": settings}


def add_provenance(summary: Path, block: dict[str, Any]) -> None:
    """Put ``block`` into the summary.json at ``summary`` as its ``provenance`` (nothing else changes)."""
    data = json.loads(summary.read_text(encoding="utf-8"))
    data["provenance"] = block
    summary.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def freshness(summary: Path, root: Path = ROOT) -> str | None:
    """None when the report at ``summary`` is current or says it is stale; else what is wrong (one line).

    Current: its recorded digest equals the digest of its entry modules now. Stale and said so:
    ``provenance.stale`` names the commit that made it and its report.md holds the stale note."""
    name = summary.parent.relative_to(root).as_posix() if summary.is_relative_to(root) else str(summary.parent)
    block = json.loads(summary.read_text(encoding="utf-8")).get("provenance")
    if not isinstance(block, dict) or not block.get("entry") or not block.get("code_digest"):
        return f"{name}: summary.json records no provenance (entry, code_digest): regenerate the report"
    try:
        current = code_digest(block["entry"], root)["code_digest"]
        changed = "the code it depends on changed since it was made"
    except ValueError:  # an entry module was renamed or removed since: the report's code is gone
        current = None
        gone = [e for e in block["entry"] if module_file(e, root) is None]
        changed = f"its entry module {', '.join(gone) or block['entry'][0]} no longer exists (renamed or removed)"
    if current == block["code_digest"]:
        return None
    stale = block.get("stale")
    if not isinstance(stale, dict) or not stale.get("commit") or not stale.get("reason"):
        return (f"{name}: {changed}: regenerate it with "
                f"`{block.get('command', '?')}` (or mark it stale: python -m studykit.provenance stale)")
    report = summary.parent / "report.md"
    if report.is_file() and STALE_LINE not in report.read_text(encoding="utf-8"):
        return f"{name}: provenance says stale but report.md has no '{STALE_LINE}' note"
    return None


# the results file of the committed reports that write no summary.json
OTHER_RESULTS = ("reports/calibration/recovery/coverage.json", "reports/calibration/lm-world/fit.json",
                 "reports/calibration/lm-study/comparison.json")


def committed_reports(root: Path = ROOT) -> list[Path]:
    """The results file of every committed report: each summary.json under reports/ (a prediction inside
    a calibration folder belongs to that folder's fit.json) and the files of OTHER_RESULTS."""
    found = [p for p in (root / "reports").rglob("summary.json") if "predict" not in p.parts]
    return sorted(found + [root / p for p in OTHER_RESULTS if (root / p).is_file()])


def digest_at_commit(commit: str, entries: Sequence[str], root: Path = ROOT) -> dict[str, Any]:
    """code_digest of ``entries`` as the code stood at ``commit`` (read with git archive into a temporary
    folder; the checkout is not touched)."""
    import subprocess
    import tarfile
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "code.tar"
        listed = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", commit],
                                check=True, capture_output=True, text=True).stdout.split()
        subprocess.run(["git", "-C", str(root), "archive", "-o", str(archive), commit,
                        *[p for p in PACKAGES if p in listed]], check=True, capture_output=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        return code_digest(entries, Path(tmp))


def mark_stale(results: Path, entries: Sequence[str], command: str, commit: str, reason: str,
               root: Path = ROOT) -> dict[str, Any]:
    """Record in ``results`` that the report was made by the code of ``commit`` (its digest), and put the
    stale note under report.md's title. Used for a report too slow to regenerate at once."""
    before = json.loads(results.read_text(encoding="utf-8")).get("provenance", {})
    block = {**digest_at_commit(commit, entries, root), "command": command,
             **({"settings": before["settings"]} if "settings" in before else {}),
             "stale": {"commit": commit, "reason": reason}}
    add_provenance(results, block)
    report = results.parent / "report.md"
    if report.is_file():
        lines = report.read_text(encoding="utf-8").split("\n")
        note = (f"{STALE_LINE}: made by the code of commit {commit} or older (code digest of that commit "
                f"{block['code_digest'][:12]}); the code it depends on has changed since ({reason}). "
                f"Regenerate it with `{command}`.")
        old = [i for i, line in enumerate(lines) if line.startswith(STALE_LINE)]
        if old:
            lines[old[0]] = note
        else:
            at = 1 if lines and lines[0].startswith("# ") else 0
            lines[at:at] = ["", note] if at else [note, ""]
        report.write_text("\n".join(lines), encoding="utf-8")
    return block


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studykit.provenance", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    digest = sub.add_parser("digest", help="print the digest of the given entry modules")
    digest.add_argument("entries", nargs="+")
    sub.add_parser("check", help="exit 1 listing every committed report that is stale without saying so")
    stale = sub.add_parser("stale", help="mark a report as made by an older commit's code")
    stale.add_argument("results", type=Path, help="the report's summary.json (or its results file)")
    stale.add_argument("--entry", nargs="+", required=True, help="the study's entry modules")
    stale.add_argument("--command", required=True, help="the command that regenerates it")
    stale.add_argument("--commit", required=True, help="the commit whose code made it")
    stale.add_argument("--reason", required=True, help="what changed since, in a few words")
    args = parser.parse_args(argv)
    if args.what == "stale":
        block = mark_stale(args.results, args.entry, args.command, args.commit, args.reason)
        print(f"{args.results}: stale, made by {args.commit} (digest {block['code_digest'][:12]})")
        return 0
    if args.what == "digest":
        try:
            print(json.dumps(code_digest(args.entries), indent=1))
        except ValueError as err:
            print(f"provenance: {err}", file=sys.stderr)
            return 2
        return 0
    problems = [p for p in (freshness(s) for s in committed_reports()) if p]
    for line in problems:
        print(line)
    print(f"provenance: {len(committed_reports())} reports checked, {len(problems)} stale without saying so")
    return 1 if problems else 0


# For a tool that writes its own block (the calibration tools: simulators/calibrate).

def portable(argv: Sequence[str], root: Path = ROOT, drop: Sequence[str] = (),
             switches: Sequence[str] = ()) -> list[str]:
    """The arguments as a command anyone can rerun: an ``--out`` outside the checkout (a machine's temporary
    folder) is written ``OUT``, one inside it relative to the checkout's root; the flags in ``drop`` (one
    machine's: a scratch folder, a worker count; ``--out`` too where the report is copied elsewhere) are
    left out with their values, those in ``switches`` (flags without a value) alone. ``--flag value`` and
    ``--flag=value`` alike."""
    words: list[str] = []
    i = 0
    while i < len(argv):
        flag, equals, value = argv[i].partition("=")
        if flag in switches:
            i += 1
            continue
        if flag in drop or flag == "--out":
            if not equals:
                value = argv[i + 1] if i + 1 < len(argv) else ""
                i += 1
            i += 1
            if flag in drop:
                continue
            path = Path(value).resolve()
            text = path.relative_to(root).as_posix() if path.is_relative_to(root) else "OUT"
            words += [f"--out={text}"] if equals else ["--out", text]
            continue
        words.append(argv[i])
        i += 1
    return words


def settings_of(args: argparse.Namespace, drop: Sequence[str] = ("out",)) -> dict[str, Any]:
    """A block's settings: the parsed arguments but those in ``drop``, paths written as strings."""
    def plain(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return str(value) if isinstance(value, Path) else value
    return {name: plain(value) for name, value in sorted(vars(args).items()) if name not in drop}


def rows_provenance(block: dict[str, Any], earlier: Any,
                    rows: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    """The block of a report made of ``rows`` that runs of different code may have added (a folder that more
    seeds append to), and a one-line note when it is not ``block``, this run's. Each row records the digest of
    the code that made it (``code_digest``); a row without one was made before rows recorded it, by the code of
    the folder's earlier block ``earlier``. All rows made by this run's code: ``block``. Else the report keeps
    the older digest (with the earlier block's ``stale`` record, which still holds): it is stale to the freshness
    test until every row is remade. Rows whose code is unknown leave it with none (it records no provenance)."""
    before = earlier.get("code_digest") if isinstance(earlier, dict) else None
    made = {row.get("code_digest") or before for row in rows}
    if made <= {block["code_digest"]}:
        return block, None
    if None in made:
        return ({**block, "code_digest": None, "files": None},
                "rows made before the folder recorded its code are kept, so the report records no code digest: "
                "rerun it whole to record one")
    old = str(before) if before in made else min(str(d) for d in made - {block["code_digest"], None})
    kept = {**block, "code_digest": old, "files": None}
    if old == before:
        kept.update({"entry": earlier.get("entry", block["entry"]), "files": earlier.get("files")})
        if "stale" in earlier:
            kept["stale"] = earlier["stale"]
    return kept, (f"the code has changed since some of the rows kept were made (code digest {old[:12]}): the "
                  "report keeps that digest, so it counts as stale until those rows are remade")


if __name__ == "__main__":
    sys.exit(main())
