"""``gdro study``: the learning study (:mod:`real_runs.lmstudy.cli`), and the provenance of its report.

The study's report records the code that made its runs, as every committed report does
(:mod:`studykit.provenance`: the digest of the source files ``real_runs.lmstudy.cli`` imports):

- a study that trains takes the digest as it starts and keeps it in ``OUT/provenance.json`` (with the
  command and settings); its report's ``summary.json`` gets it when the report is written;
- ``--report-only`` reads ``OUT/provenance.json``: the report is stamped with the digest the runs were
  made with. When the code has changed since, it says so in one line (the freshness test,
  tests/studykit/test_report_freshness.py, then asks for the study to be rerun); a folder without the
  record (made before it existed) leaves the report unstamped, also said in one line.

The digest is taken at the start, not at the end, so a study whose code is edited while it runs is
stamped with the code that ran (and found stale, not current). A study that reuses runs finished in
OUT before it started keeps the record those runs were made with when its digest differs (or, with no
record, an unknown one): the report is then stale until the study is rerun in a new folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

#: The module whose import closure is the study's code.
ENTRY = ["real_runs.lmstudy.cli"]
#: In the study's --out folder: the digest and command its runs were made with.
RECORD = "provenance.json"


def command(words: Sequence[str]) -> str:
    """The command as typed, after ``gdro study``."""
    return " ".join(["gdro study", *words])


def stamp(summary: Path, made: dict[str, Any], report_words: Sequence[str] | None = None) -> str | None:
    """Put the runs' provenance ``made`` into the report's ``summary``; returns a one-line warning when
    the code changed since the runs were made (the report is stamped with the runs' digest all the same)."""
    from studykit.provenance import add_provenance, code_digest
    block = dict(made)
    if report_words is not None:
        block["command"] = f"{made['command']}, then {command(report_words)}"
    add_provenance(summary, block)
    if code_digest(ENTRY)["code_digest"] != made["code_digest"]:
        return (f"gdro study lm: note: the study's code has changed since its runs were made (digest "
                f"{(made['code_digest'] or 'unknown')[:12]}): the report says which code made them; rerun the study for a "
                "current one")
    return None


def reused(out: Path, at_start: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The record for a study that starts in ``out``: ``at_start`` unless runs finished before it started
    (which the study reuses) were made by other code, then the earlier record's digest (None when OUT has
    no record); with a one-line note for that case."""
    from real_runs.lmstudy.learning_study import finished
    runs = out / "runs"
    done = [p for p in sorted(runs.iterdir()) if finished(p)] if runs.is_dir() else []
    if not done:
        return at_start, None
    try:
        earlier = json.loads((out / RECORD).read_text(encoding="utf-8"))
        digest = earlier["code_digest"]
    except (OSError, ValueError, KeyError, TypeError):
        earlier, digest = {}, None
    if digest == at_start["code_digest"]:
        return at_start, None
    said = f"code with digest {digest[:12]}" if digest else "code it has no record of"
    return ({**at_start, "code_digest": digest, "reused_runs": len(done)},
            f"gdro study lm: note: {len(done)} runs finished in {out} before this start were made by {said}; "
            "the report keeps that (stale) record: rerun the study in a new --out for a current one")


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    from real_runs.lmstudy import cli
    args = cli.build_parser().parse_args(words)  # a wrong argument: argparse's one line, exit 2
    if args.calibration_data is not None:
        return cli.main(words)
    from gdro_lab._validate import ConfigError
    from studykit.provenance import code_digest, settings_of
    out, report = cli.folders(args)
    record = out / RECORD
    if not args.report_only:  # the record is written as the study starts: a stopped study keeps it
        try:
            cli.claim_folders({"--out": out, "--report": report})
        except ConfigError:
            return cli.main(words)  # which refuses the folder in its one line
        settings = settings_of(args, drop=("out", "report"))
        made, note = reused(out, {**code_digest(ENTRY), "command": command(words), "settings": settings})
        record.write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
        if note:
            print(note, file=sys.stderr)
    status = cli.main(words)
    summary = report / "summary.json"
    if status != 0 or not summary.is_file():  # a study with no finished seed writes no summary
        return status
    try:
        made = json.loads(record.read_text(encoding="utf-8"))
        made["code_digest"]
    except (OSError, ValueError, KeyError, TypeError):
        print(f"gdro study lm: note: {record} is missing or unreadable, so the report records no provenance "
              "(a study folder made before gdro-lab recorded one): rerun the study to record it", file=sys.stderr)
        return status
    warning = stamp(summary, made, report_words=words if args.report_only else None)
    if warning:
        print(warning, file=sys.stderr)
    return status
