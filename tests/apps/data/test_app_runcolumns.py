"""The run table's metric columns, numeric filter and grouped rows against naive loops over runs
(apps.data.runcolumns, apps.data.runfilter), and no interval for a group of fewer than 3 seeds."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from apps.data import identity, listing, loading, runcolumns, runfilter, runtable, study
from apps.data.runcolumns import ColumnSpec, RunScalars
from gdro_app_synthetic import write_synthetic_run
from gdro_lab.runformat.runlog import RunData, read_run

SPECS = [ColumnSpec("acc"), ColumnSpec("acc", "best"), ColumnSpec("acc", "max"), ColumnSpec("acc", "min"),
         ColumnSpec("acc", "last", 3), ColumnSpec("acc", "last", 1), ColumnSpec("acc", "last", 50),
         ColumnSpec("train/loss", "best"), ColumnSpec("absent")]


def _random_scalars(seed: int, runs: int = 40) -> list[RunScalars]:
    generator = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        length = int(generator.integers(0, 12))  # some runs log nothing
        out.append(RunScalars({"acc": generator.random(length), "train/loss": generator.random(length) + 1}))
    return out


def _naive(run: RunScalars, spec: ColumnSpec) -> float:
    """One run, one column, by a plain loop."""
    values = [float(value) for value in run.values.get(spec.key, [])]
    if not values:
        return math.nan
    stat = spec.stat
    if stat == "best":
        stat = "min" if spec.key.endswith("loss") else "max"
    if stat == "final":
        return values[-1]
    if stat == "max":
        return max(values)
    if stat == "min":
        return min(values)
    tail = values[-spec.k:]
    return sum(tail) / len(tail)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metric_columns_equal_a_loop_over_runs(seed: int) -> None:
    scalars = _random_scalars(seed)
    table = runcolumns.metric_columns(scalars, SPECS)
    assert list(table.columns) == [spec.name for spec in SPECS] and len(table) == len(scalars)
    for row, run in enumerate(scalars):
        for spec in SPECS:
            expected = _naive(run, spec)
            got = table.loc[row, spec.name]
            assert (math.isnan(expected) and math.isnan(got)) or got == pytest.approx(expected, rel=1e-12), \
                (row, spec.name)


def test_column_names_round_trip_and_best_knows_lower_is_better() -> None:
    for spec in [*SPECS, ColumnSpec("test/accuracy", "last", 5)]:
        assert runcolumns.parse_column(spec.name) == spec
    assert runcolumns.parse_column("mean_success (last step)") is None
    assert runcolumns.lower_is_better("train/loss") and runcolumns.lower_is_better("lead_lag_gap")
    assert runcolumns.lower_is_better("time/step") and not runcolumns.lower_is_better("test/accuracy")
    with pytest.raises(ValueError, match="k >= 1"):
        ColumnSpec("acc", "last", 0)


def test_a_runs_scalars_are_its_finite_steps_and_evaluations(tmp_path: Path) -> None:
    run = read_run(write_synthetic_run(tmp_path / "run", steps=30, num_bins=6, seed=1))
    run.scalars["mean_success"][3] = np.nan
    run.evals.append({"step": 99, "metrics": {"mean_success": 0.25, "accuracy": float("nan")}})
    scalars = runcolumns.run_scalars(run).values
    assert scalars["mean_success"].size == run.steps.size - 1 and np.isfinite(scalars["mean_success"]).all()
    accuracy = [record["metrics"]["accuracy"] for record in run.evals[:-1]]
    assert scalars["accuracy"].tolist() == accuracy, "evaluation metrics in logged order, NaN left out"
    assert scalars["eval/mean_success"].tolist() == [0.25], "an eval metric named like a step scalar: eval/..."


def _table() -> pd.DataFrame:
    return pd.DataFrame({"run": [f"r{index}" for index in range(8)],
                         "method": ["grpo", "grpo", "grpo", "gdro", "gdro", "other", "other", "other"],
                         "acc (final)": [0.1, 0.7, 0.6, 0.5, 0.9, 0.65, np.nan, 0.8],
                         "config.lr": ["0.5", "1", "2", "0.5", "1", "2", "x", "1"]})


def _keep(row: dict[str, Any], column: str, op: str, value: Any) -> bool:
    """One row, one condition, by hand (a blank cell meets only !=)."""
    cell = row[column]
    if isinstance(value, float):
        try:
            number = float(cell)
        except (TypeError, ValueError):
            number = math.nan
        if math.isnan(number):
            return op == "!="
        return {">": number > value, ">=": number >= value, "<": number < value, "<=": number <= value,
                "==": number == value, "!=": number != value}[op]
    return (str(cell) == value) == (op == "==")


@pytest.mark.parametrize("text", ["acc (final) > 0.6", "acc (final) >= 0.65", "acc (final) < 0.6",
                                  "acc (final) <= 0.2", "acc (final) == 0.7", "acc (final) != 0.7",
                                  "0.2 < acc (final) <= 0.7", "lr >= 1", "config.lr == x",
                                  "method == grpo and acc (final) > 0.5", "method != grpo, 0.5 <= lr < 2",
                                  "acc > 0.6", "`acc (final)` > 0.6"])
def test_filter_keeps_the_rows_a_loop_keeps(text: str) -> None:
    table = _table()
    conditions = runfilter.parse_filter(text)
    mask = runfilter.filter_mask(table, conditions, keys=["acc"])
    expected = []
    for row in table.to_dict("records"):
        keep = True
        for condition in conditions:
            column = runfilter.resolve_column(condition.column, list(table.columns), ["acc"])
            keep &= _keep(row, column or "", condition.op, condition.value)
        expected.append(keep)
    assert mask.tolist() == expected and 0 < sum(expected) < len(table), text


def test_ranges_and_text_conditions_parse_as_written() -> None:
    assert runfilter.parse_filter("0.2 < acc (final) <= 0.7") == \
        [runfilter.Condition("acc (final)", ">", 0.2), runfilter.Condition("acc (final)", "<=", 0.7)]
    assert runfilter.parse_filter("0.5<=lr<2 and method = grpo; x != 1e-3") == \
        [runfilter.Condition("lr", ">=", 0.5), runfilter.Condition("lr", "<", 2.0),
         runfilter.Condition("method", "==", "grpo"), runfilter.Condition("x", "!=", 0.001)]
    table = _table()
    kept = runfilter.filter_mask(table, runfilter.parse_filter("0.5 < acc (final) <= 0.7"))
    assert table["run"][kept].tolist() == ["r1", "r2", "r5"], "by hand: 0.7, 0.6, 0.65"


def test_bare_scalar_names_mean_their_final_column_and_bad_filters_say_why() -> None:
    table = _table().drop(columns=["acc (final)"])
    conditions = runfilter.parse_filter("acc > 0.6")
    assert runfilter.needed_columns(conditions, list(table.columns), ["acc"]) == [ColumnSpec("acc")]
    assert runfilter.needed_columns(runfilter.parse_filter("acc (best) > 0.6"), list(table.columns), ["acc"]) == \
        [ColumnSpec("acc", "best")]
    with pytest.raises(runfilter.FilterError, match="no column `nope`"):
        runfilter.filter_mask(table, runfilter.parse_filter("nope > 1"), ["acc"])
    with pytest.raises(runfilter.FilterError, match="needs a number"):
        runfilter.parse_filter("acc > high")
    with pytest.raises(runfilter.FilterError, match="cannot read"):
        runfilter.parse_filter("acc")
    assert runfilter.parse_filter("  ") == []


def test_grouped_rows_equal_a_loop_and_two_seeds_get_no_interval() -> None:
    table = _table()
    grouped = runfilter.group_table(table, "method", ["acc (final)"])
    assert grouped["method"].tolist() == ["grpo", "gdro", "other"] and grouped["n"].tolist() == [3, 2, 3]
    assert grouped["acc (final) lo"].isna().tolist() == [False, True, True], "other: 3 runs but 2 values"
    for _, row in grouped.iterrows():
        values = table.loc[table["method"] == row["method"], "acc (final)"].dropna().to_numpy()
        assert row["acc (final)"] == pytest.approx(values.mean())
        assert set(row["runs"]) == set(table.loc[table["method"] == row["method"], "run"])
        if values.size >= 3:
            half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
            assert (row["acc (final) lo"], row["acc (final) hi"]) == \
                (pytest.approx(values.mean() - half), pytest.approx(values.mean() + half))
        else:
            assert np.isnan(row["acc (final) lo"]) and np.isnan(row["acc (final) hi"]), "under 3 values: no interval"


def _run(name: str, final: float) -> RunData:
    return RunData(Path(name), {"num_bins": 4}, {"method": "m", "seed": name}, np.arange(3),
                   {"mean_success": np.array([0.1, 0.2, final])}, {})


def test_a_two_seed_group_prints_no_interval_in_the_final_table() -> None:
    two = study.group_by_method({"a": _run("a", 0.5), "b": _run("b", 0.7)})
    table = study.final_table(two, ["mean_success"])
    assert table["seeds"].iloc[0] == 2 and "[" not in table["mean_success"].iloc[0], table["mean_success"].iloc[0]
    assert table["mean_success"].iloc[0].endswith("(2 seeds)") and np.isnan(table["mean_success lo"].iloc[0])
    three = study.group_by_method({"a": _run("a", 0.5), "b": _run("b", 0.7), "c": _run("c", 0.6)})
    assert "[" in study.final_table(three, ["mean_success"])["mean_success"].iloc[0]


def test_the_run_table_gets_metric_columns_from_the_runs_files(seeds_root: Path) -> None:
    listed = listing.list_runs(seeds_root)
    infos = list(listed.runs)
    table = runtable.run_table(infos, identity.group_runs({info.label: info.config for info in infos}))
    keys = runtable.metric_keys(infos)
    assert "mean_success" in keys and "accuracy" in keys and "worst_group_accuracy" in keys
    scalars = dict(zip([info.label for info in infos],
                       runcolumns.SCALAR_CACHE.get_many([info.entry.path for info in infos])))
    specs = [ColumnSpec("accuracy", "best"), ColumnSpec("mean_success", "last", 5)]
    wide = runtable.with_metric_columns(table, scalars, specs)
    assert list(wide.columns[wide.columns.get_loc("accuracy (best)") + 2:][:1]) == ["tags"]
    for label, row in zip(wide["run"], wide.to_dict("records")):
        run = loading.load_run(seeds_root / label)
        accuracy = [record["metrics"]["accuracy"] for record in run.evals]
        assert row["accuracy (best)"] == pytest.approx(max(accuracy))
        assert row["mean_success (mean of last 5)"] == pytest.approx(np.mean(run.scalars["mean_success"][-5:]))


def test_the_scalars_only_reader_equals_the_full_reader(tmp_path: Path, real_run: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import shutil

    runs = [write_synthetic_run(tmp_path / "plain", steps=25, num_bins=6, seed=3), real_run]
    odd = shutil.copytree(runs[0], tmp_path / "odd")
    lines = (odd / "steps.jsonl").read_text().splitlines()
    record = json.loads(lines[7])
    record["scalars"]["time/eval"] = 1.5  # a scalar logged on one step only
    record["scalars"]["mean_success"] = None  # a value not logged
    lines[7] = json.dumps(record)
    (odd / "steps.jsonl").write_text("\n".join(lines) + "\n" + lines[8][:30])  # and a torn last line
    runs.append(odd)

    def no_fallback(path: Path) -> RunData:
        raise AssertionError(f"{path}: read in full, not by the scalars-only path")

    for path in runs:
        with monkeypatch.context() as patched:
            patched.setattr(runcolumns, "read_run_fast", no_fallback)
            fast = runcolumns.read_scalars(path).values
        full = runcolumns.run_scalars(read_run(path)).values
        assert sorted(fast) == sorted(full), path
        for key in full:
            assert fast[key].tolist() == full[key].tolist(), (path, key)
    assert runcolumns.read_scalars(odd).values["time/eval"].tolist() == [1.5]


@pytest.mark.parametrize("seed", [0, 1])
def test_differing_config_keys_equal_a_loop(seed: int) -> None:
    generator = np.random.default_rng(seed)
    flats = {f"r{index}": {f"k{key}": str(int(generator.integers(0, 2 if key % 3 else 1)))
                           for key in range(12) if key % 3 == 0 or generator.random() < 0.9} for index in range(30)}
    for label, flat in flats.items():
        flat["almost"] = "1" if label == "r0" else "0"  # one run differs: the key differs
    infos = [listing.RunInfo(loading.RunEntry(Path(label), label)) for label in flats]
    naive_order = list(dict.fromkeys(key for flat in flats.values() for key in flat))
    naive = [key for key in naive_order if len({flat.get(key, runtable.MISSING) for flat in flats.values()}) > 1]
    assert runtable.config_keys(infos, flats=flats) == naive and 0 < len(naive) < len(naive_order)
    assert runtable.config_keys(infos, all_config=True, flats=flats) == naive_order
