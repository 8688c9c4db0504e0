"""The findings tables of docs/simulator-findings.md, built from the committed reports' summary.json files.

tests/scripts/test_simulator_findings.py checks that the docs contain exactly :func:`tables` of the
committed reports; print them with ``python scripts/simulator_findings.py`` after ``--update-reports``,
or write them into the page's ``<!-- generated: simulator_findings.NAME -->`` blocks with ``--write``.
A maintainer's tool of the docs (it reads the repository's reports/), so it is no part of the package.
Where each number comes from: docs/simulator-notes.md#scripts-simulator_findings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gdro_lab.methods import get_method
from studykit.tables import fmt, markdown_table

ALL = ("prompt_gdro", "rollout_gdro", "joint")
#: (report folder, sqrt-law world or "", what the row is called, methods shown) in table order.
ROWS = (
    ("curriculum", "", "default world, quick", ALL),
    ("curriculum-all-methods", "", "default world, quick, all methods", ("joint",)),
    ("curriculum-full", "", "default world, paper-like scale (`--full`)", ALL),
    ("curriculum-paper-1.7b", "", "paper-1.7b (hard)", ALL),
    ("curriculum-paper-4b", "", "paper-4b (middle)", ALL),
    ("curriculum-paper-8b", "", "paper-8b (easy)", ALL),
    ("sqrt-law", "base", "sqrt-law, base world", ALL),
    ("sqrt-law", "bimodal", "sqrt-law, bimodal world", ALL),
)
METRICS = (("test/worst_group_accuracy", "worst-group"), ("test/accuracy", "mean"))
BASES = {"vs_tuned": "tuned GRPO", "vs_matched_second": "GRPO matched √E[m²]", "vs_matched_first": "GRPO matched E[m]"}


def _summary(reports: Path, folder: str, world: str) -> dict[str, Any] | None:
    """The report's summary (a sqrt-law world's part when ``world``), None when the report is absent."""
    path = reports / folder / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    return summary["worlds"].get(world) if world else summary


def _link(folder: str, label: str) -> str:
    return f"[{label}](reports/{folder}/report.md)"


def answer_table(reports: Path) -> str:
    """Markdown: per report and method, held-out gains (pp, paired, 95% CI) vs tuned GRPO and GRPO step-matched
    on the second moment √E[m²] (the price match) and the first moment E[m]."""
    rows = []
    for folder, world, label, methods in ROWS:
        summary = _summary(reports, folder, world)
        if summary is None:
            continue
        result = summary["decision"]
        for method in methods:
            if method not in result["gains"]:
                continue
            gains = result["gains"][method]
            if any(key not in gains[metric] for key in BASES for metric, _ in METRICS):
                continue  # a report of the previous protocol (one step match): regenerate it to list it
            cells = [fmt(*gains[metric][key], 1, 100) for key in BASES for metric, _ in METRICS]
            lrs = " / ".join(f"{result['tuned_lr'][metric][method]:g}" for metric, _ in METRICS)
            rows.append([_link(folder, label), get_method(method).label, *cells, lrs])
    header = ["world (report)", "method"] + [f"{name}: Δ vs {label} (pp)" for label in BASES.values()
                                             for _, name in METRICS] + ["method's tuned lr (wg / mean)"]
    return markdown_table(header, rows)


def claims_table(reports: Path, key: str) -> str:
    """Markdown: the verdict and number of claim ``key`` (studykit.claims) in every report that tests it."""
    rows = []
    for folder, world, label, _ in ROWS:
        summary = _summary(reports, folder, world)
        for claim in (summary or {}).get("claims", []):
            if claim.get("key") == key and claim["verdict"] != "untested":
                rows.append([_link(folder, label), f"**{claim['verdict']}**", claim["number"]])
    return markdown_table(["world (report)", "verdict", "number (95% CI over seeds)"], rows)


def dispersion_rows(reports: Path) -> str:
    """Markdown: the sqrt-law report's SE-dispersion numbers (what a WSE reduction needs)."""
    summary = _summary(reports, "sqrt-law", "")
    rows = []
    for entry in (summary or {}).get("se_dispersion", []):
        share, ratio = entry["zero_variance_share"], entry["sigma_ratio_equal_shares"]
        rows.append([f"{entry['target_pct']:.1f}%", "unreachable" if share is None or share != share else
                     f"{100 * share:.0f}%", "unreachable" if ratio is None or ratio != ratio else f"{ratio:,.0f}×"])
    return markdown_table(["WSE reduction", "share of the batch at σ ≈ 0 needed",
                           "σ spread needed at equal shares (two bins)"], rows)


#: (report folder, sqrt-law world or "", column title) of the claims map.
MAP_COLUMNS = (("curriculum", "", "curriculum (quick)"), ("curriculum-full", "", "curriculum `--full`"),
               ("sqrt-law", "base", "sqrt-law (base)"), ("ablation", "", "ablation"), ("surrogate", "", "surrogate"),
)


def claims_map(reports: Path) -> str:
    """Markdown: every paper claim (studykit.claims) against every study: its verdict there, or 'untested'."""
    from studykit.claims import CLAIMS
    verdicts: dict[str, dict[str, str]] = {}
    for folder, world, title in MAP_COLUMNS:
        summary = _summary(reports, folder, world)
        verdicts[title] = {c["key"]: c["verdict"] for c in (summary or {}).get("claims", []) if "key" in c}
    titles = [t for _, _, t in MAP_COLUMNS if verdicts[t]]
    rows = [[f"{c.text} ({c.paper})"] + [verdicts[t].get(c.key, "—") for t in titles] for c in CLAIMS]
    return markdown_table(["paper claim (paper's number)"] + titles, rows)


def tables(reports: Path) -> dict[str, str]:
    """Every generated table of the docs' findings section, by name."""
    return {"answer": answer_table(reports), "lead-lag": claims_table(reports, "leadlag_early"),
            "lead-lag decay": claims_table(reports, "leadlag_decays"), "se-proxy": claims_table(reports, "wse"),
            "pass@8": claims_table(reports, "rgdro_pass8"), "se-dispersion": dispersion_rows(reports),
            "claims map": claims_map(reports)}


def slug(name: str) -> str:
    """The name of a table's block on the page: ``<!-- generated: simulator_findings.SLUG -->``."""
    return name.replace(" ", "-").replace("@", "")


def write_blocks(page: str, generated: dict[str, str]) -> str:
    """``page`` with the text between each table's block markers replaced by the table (a missing block: error)."""
    for name, table in generated.items():
        begin, end = f"<!-- generated: simulator_findings.{slug(name)} -->\n", \
            f"<!-- /generated: simulator_findings.{slug(name)} -->"
        if page.count(begin) != 1 or page.count(end) != 1:
            raise SystemExit(f"simulator_findings: the page has no single block {begin.strip()!r} ... {end!r}")
        head, rest = page.split(begin)
        page = head + begin + table.rstrip("\n") + "\n" + end + rest.split(end, 1)[1]
    return page


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--write"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "reports"
    if "--write" in sys.argv[1:]:  # rewrite the page's generated blocks in place
        page_path = Path(__file__).resolve().parent.parent / "docs" / "simulator-findings.md"
        page_path.write_text(write_blocks(page_path.read_text(encoding="utf-8"), tables(root)), encoding="utf-8")
        sys.exit(0)
    for name, table in tables(root).items():
        sys.stdout.write(f"<!-- {name} -->\n{table}\n\n")
