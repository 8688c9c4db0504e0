"""The Runs page as in W&B: metric columns, a numeric filter that drives every view, grouped rows
with intervals only for 3 or more seeds, every producer by default, a config diff without damaged runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from app_helpers import assert_clean, find_view, markdown_tables, open_app, view_table, visit

from apps.data import loading


def _best_accuracy(root: Path, label: str) -> float:
    """A run's best evaluated accuracy, read by hand from its files."""
    run = loading.load_run(root / label)
    return max(record["metrics"]["accuracy"] for record in run.evals)


def test_a_numeric_filter_on_a_metric_column_drives_the_charts(seeds_root: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    labels = [f"{method}/seed{seed}" for method in ("grpo", "prompt_gdro") for seed in range(3)]
    best = {label: _best_accuracy(seeds_root, label) for label in labels}
    threshold = float(np.median(list(best.values())))
    expected = [label for label in labels if best[label] > threshold]
    assert 0 < len(expected) < len(labels)
    app = visit(open_app(monkeypatch, seeds_root), "runs")
    app.text_input(key="runs-where-input").input(f"accuracy (best) > {threshold!r}").run()
    assert_clean(app)
    header, *rows = markdown_tables(app)[0]
    assert "accuracy (best)" in header, "the filter's column is added to the table"
    assert sorted(row[header.index("run")] for row in rows) == expected
    assert app.query_params.get("where") in (f"accuracy (best) > {threshold!r}", [f"accuracy (best) > {threshold!r}"])
    app = visit(app, "compare")
    assert_clean(app)
    assert sorted(app.multiselect(key="compare-runs").value) == expected, "Compare shows the runs the filter keeps"
    chart, view = find_view(app, "mean_success")
    drawn = set(view_table(chart, view).column("run").to_pylist())
    names = app.session_state["_gdro_selection"].names
    assert drawn == {names[label] for label in expected}
    assert app.session_state["run"] in expected, "the per-run pages' Run is one the filter keeps"
    app = visit(app, "study")
    assert sorted(app.multiselect(key="study-runs").value) == expected


def test_a_link_with_a_filter_opens_every_page_on_its_runs(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    finals = {label: [record["metrics"]["worst_group_accuracy"] for record in loading.load_run(seeds_root / label).evals][-1]
              for label in (f"{method}/seed{seed}" for method in ("grpo", "prompt_gdro") for seed in range(3))}
    lowest = min(finals[f"prompt_gdro/seed{seed}"] for seed in range(3))
    expected = sorted(label for label, value in finals.items() if lowest < value < 2 and label.startswith("prompt_gdro"))
    assert len(expected) == 2
    where = f"{lowest!r} < worst_group_accuracy < 2 and method == prompt_gdro"
    app = open_app(monkeypatch, seeds_root, view="traveling_wave", query={"where": where})
    assert_clean(app)
    assert sorted(app.session_state["_gdro_selection"].picked) == expected
    assert app.session_state["run"] in expected, "the per-run page shows a run the filter keeps"
    app = visit(app, "compare")
    assert sorted(app.multiselect(key="compare-runs").value) == expected


def test_ticked_rows_are_narrowed_by_the_filter(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, seeds_root, view="runs", query={"pick": ["grpo/seed0", "prompt_gdro/seed1"]})
    app.text_input(key="runs-where-input").input("method == prompt_gdro").run()
    assert app.session_state["_gdro_selection"].picked == ("prompt_gdro/seed1",)
    app.text_input(key="runs-where-input").input("").run()
    assert app.session_state["_gdro_selection"].picked == ("grpo/seed0", "prompt_gdro/seed1")


def test_added_columns_and_grouped_rows(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "runs")
    app.selectbox(key="runs-col-key").select("worst_group_accuracy")
    app.selectbox(key="runs-col-stat").select("last").run()
    app.number_input(key="runs-col-k").set_value(2).run()
    app.button(key="runs-col-add").click().run()
    assert_clean(app)
    header, *rows = markdown_tables(app)[0]
    column = "worst_group_accuracy (mean of last 2)"
    assert column in header and app.query_params.get("cols") in (column, [column])
    for row in rows:
        run = loading.load_run(seeds_root / row[header.index("run")])
        values = [record["metrics"]["worst_group_accuracy"] for record in run.evals][-2:]
        assert float(row[header.index(column)]) == pytest.approx(np.mean(values), rel=1e-3)
    offered = app.selectbox(key="runs-col-key").options
    assert "mean_success" in offered and "accuracy" in offered
    app.selectbox(key="runs-group-by").select("method").run()
    assert_clean(app)
    frame = app.dataframe[0].value
    assert list(frame["method"]) == ["grpo", "prompt_gdro"] and list(frame["n"]) == [3, 3]
    assert all(text.startswith("[") for text in frame[f"{column} 95% interval"]), "3 seeds: an interval"


def test_a_two_seed_group_shows_no_interval_in_the_run_table(lr_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, lr_root, query={"cols": "mean_success (final)"}), "runs")
    app.selectbox(key="runs-group-by").select("group").run()
    assert_clean(app)
    frame = app.dataframe[0].value
    assert set(frame["n"]) == {2} and set(frame["mean_success (final) 95% interval"]) == {""}


def test_the_study_final_table_prints_no_interval_for_two_seeds(lr_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, lr_root), "study")
    assert_clean(app)
    table = next(frame.value for frame in app.dataframe if "seeds" in frame.value)
    assert set(table["seeds"]) == {2}
    assert not any("[" in str(cell) for cell in table["mean_success"]) and \
        all(str(cell).endswith("(2 seeds)") for cell in table["mean_success"])


def test_every_producer_is_shown_by_default(seeds_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import shutil

    root = tmp_path / "root"
    shutil.copytree(seeds_root, root)
    for seed in range(2):  # two runs of another producer: the simulator's 6 outnumber them
        meta_file = root / "grpo" / f"seed{seed}" / "meta.json"
        meta = json.loads(meta_file.read_text())
        meta_file.write_text(json.dumps({**meta, "producer": "gdro train"}))
    app = visit(open_app(monkeypatch, root), "runs")
    assert_clean(app)
    assert any("6 of 6 runs shown" in element.value for element in app.caption)
    header, *rows = markdown_tables(app)[0]
    assert {row[header.index("producer")] for row in rows} == {"gdro train", "tests/synthetic"}


def test_a_damaged_run_is_never_the_diffs_default_nor_a_group_member(seeds_root: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(seeds_root, root)
    steps = root / "grpo" / "seed0" / "steps.jsonl"
    steps.write_bytes(steps.read_bytes()[:-40])  # a cut last line: damaged
    app = visit(open_app(monkeypatch, root), "runs")
    damaged = set(app.session_state["_gdro_selection"].damaged)
    assert damaged == {"grpo/seed0"}
    assert {app.selectbox(key="diff-a").value, app.selectbox(key="diff-b").value}.isdisjoint(damaged)
    app.selectbox(key="runs-group-by").select("method").run()
    frame = app.dataframe[0].value
    assert dict(zip(frame["method"], frame["n"])) == {"grpo": 2, "prompt_gdro": 3}, "a damaged run is no group member"
    assert any("1 damaged run left out" in element.value for element in app.caption)


def test_an_empty_folder_in_the_root_is_listed_as_empty(seeds_root: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(seeds_root, root)
    (root / "crashed" / "seed0").mkdir(parents=True)
    (root / "grpo" / "seed0" / "snapshots").mkdir(exist_ok=True)  # inside a run: not a folder of runs
    app = visit(open_app(monkeypatch, root), "runs")
    assert_clean(app)
    notes = [element.value for element in app.info if "empty folder" in element.value]
    assert len(notes) == 1 and "`crashed/seed0`" in notes[0] and notes[0].startswith("1 empty folder"), notes


def test_a_scalar_logged_mid_run_is_offered_once_the_runs_are_read(seeds_root: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import shutil

    root = tmp_path / "root"
    shutil.copytree(seeds_root, root)
    steps = root / "grpo" / "seed1" / "steps.jsonl"
    lines = steps.read_text().splitlines()
    record = json.loads(lines[5])
    record["scalars"]["time/eval"] = 2.5  # logged on one step only: not in the last line
    lines[5] = json.dumps(record)
    steps.write_text("\n".join(lines) + "\n")
    app = visit(open_app(monkeypatch, root), "runs")
    assert "time/eval" not in app.selectbox(key="runs-col-key").options, "from the last lines only, before any read"
    app.text_input(key="runs-where-input").input("time/eval (max) > 2").run()
    assert_clean(app)
    header, *rows = markdown_tables(app)[0]
    assert [row[header.index("run")] for row in rows] == ["grpo/seed1"] and "time/eval (max)" in header
    app = visit(open_app(monkeypatch, root, query={"cols": "mean_success (final)"}), "runs")
    assert "time/eval" in app.selectbox(key="runs-col-key").options
