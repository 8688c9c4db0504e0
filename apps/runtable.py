"""The run table (one row per run: status, method, seed, steps, headline results, config columns)
and the config diff between two runs. No Streamlit here."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from apps import data, study
from gdro_lab.runlog import RunData

BASE_COLUMNS = ["run", "status", "method", "seed", "steps", "last step", "mean_success (tail)"]
MISSING = "(absent)"
#: Characters that Streamlit's Markdown could read as markup in a table cell: emphasis, code,
#: links, HTML, math, colour/emoji shortcodes, headings, the cell separator.
MARKDOWN_SPECIAL = re.compile(r"([\\`*_~\[\]<>$:|#])")


def flat_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Dotted key -> value as text (see :func:`apps.data.config_rows`)."""
    rows = data.config_rows(config)
    return dict(zip(rows["key"], rows["value"]))


def run_table(runs: Mapping[str, RunData], all_config: bool = False) -> pd.DataFrame:
    """One row per run. Config columns: the dotted keys whose values differ between the runs
    (every key when ``all_config``), seed keys included."""
    flats = {label: flat_config(run.config) for label, run in runs.items()}
    keys: list[str] = []
    for flat in flats.values():
        keys += [key for key in flat if key not in keys]
    if not all_config:
        keys = [key for key in keys if len({flat.get(key, MISSING) for flat in flats.values()}) > 1]
    rows = []
    for label, run in runs.items():
        facts = data.summary(run)
        row: dict[str, Any] = {
            "run": label, "status": facts["status"], "method": study.method_name(run.config, ""),
            "seed": str(study.run_seed(run.config)) if study.run_seed(run.config) is not None else "",
            "steps": facts["steps"], "last step": facts["last_step"],
            "mean_success (tail)": study.final_value(run, "mean_success")}
        row.update({f"config.{key}": flats[label].get(key, MISSING) for key in keys})
        rows.append(row)
    return pd.DataFrame(rows, columns=BASE_COLUMNS + [f"config.{key}" for key in keys])


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
