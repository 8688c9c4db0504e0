"""Fill docs/paper.md's claim tables from the committed reports' summary.json files.

Every study that judges the paper's claims writes them into its ``summary.json`` (``claims``: one
entry per claim of ``studykit.claims``, with the verdict and the study's number). This script puts
them side by side, one section per claim (a table of the studies that judge it, then one line naming
the studies that do not measure it, grouped by their reason), between the markers ``<!-- paper-claims -->`` and
``<!-- /paper-claims -->`` of docs/paper.md, so a verdict on the page can never differ from the
report it came from::

    python scripts/paper_claims.py          # rewrite the section
    python scripts/paper_claims.py --check  # exit 1 if the page differs from the reports
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "paper.md"
BEGIN, END = "<!-- paper-claims -->", "<!-- /paper-claims -->"

#: (report folder, what it is, the command that regenerates it). Order = column order on the page.
STUDIES: tuple[tuple[str, str, str], ...] = (
    ("curriculum", "toy study, quick default", "gdro simulate --update-reports"),
    ("curriculum-full", "toy study, paper-like scale", "gdro simulate --full --update-reports"),
    ("curriculum-all-methods", "toy study, all eight methods",
     "gdro simulate --methods grpo,class_gdro,prompt_gdro,prompt_gdro_mean1,rollout_gdro,sqrt_oracle,joint,knapsack"
     " --update-reports curriculum-all-methods"),
    ("curriculum-paper-1.7b", "toy study, 1.7B-like world",
     "gdro simulate --preset paper-1.7b --update-reports"),
    ("curriculum-paper-4b", "toy study, 4B-like world", "gdro simulate --preset paper-4b --update-reports"),
    ("curriculum-paper-8b", "toy study, 8B-like world", "gdro simulate --preset paper-8b --update-reports"),
    ("surrogate", "Lemma 4.1 and the game gap", "gdro simulate surrogate --update-reports"),
    ("ablation", "full-factorial ablation", "gdro simulate ablation --update-reports"),
    ("lm-study", "CPU learning study (a real LM)",
     "gdro study lm --out runs/lm-study, then --report-only --report reports/lm-study"),
)


def load_claims(folder: str) -> list[dict[str, str]]:
    """The claims of one report, or [] when the report judges none."""
    path = ROOT / "reports" / folder / "summary.json"
    claims = json.loads(path.read_text(encoding="utf-8")).get("claims") or []
    return [dict(c) for c in claims]


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def untested_line(untested: list[tuple[str, str]]) -> str:
    """``Not measured by a, b (why); c (why).``: the studies that leave a claim untested, grouped by reason."""
    reasons: dict[str, list[str]] = {}
    for folder, why in untested:
        reasons.setdefault(why, []).append(folder)
    return "Not measured by " + "; ".join(f"{', '.join(folders)} ({cell(why)})" for why, folders in reasons.items()) + "."


def render() -> str:
    """The generated section: the commands table, then per claim a table of the studies that judge it
    (study -> verdict) and one line for those that leave it untested."""
    per_study = {folder: {c["key"]: c for c in load_claims(folder)} for folder, _, _ in STUDIES}
    keys: list[str] = []
    for claims in per_study.values():
        keys += [k for k in claims if k not in keys]
    lines = ["| report | what it is | command |", "|---|---|---|"]
    lines += [f"| [{folder}](reports/{folder}/report.md) | {what} | `{cmd}` |" for folder, what, cmd in STUDIES]
    for key in keys:
        first = next(c[key] for c in per_study.values() if key in c)
        lines += ["", f"### {cell(first['claim'])}", "", f"Paper: {cell(first['paper'])}.", ""]
        judged = [(folder, per_study[folder][key]) for folder, _, _ in STUDIES if key in per_study[folder]]
        measured = [(folder, c) for folder, c in judged if c["verdict"] != "untested"]
        untested = [(folder, c["number"]) for folder, c in judged if c["verdict"] == "untested"]
        if measured:
            lines += ["| report | verdict | this study's number |", "|---|---|---|"]
            lines += [f"| {folder} | **{cell(c['verdict'])}** | {cell(c['number'])} |" for folder, c in measured]
        else:
            lines.append("No study here measures it.")
        if untested:
            lines += ["", untested_line(untested)]
    return "\n".join(lines)


def replace_section(text: str, body: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"paper_claims: {PAGE.relative_to(ROOT)} lacks the markers {BEGIN} ... {END}")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + body + "\n" + END + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/paper.md differs from the reports")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    new = replace_section(text, render())
    if args.check:
        if new != text:
            print("paper_claims: docs/paper.md is stale: run python scripts/paper_claims.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
