"""Charts of many lines (more than ``LEGEND_MAX``, e.g. Compare with 50 runs picked): each line is drawn
with a bounded number of points, its first and last and each stretch's lowest and highest value
(``apps.views.interactive.bucket_extremes``), while the chart's CSV keeps every logged value; and
Compare sends chart data for the picked runs only, however many runs the root holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from app_helpers import all_views, assert_clean, open_app, view_table, view_title
from gdro_app_synthetic import write_synthetic_run

from apps.data import loading, results
from apps.views import interactive, uicharts


def lines_frame(lines: int, steps: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"step": np.tile(np.arange(steps, dtype=float) * 5, lines),
                          "run": np.repeat([f"run {index}" for index in range(lines)], steps),
                          "value": rng.normal(size=lines * steps)})
    return frame.sample(frac=1.0, random_state=1).reset_index(drop=True)  # rows in no particular order


def test_each_line_keeps_its_ends_and_each_stretchs_extremes_as_logged() -> None:
    frame = lines_frame(lines=20, steps=80)
    frame.loc[frame["run"] == "run 3", "value"] = np.nan  # a line with no value at all
    reduced, longest = interactive.bucket_extremes(frame, 30, "run")
    assert longest == 80
    merged = reduced.merge(frame, on=["step", "run"], suffixes=("", "_logged"))
    assert len(merged) == len(reduced) and merged["value"].equals(merged["value_logged"]), "logged values, unchanged"
    for name, line in frame.groupby("run"):
        line = line.sort_values("step").reset_index(drop=True)
        kept = set(reduced.loc[reduced["run"] == name, "step"])
        assert len(kept) <= 30
        assert {line["step"].iloc[0], line["step"].iloc[-1]} <= kept, f"{name}: first and last step kept"
        edges = np.linspace(1, len(line) - 1, (30 - 2) // 2 + 1).astype(int)
        for start, stop in zip(edges[:-1], edges[1:]):
            stretch = line.iloc[start:stop]
            if stretch["value"].notna().any():  # the lowest and the highest of the stretch, by brute force
                assert stretch.loc[stretch["value"].idxmin(), "step"] in kept
                assert stretch.loc[stretch["value"].idxmax(), "step"] in kept
    short = lines_frame(lines=20, steps=30)
    same, longest = interactive.bucket_extremes(short, 30, "run")
    assert same.equals(short) and longest == 0, "short lines are drawn whole"
    assert interactive.line_points(50, 325) == interactive.MANY_LINES_POINTS // 50
    assert interactive.line_points(1000, 325) == interactive.MIN_LINE_POINTS


def plain_extreme_rows(values_NC: np.ndarray, limit: int) -> np.ndarray:
    """The rule of ``interactive._extreme_rows`` as a loop over stretches and columns (the reference)."""
    count = values_NC.shape[0]
    if count <= limit:
        return np.arange(count)
    kept = [0, count - 1]
    edges = np.linspace(1, count - 1, max(1, (limit - 2) // 2) + 1).astype(int)
    for start, stop in zip(edges[:-1], edges[1:]):
        for column in range(values_NC.shape[1]):
            part = values_NC[start:stop, column]
            finite = np.isfinite(part)
            if stop <= start:
                continue
            if not finite.any():
                kept.append(start)
                continue
            kept.append(start + int(np.nanargmin(np.where(finite, part, np.nan))))
            kept.append(start + int(np.nanargmax(np.where(finite, part, np.nan))))
    return np.unique(kept)


@settings(max_examples=300, deadline=None)
@given(values=hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=90),
                         elements=st.sampled_from([0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf])
                         | st.floats(-5, 5)),
       limit=st.integers(3, 40))
def test_the_kept_rows_equal_the_plain_loop_over_stretches(values: np.ndarray, limit: int) -> None:
    """Ties (the first row of the extreme), stretches with no finite value, empty stretches (more
    stretches than rows), infinities and several columns: the same rows as the loop."""
    assert np.array_equal(interactive._extreme_rows(values, limit), plain_extreme_rows(values, limit))


@pytest.fixture(scope="module")
def many_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    """A root of 20 runs of 120 steps: 14 to pick (more than LEGEND_MAX) and 6 others."""
    root = tmp_path_factory.mktemp("many-lines")
    picked = [f"picked/seed{seed}" for seed in range(interactive.LEGEND_MAX + 2)]
    others = [f"others/seed{seed}" for seed in range(6)]
    for seed, label in enumerate([*picked, *others]):
        write_synthetic_run(root / label, steps=120, num_bins=3, seed=seed, eval_every=40)
    return root, picked, others


def test_compare_draws_few_points_per_line_sends_only_the_picked_runs_and_exports_every_step(
        many_root: tuple[Path, list[str], list[str]], monkeypatch: pytest.MonkeyPatch,
        exported: dict[str, pd.DataFrame]) -> None:
    root, picked, others = many_root
    app = open_app(monkeypatch, root, view="compare", query={"pick": picked})
    assert_clean(app)
    runs = {label: loading.load_run(root / label) for label in picked}
    checked = 0
    for chart, view in all_views(app):
        metric = view_title(view)
        if metric.startswith("Evaluation"):
            continue
        table = view_table(chart, view).to_pandas()
        lines = table.groupby("line").size()
        assert len(lines) == len(picked), "one line per picked run, none for the others"
        assert not set(table["line"]) & {name for label in others for name in (label, label.split("/")[-1])}
        limit = interactive.line_points(len(picked), uicharts.CONCAT_WIDTH[2])
        assert lines.max() <= limit, f"{view['title']}: at most {limit} points a line"
        assert "points a line drawn" in view["title"]["subtitle"]
        logged = np.sort(np.concatenate([run.scalars[metric][np.isfinite(run.scalars[metric])]
                                         for run in runs.values()]))
        csv = exported[metric]["value"].dropna().to_numpy(dtype=float)
        assert csv.size == logged.size and np.allclose(np.sort(csv), logged, rtol=1e-9, atol=0), \
            f"{metric}: the CSV has every logged value of the picked runs, and only theirs"
        checked += 1
    assert checked >= 3


def test_the_evaluation_frame_of_many_runs_is_each_runs_own(many_root: tuple[Path, list[str], list[str]]) -> None:
    root, picked, _ = many_root
    evals = {label: results.evals_frame(loading.load_run(root / label)) for label in picked}
    for label, frame in evals.items():  # an interval for accuracy, at every step but the last
        accuracy = frame[frame["metric"] == "accuracy"].iloc[:-1]
        bounds = [accuracy.assign(metric=f"accuracy_{bound}", value=accuracy["value"] + shift)
                  for bound, shift in (("lo", -0.1), ("hi", 0.1))]
        evals[label] = pd.concat([frame, *bounds], ignore_index=True)
    first = next(iter(evals))  # a repeated record at a step, with its bound: the last one counts, as per run
    extra = evals[first].tail(3).assign(value=lambda rows: rows["value"] + 0.5)
    evals[first] = pd.concat([evals[first], extra], ignore_index=True)
    evals[picked[1]] = evals[picked[1]].iloc[0:0]  # a run without evaluations
    names = {label: f"name of {label}" for label in picked}
    for metric in sorted(set(pd.concat(list(evals.values()))["metric"])):
        expected = pd.concat([results.with_bounds(frame, [metric], series="run").assign(run=names[label])
                              for label, frame in evals.items()], ignore_index=True)
        got = results.bounds_by_run(evals, metric, names)
        if metric == "accuracy":
            assert got["lo"].notna().sum() > 0 and got["lo"].isna().sum() > 0, "bounds where logged, NaN elsewhere"
        assert list(got.columns) == ["step", "run", "value", "lo", "hi"]
        pd.testing.assert_frame_equal(got.astype({"step": float}).reset_index(drop=True),
                                      expected.astype({"step": float, "value": float, "lo": float, "hi": float})
                                      .reset_index(drop=True), check_dtype=False)
