"""The run table (one row per run: its name, group, method, seed, status, last step, latest success,
the config keys that differ) and the config diff between two runs, built from the runs' small
files only (:class:`apps.listing.RunInfo`); and the table of run folders that cannot be read,
with their reasons. No Streamlit here."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from apps import identity
from apps.listing import RunInfo

BASE_COLUMNS = ["run", "name", "group", "method", "seed", "status", "last step", "mean_success (last step)"]
TAIL_COLUMN = "mean_success (tail)"
MISSING = "(absent)"
#: Characters that Streamlit's Markdown could read as markup in a table cell: emphasis, code,
#: links, HTML, math, colour/emoji shortcodes, headings, the cell separator.
MARKDOWN_SPECIAL = re.compile(r"([\\`*_~\[\]<>$:|#])")


def flat_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Dotted key -> value as text (:func:`apps.identity.flatten`; lists as JSON text, an empty
    section as ``{}``), without pandas: the run table flattens every listed run's config."""
    return {key: value if isinstance(value, str) else str(value) for key, value in identity.flatten(config).items()}


def run_table(infos: Sequence[RunInfo], grouping: identity.Grouping, all_config: bool = False,
              tails: Mapping[str, float] | None = None, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per run: folder label, name (``names``, else the grouping's group and seed), group
    (as ``grouping`` groups it), method, seed, status, last logged step,
    ``mean_success`` at that step, the tail average when ``tails`` gives it (run label -> value),
    and config columns: the dotted keys whose values differ between the runs (every key when
    ``all_config``), seeds included."""
    flats = {info.label: flat_config(info.config) for info in infos}
    keys: list[str] = []
    for flat in flats.values():
        keys += [key for key in flat if key not in keys]
    if not all_config:
        keys = [key for key in keys if len({flat.get(key, MISSING) for flat in flats.values()}) > 1]
    columns = BASE_COLUMNS + ([TAIL_COLUMN] if tails is not None else [])
    rows = []
    for info in infos:
        seed = grouping.seed_of.get(info.label, identity.seed_of(info.config))
        latest = info.last_scalars.get("mean_success")
        row: dict[str, Any] = {
            "run": info.label, "name": (names or {}).get(info.label, grouping.display(info.label)),
            "group": grouping.group_of.get(info.label, ""),
            "method": grouping.method_of.get(info.label) or identity.method_of(info.config),
            "seed": "" if seed is None else str(seed), "status": info.status, "last step": info.last_step,
            "mean_success (last step)": float(latest) if isinstance(latest, (int, float)) else np.nan}
        if tails is not None:
            row[TAIL_COLUMN] = tails.get(info.label, np.nan)
        row.update({f"config.{key}": flats[info.label].get(key, MISSING) for key in keys})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns + [f"config.{key}" for key in keys])


def problem_table(problems: Sequence[RunInfo]) -> pd.DataFrame:
    """Run folders that cannot be read: columns run (folder label), reason (one line)."""
    return pd.DataFrame({"run": [info.label for info in problems], "reason": [info.problem for info in problems]},
                        columns=["run", "reason"])


def search(table: pd.DataFrame, text: str) -> pd.DataFrame:
    """Rows where every word of ``text`` appears (case-insensitive) in some cell."""
    words = text.lower().split()
    if not words or table.empty:
        return table
    cells = table.astype(str).apply(lambda column: column.str.lower())
    joined = cells.apply(lambda row: " ".join(row), axis=1)
    keep = np.ones(len(table), dtype=bool)
    for word in words:
        keep &= joined.str.contains(word, regex=False).to_numpy()
    return table[keep].reset_index(drop=True)


def config_diff(first: Mapping[str, Any], second: Mapping[str, Any], names: Sequence[str] = ("A", "B"),
                include_equal: bool = False) -> pd.DataFrame:
    """Dotted keys whose values differ between two configs (a key missing on one side shows
    ``(absent)``); columns: key, <name A>, <name B>."""
    left, right = flat_config(first), flat_config(second)
    keys = list(left) + [key for key in right if key not in left]
    rows = [(key, left.get(key, MISSING), right.get(key, MISSING)) for key in keys
            if include_equal or left.get(key, MISSING) != right.get(key, MISSING)]
    return pd.DataFrame(rows, columns=["key", names[0], names[1]])


def markdown_text(text: str) -> str:
    """``text`` with every Markdown special character backslash-escaped, so it shows as typed."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def markdown_table(table: pd.DataFrame) -> str:
    """``table`` as a GitHub-flavoured Markdown table for ``st.markdown``: text cells and column
    names escaped (:func:`markdown_text`; a line break becomes a space), floats to 4 significant
    digits, missing values blank, numeric columns right-aligned.

    The landing page draws its tables this way rather than with ``st.table``, whose Arrow
    formatting code (about 1 MB of JavaScript) a fresh browser would otherwise load and compile
    before the first page appears (docs/benchmarks.md)."""
    def cell(value: Any) -> str:
        if value is None or (np.ndim(value) == 0 and pd.isna(value)):
            return ""
        if isinstance(value, (float, np.floating)):
            return f"{value:.4g}"
        return markdown_text(" ".join(str(value).splitlines()))

    numeric = [pd.api.types.is_numeric_dtype(table[column]) and not pd.api.types.is_bool_dtype(table[column])
               for column in table.columns]
    lines = ["| " + " | ".join(cell(str(name)) for name in table.columns) + " |",
             "|" + "|".join("---:" if right else "---" for right in numeric) + "|"]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)
