"""The run table (one row per run: its name, group, method, seed, status, last step, latest success,
the config keys that differ) and the config diff between two runs, built from the runs' small
files only (:class:`apps.data.listing.RunInfo`); and the table of run folders that cannot be read,
with their reasons. No Streamlit here."""

from __future__ import annotations

import re
import threading
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from apps.data import identity, runcolumns
from apps.data.groups import Grouping
from apps.data.listing import RunInfo

BASE_COLUMNS = ["run", "name", "study", "group", "method", "seed", "producer", "status", "damage", "last step",
                "mean_success (last step)"]
TAIL_COLUMN = "mean_success (tail)"
MISSING = "(absent)"
#: Characters that Streamlit's Markdown could read as markup in a table cell: emphasis, code,
#: links, HTML, math, colour/emoji shortcodes, headings, the cell separator.
MARKDOWN_SPECIAL = re.compile(r"([\\`*_~\[\]<>$:|#])")


def flat_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Dotted key -> value as text (:func:`apps.data.identity.flatten`; lists as JSON text, an empty
    section as ``{}``), without pandas: the run table flattens every listed run's config."""
    return {key: value if isinstance(value, str) else str(value) for key, value in identity.flatten(config).items()}


def run_table(infos: Sequence[RunInfo], grouping: Grouping, all_config: bool = False,
              tails: Mapping[str, float] | None = None, names: Mapping[str, str] | None = None,
              producer: str | None = None, tags: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """One row per run: folder label, name (``names``, else the grouping's group and seed), study,
    group (as ``grouping`` groups it), method, seed, producer, status, damage (why its files look
    damaged: :attr:`apps.data.listing.RunInfo.damage`), last logged step, ``mean_success`` at that
    step, the tail average when ``tails`` gives it (run label -> value), the user's tags, and
    config columns: the dotted keys of one producer (``producer``; None: every run's keys) whose values
    differ between its runs (every key when ``all_config``), seeds included; other producers' runs are
    blank there (why one producer: docs/app-data-notes.md#apps-data-runtable)."""
    flats, keys = config_columns(infos, producer, all_config)
    columns = BASE_COLUMNS + ([TAIL_COLUMN] if tails is not None else []) + ["tags"]
    rows = []
    for info in infos:
        seed = grouping.seed_of.get(info.label, identity.seed_of(info.config))
        latest = info.last_scalars.get("mean_success")
        row: dict[str, Any] = {
            "run": info.label, "name": (names or {}).get(info.label, grouping.display(info.label)),
            "study": grouping.family_of.get(info.label, ""), "group": grouping.group_of.get(info.label, ""),
            "method": grouping.method_of.get(info.label) or identity.method_of(info.config),
            "seed": "" if seed is None else str(seed), "producer": info.producer,
            "status": f"{info.status} ⚠ damaged" if info.damage else info.status,
            "damage": info.damage or "", "last step": info.last_step,
            "mean_success (last step)": float(latest) if isinstance(latest, (int, float)) else np.nan}
        if tails is not None:
            row[TAIL_COLUMN] = tails.get(info.label, np.nan)
        row["tags"] = ", ".join((tags or {}).get(info.label, ()))
        rows.append(row)
    base = pd.DataFrame(rows, columns=columns)
    mine = [flats[info.label] if producer is None or info.producer == producer else None for info in infos]
    config = pd.DataFrame({f"config.{key}": [flat.get(key, MISSING) if flat is not None else None for flat in mine]
                           for key in keys}, index=base.index, columns=[f"config.{key}" for key in keys])
    return pd.concat([base, config], axis=1)  # config built column by column: 0.5 s -> 0.3 s at 1,172 runs


#: The last config columns worked out, for a second visit or a rerun over the same listed runs:
#: (producer, all_config, the ids of the RunInfo objects) -> (those objects, kept so that no other
#: object takes their ids while the entry lives; each run's flat config; the keys shown).
_CONFIG_COLUMNS: dict[tuple[Any, ...], tuple[list[RunInfo], dict[str, dict[str, str]], list[str]]] = {}
_CONFIG_COLUMNS_LOCK = threading.Lock()
#: Entries kept (one per producer choice a user flips between).
CONFIG_COLUMNS_KEPT = 4


def config_columns(infos: Sequence[RunInfo], producer: str | None = None, all_config: bool = False
                   ) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Each run's flat config (:func:`flat_config`) and the config keys the table shows
    (:func:`config_keys`), remembered for the same RunInfo objects: the run list hands out the same
    object while a run's small files are unchanged (:data:`apps.data.listing.INFO_CACHE`), a new one
    when they change, so a second visit of 1,000 runs skips 0.2 s of flattening and counting."""
    key = (producer, all_config, tuple(map(id, infos)))
    with _CONFIG_COLUMNS_LOCK:
        found = _CONFIG_COLUMNS.get(key)
    if found is None:
        flats = {info.label: flat_config(info.config) for info in infos}
        found = (list(infos), flats, config_keys(infos, producer, all_config, flats))
        with _CONFIG_COLUMNS_LOCK:
            while len(_CONFIG_COLUMNS) >= CONFIG_COLUMNS_KEPT:
                del _CONFIG_COLUMNS[next(iter(_CONFIG_COLUMNS))]
            _CONFIG_COLUMNS[key] = found
    return found[1], list(found[2])


def with_metric_columns(table: pd.DataFrame, scalars: Mapping[str, runcolumns.RunScalars],
                        specs: Sequence[runcolumns.ColumnSpec]) -> pd.DataFrame:
    """``table`` with one column per metric spec (:func:`apps.data.runcolumns.metric_columns`) after
    its base columns; ``scalars``: run label -> its scalars (a run missing there: blank cells)."""
    specs = [spec for spec in dict.fromkeys(specs) if spec.name not in table]
    if not specs:
        return table
    empty = runcolumns.RunScalars({})
    metrics = runcolumns.metric_columns([scalars.get(str(label), empty) for label in table["run"]], specs)
    at = next((index for index, column in enumerate(table.columns) if column in (TAIL_COLUMN, "tags")),
              len(table.columns))
    return pd.concat([table.iloc[:, :at], metrics.set_axis(table.index), table.iloc[:, at:]], axis=1)


def metric_keys(infos: Sequence[RunInfo]) -> list[str]:
    """Scalar names a column can show, from the runs' small files (the last step's scalars and the
    last evaluation's metrics, named as :func:`apps.data.runcolumns.run_scalars` names them), sorted;
    interval bounds left out."""
    keys: set[str] = set()
    for info in infos:
        keys.update(info.last_scalars)
        keys.update(f"{runcolumns.EVAL_PREFIX}{name}" if name in info.last_scalars else name for name in info.last_metrics)
    return sorted(key for key in keys if not (key.endswith(("_lo", "_hi")) and key[:-3] in keys))


def config_keys(infos: Sequence[RunInfo], producer: str | None = None, all_config: bool = False,
                flats: Mapping[str, Mapping[str, str]] | None = None) -> list[str]:
    """Dotted config keys of ``producer``'s runs (None: every run) in first-seen order: those whose
    values differ between them, or all of them (``all_config``)."""
    flats = flats if flats is not None else {info.label: flat_config(info.config) for info in infos}
    kept = [info for info in infos if producer is None or info.producer == producer]
    pairs: dict[tuple[str, str], int] = {}  # (key, value) -> runs with it; keys in first-seen order
    runs_of: dict[str, int] = {}  # producer -> its runs
    logged_by: dict[str, set[str]] = {}  # key -> producers whose runs have it
    for info in kept:
        runs_of[info.producer] = runs_of.get(info.producer, 0) + 1
        for item in flats[info.label].items():
            pairs[item] = pairs.get(item, 0) + 1
            logged_by.setdefault(item[0], set()).add(info.producer)
    keys = list(dict.fromkeys(key for key, _ in pairs))
    if not all_config:  # constant: one value held by every run of the producers that have the key (another
        # producer's runs, which lack it, do not make a column: 151 -> 23 columns on an arena's output)
        constant = {key for (key, _), count in pairs.items()
                    if count == sum(runs_of[name] for name in logged_by[key])}
        keys = [key for key in keys if key not in constant]
    return keys


def producers(infos: Sequence[RunInfo]) -> list[str]:
    """The producers of the runs, most runs first."""
    counts: dict[str, int] = {}
    for info in infos:
        counts[info.producer] = counts.get(info.producer, 0) + 1
    return sorted(counts, key=lambda name: (-counts[name], name))


def filter_table(table: pd.DataFrame, producers_shown: Sequence[str] | None = None, key: str | None = None,
                 values: Sequence[str] = (), text: str = "") -> pd.DataFrame:
    """Rows of ``producers_shown`` (None: all), whose config ``key`` has one of ``values`` (none
    given: any), and that contain every word of ``text`` (:func:`search`)."""
    keep = np.ones(len(table), dtype=bool)
    if producers_shown is not None:
        keep &= table["producer"].isin(list(producers_shown)).to_numpy()
    if key and values and f"config.{key}" in table:
        keep &= table[f"config.{key}"].astype(str).isin([str(value) for value in values]).to_numpy()
    return search(table[keep].reset_index(drop=True), text)


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
    digits, missing values blank, numeric columns right-aligned (the landing page's tables; why not
    ``st.table``: docs/app-data-notes.md#apps-data-runtable)."""
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
