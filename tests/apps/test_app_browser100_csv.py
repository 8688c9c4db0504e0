"""Per view, the CSV download follows every selector of the view changed from its default, in
headless Chromium at the generated root of 117 run candidates (``root100``).

Each test opens a view on a run that is not the default one, changes every selector of the
view (its own select boxes, multiselects and sliders, and the sidebar's baseline and chart
options: EMA smoothing, log y-scale, the wall clock as x axis, the heatmaps' colour range),
downloads the chart's CSV and checks (a) its values against the data recomputed here with
numpy from the runs' own files (steps.jsonl, eval.jsonl, config.json) for the choices made,
and (b) that the chart drawn names the same field. Traveling wave and Compare are checked in
``test_app_browser100.py``; Runs and Config draw no chart and offer no chart CSV. The sidebar's
runs folder and live refresh are no chart selectors and stay as they are; *Group runs by* is
changed on Study, the one view it regroups (elsewhere it only names runs).

The session's one server on the root (``app100_url``) serves every test of this module; each test opens its own
browser session. Skipped without Debian's chromium or the playwright package, like the other browser tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import numpy as np
import pytest
from browser100 import (add_option, assert_close, assert_in_url, bins, chart_options, choose, choose_baseline,
                        column, config, download, elapsed, ema, evals, logged_steps, main_text, move_slider, new_page,
                        open_view, query, rows_of, scalar, steps, svg_texts, wait_for_svg_text)
from root100 import Root100

import browser

pytestmark = browser.pytest_marks()

#: Trainer-layout runs of the root: the ones that log step times (the wall clock) and agreed evaluation names.
TRAIN_PROMPT, TRAIN_GRPO = "train/prompt_gdro-tiny-s0", "train/grpo-tiny-s0"
TRAIN_ROLLOUT = "train/rollout_gdro-tiny-s0"


@pytest.fixture(scope="module")
def app_url(app100_url: str) -> str:
    """The session's one server on ``root100`` (``app100_url``, tests/apps/conftest.py)."""
    return app100_url


@pytest.fixture
def page() -> Iterator[Any]:
    with new_page() as opened:
        yield opened


def _per_run_view(page: Any, url: str, run: str, title: str, baseline: str, charts: int = 1,
                  colours: bool = False) -> float:
    """Open a per-run view on ``run`` (not the default run), pick the baseline (default: none) and
    change the chart options; returns the EMA weight."""
    open_view(page, f"{url}?run={quote(run, safe='')}", title, charts)
    choose_baseline(page, baseline)
    return chart_options(page, colours=colours)


def _clocked(rows: list[dict[str, str]], chart: str, series: str, records: list[dict[str, Any]],
             keep: np.ndarray | None = None) -> list[dict[str, str]]:
    """The rows of one series of a chart on the wall clock, in step order; checks their clock."""
    chosen = rows_of(rows, chart, order="wall_clock_(s)", series=series)
    clock = elapsed(records)
    assert_close(column(chosen, "wall_clock_(s)"), clock if keep is None else clock[keep], f"{chart} {series}: clock")
    return chosen


def test_lead_lag_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """Lead-lag has no selector of its own: its selectors are the sidebar's run, baseline and chart
    options. The gap and both mean bin indices (Eq. 32) are recomputed from the share and weight bins."""
    weight = _per_run_view(page, f"{app_url}/lead-lag", TRAIN_PROMPT, "Lead-lag", "train: grpo · seed 0")
    rows = download(page)
    text = main_text(page)
    index_G = np.arange(10.0)
    for label in (TRAIN_PROMPT, TRAIN_GRPO):
        records = steps(root100.root, label)
        share_TG, weight_TG = np.nan_to_num(bins(records, "share")), np.nan_to_num(bins(records, "weight"))
        keep = (share_TG.sum(axis=1) > 0) & (weight_TG.sum(axis=1) > 0)
        mu_weight = (weight_TG @ index_G / weight_TG.sum(axis=1))[keep]
        mu_data = (share_TG @ index_G / share_TG.sum(axis=1))[keep]
        means = f"{label}: Mean bin index under weights and under data"
        for chart, series, expected in ((f"{label}: Lead-lag gap Δμ(t)", "Δμ = μ_weight − μ_data", mu_weight - mu_data),
                                        (means, "μ_weight (under weights)", mu_weight),
                                        (means, "μ_data (under data)", mu_data)):
            chosen = _clocked(rows, chart, series, records, keep)
            assert_close(column(chosen, "raw"), expected, f"{chart} {series}")
            assert_close(column(chosen, "value"), ema(expected, weight), f"{chart} {series}: EMA {weight}")
        gap = mu_weight - mu_data
        assert f"Δμ at the start\n\n{gap[0]:+.3f}" in text and f"Δμ at the end\n\n{gap[-1]:+.3f}" in text
    assert {"Lead-lag gap Δμ(t)", "Mean bin index under weights and under data"} <= set(svg_texts(page))
    assert set(svg_texts(page, "axis-title")) >= {"wall clock (s)", "Δμ (bins)"}


def test_rollout_budget_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """The step sliders of the run and the baseline one logged step back, the frontier's "bins
    from" one bin up, the baseline and every chart option (the heatmaps' natural colour range
    too): the heatmaps' rollouts, the frontier at the chosen step and the split at the chosen bin,
    the shadow price μ and the realized mean budget, recomputed from the runs' bins and scalars."""
    weight = _per_run_view(page, f"{app_url}/rollout-budget", TRAIN_ROLLOUT, "Rollout budget",
                           "train: prompt_gdro · seed 0", charts=3, colours=True)
    wait_for_svg_text(page, "rollouts · natural", "legend-title")
    for count, key in enumerate(("run", "baseline"), start=1):
        assert move_slider(page, f"{key}-step", ["ArrowLeft"],
                           lambda: wait_for_svg_text(page, "Budget frontier at step 5", count=count)) == "5"
        assert move_slider(page, f"{key}-frontier", ["ArrowRight"],
                           lambda: page.get_by_text("Prompts in bins ≥ 6").nth(count - 1).wait_for()) == "6"
    assert_in_url(page, {"run-step": "5", "run-frontier": "6", "baseline-step": "5", "baseline-frontier": "6"})
    heatmaps, run_frontier, base_frontier, series = (download(page, index) for index in range(4))
    text = main_text(page)
    for label, frontier in ((TRAIN_ROLLOUT, run_frontier), (TRAIN_PROMPT, base_frontier)):
        records, settings = steps(root100.root, label), config(root100.root, label)["method"]
        rollouts_TG = bins(records, "rollouts")
        cells = rows_of(heatmaps, f"{Path(label).name} rollouts")
        assert_close(column(cells, "step"), np.repeat(logged_steps(records), 10), f"{label}: heatmap steps")
        assert_close(column(cells, "value"), rollouts_TG.reshape(-1), f"{label}: heatmap rollouts")
        counts_G = np.nan_to_num(bins(records, "count")[-2])  # the slider moved back one logged step
        spent_G = counts_G * np.nan_to_num(rollouts_TG[-2])
        prompts_G, spent_share_G = counts_G / counts_G.sum(), spent_G / spent_G.sum()
        bars = rows_of(frontier, f"Budget frontier at step {records[-2]['step']}", order="bin")
        assert_close(column(bars, "prompt_share"), prompts_G, f"{label}: prompt share")
        assert_close(column(bars, "rollout_share"), spent_share_G, f"{label}: rollout share")
        multiple_G = np.full(10, np.nan)
        multiple_G[prompts_G > 0] = spent_share_G[prompts_G > 0] / prompts_G[prompts_G > 0]
        assert_close(column(bars, "multiple"), multiple_G, f"{label}: multiple")
        assert f"Prompts in bins ≥ 6\n\n{100 * prompts_G[6:].sum():.1f}%" in text
        assert f"Rollouts spent on bins ≥ 6\n\n{100 * spent_share_G[6:].sum():.1f}%" in text
        budget = f"{label}: Mean rollouts per prompt"
        for name, logged in (("realized mean", scalar(records, "mean_rollouts")),
                             ("budget n̄", np.full(len(records), float(settings["n_bar"])))):
            chosen = _clocked(series, budget, name, records)
            assert_close(column(chosen, "value"), logged, f"{budget} {name}: never smoothed")
    records = steps(root100.root, TRAIN_ROLLOUT)
    chosen = _clocked(series, f"{TRAIN_ROLLOUT}: Shadow price μ (Eq. 21)", "μ", records)
    assert_close(column(chosen, "raw"), scalar(records, "mu"), "μ")
    assert_close(column(chosen, "value"), ema(scalar(records, "mu"), weight), f"μ: EMA {weight}")
    assert not rows_of(series, f"{TRAIN_PROMPT}: Shadow price μ (Eq. 21)"), "Prompt-GDRO logs no μ"
    settings = config(root100.root, TRAIN_ROLLOUT)["method"]
    assert f"rollouts · natural {settings['n_min']:g}–{settings['n_max']:g}" in svg_texts(page, "legend-title")
    assert svg_texts(page).count(f"Budget frontier at step {records[-2]['step']}") == 2


def test_se_proxy_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """SE proxy has no selector of its own: the sidebar's run, baseline and chart options. The three
    WSE curves and both reductions are the trainer runs' logged ``se_*`` scalars (smoothed, on the
    wall clock); the mean reductions shown are their means."""
    weight = _per_run_view(page, f"{app_url}/se-proxy", TRAIN_ROLLOUT, "SE proxy", "train: grpo · seed 0")
    rows = download(page)
    text = main_text(page)
    names = (("Weighted SE proxy WSE(t)", (("actual", "se_actual"), ("square-root optimum", "se_sqrt"),
                                           ("uniform n̄ (dashed, on top)", "se_uniform"))),
             ("Reduction against uniform n̄", (("actual vs uniform", "se_reduction_pct"),
                                              ("optimum vs uniform", "se_sqrt_reduction_pct"))))
    for label in (TRAIN_ROLLOUT, TRAIN_GRPO):
        records = steps(root100.root, label)
        for title, pairs in names:
            for series, name in pairs:
                chosen = _clocked(rows, f"{label}: {title}", series, records)
                assert_close(column(chosen, "raw"), scalar(records, name), f"{label} {series}")
                assert_close(column(chosen, "value"), ema(scalar(records, name), weight), f"{label} {series}: EMA")
        assert f"Mean reduction, actual\n\n{np.mean(scalar(records, 'se_reduction_pct')):.1f}%" in text
        assert f"Mean reduction, √ optimum\n\n{np.mean(scalar(records, 'se_sqrt_reduction_pct')):.1f}%" in text
    assert {"Weighted SE proxy WSE(t)", "Reduction against uniform n̄"} <= set(svg_texts(page))


def _eval_table(root: Path, label: str) -> dict[str, dict[int, float]]:
    """eval.jsonl as metric -> {step: value}."""
    table: dict[str, dict[int, float]] = {}
    for record in evals(root, label):
        for name, value in record["metrics"].items():
            table.setdefault(name, {})[int(record["step"])] = float(value)
    return table


def _eval_rows(table: dict[str, dict[int, float]], name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, value, lo, hi) of one evaluation metric (NaN bounds when not logged)."""
    steps_E = np.array(sorted(table[name]), dtype=float)
    values = [np.array([table.get(f"{name}{suffix}", {}).get(int(step), np.nan) for step in steps_E])
              for suffix in ("", "_lo", "_hi")]
    return steps_E, values[0], values[1], values[2]


def test_outcomes_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """"More evaluation metrics" of the run and of the baseline (default: none), the baseline (a
    simulator run: other evaluation names, and no step times, so it stays on steps) and the chart
    options: training success and support recomputed from the scalars, the evaluation charts
    and the extra metrics from eval.jsonl with their logged bounds."""
    baseline = "study/runs/rollout_gdro/lr1/seed2"
    weight = _per_run_view(page, f"{app_url}/outcomes", TRAIN_PROMPT, "Outcomes", "study: rollout_gdro lr×1 · seed 2")
    add_option(page, "run-eval-more", "pooled/mean@8", lambda: wait_for_svg_text(page, "Evaluation: pooled/mean@8"))
    add_option(page, "baseline-eval-more", "memorisation_gap",
               lambda: wait_for_svg_text(page, "Evaluation: memorisation_gap"))
    assert_in_url(page, {"run-eval-more": "pooled/mean@8", "baseline-eval-more": "memorisation_gap"})
    rows, run_more, base_more = (download(page, index) for index in range(3))
    for label, x in ((TRAIN_PROMPT, "wall_clock_(s)"), (baseline, "step")):
        records = steps(root100.root, label)
        x_T = elapsed(records) if x != "step" else logged_steps(records)
        for title, series, name in (("Training success: mean and worst group", "mean over prompts", "mean_success"),
                                    ("Training success: mean and worst group", "worst bin", "worst_bin_success"),
                                    ("Effective support (of 10 bins)", "exp(entropy) of bin weights",
                                     "effective_support")):
            logged = scalar(records, name)
            chosen = rows_of(rows, f"{label}: {title}", order=x, series=series)
            assert_close(column(chosen, x), x_T[np.isfinite(logged)], f"{label} {series}: {x}")
            assert_close(column(chosen, "raw"), logged[np.isfinite(logged)], f"{label} {series}")
            assert_close(column(chosen, "value"), ema(logged, weight)[np.isfinite(logged)], f"{label} {series}: EMA")
        table = _eval_table(root100.root, label)
        pass_names = sorted(name for name in table if "pass@" in name and not name.endswith(("_lo", "_hi")))
        assert pass_names
        for name in pass_names:
            steps_E, value_E, lo_E, hi_E = _eval_rows(table, name)
            chosen = rows_of(rows, f"{label}: Evaluation pass@k", order=x, series=name)
            on_x = steps_E if x == "step" else np.interp(steps_E, logged_steps(records), x_T)
            assert_close(column(chosen, x), on_x, f"{label} {name}: {x}")
            for csv_column, expected in (("value", value_E), ("lo", lo_E), ("hi", hi_E)):
                assert_close(column(chosen, csv_column), expected, f"{label} {name} {csv_column}: not smoothed")
    for label, more, name, x in ((TRAIN_PROMPT, run_more, "pooled/mean@8", "wall_clock_(s)"),
                                 (baseline, base_more, "memorisation_gap", "step")):
        steps_E, value_E, lo_E, hi_E = _eval_rows(_eval_table(root100.root, label), name)
        chosen = rows_of(more, f"Evaluation: {name}", order=x, series=name)
        records = steps(root100.root, label)
        on_x = steps_E if x == "step" else np.interp(steps_E, logged_steps(records), elapsed(records))
        for csv_column, expected in ((x, on_x), ("value", value_E), ("lo", lo_E), ("hi", hi_E)):
            assert_close(column(chosen, csv_column), expected, f"{label} {name} {csv_column}")
    assert {"Evaluation: pooled/mean@8", "Evaluation: memorisation_gap"} <= set(svg_texts(page))


def test_evaluations_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """"Groups" of the run and of the baseline (default: none), the baseline and the chart options:
    mean@k and pass@k per benchmark and summary, and the groups chosen, from eval.jsonl with their
    bounds, on the wall clock, never smoothed."""
    _per_run_view(page, f"{app_url}/evaluations", TRAIN_PROMPT, "Evaluations", "train: grpo · seed 0")
    add_option(page, "run-groups", "geometry", lambda: wait_for_svg_text(page, "mean@8 per group"))
    add_option(page, "baseline-groups", "algebra", lambda: wait_for_svg_text(page, "mean@8 per group", count=2))
    assert_in_url(page, {"run-groups": "geometry", "baseline-groups": "algebra"})
    rows, run_groups, base_groups = (download(page, index) for index in range(3))
    assert "raw" not in rows[0], "evaluations are never smoothed"
    for label, groups, group in ((TRAIN_PROMPT, run_groups, "geometry"), (TRAIN_GRPO, base_groups, "algebra")):
        records, table = steps(root100.root, label), _eval_table(root100.root, label)
        for metric in ("mean@8", "pass@8"):
            scopes = sorted({name.rsplit("/", 1)[0] for name in table if name.endswith(f"/{metric}")} - {"group"})
            scopes = [scope for scope in scopes if "/" not in scope]  # benchmarks and summaries, not groups
            chart = f"{label}: {metric} per benchmark (95% interval)"
            assert {"pooled", "math500"} <= set(scopes)
            assert {row["series"] for row in rows_of(rows, chart)} == {scope.replace("_", " ") for scope in scopes}
            for scope in scopes:
                steps_E, value_E, lo_E, hi_E = _eval_rows(table, f"{scope}/{metric}")
                chosen = rows_of(rows, chart, order="wall_clock_(s)", series=scope.replace("_", " "))
                assert_close(column(chosen, "wall_clock_(s)"), np.interp(steps_E, logged_steps(records),
                                                                         elapsed(records)), f"{label} {scope}")
                for csv_column, expected in (("value", value_E), ("lo", lo_E), ("hi", hi_E)):
                    assert_close(column(chosen, csv_column), expected, f"{label} {scope}/{metric} {csv_column}")
        steps_E, value_E, lo_E, hi_E = _eval_rows(table, f"group/{group}/mean@8")
        chosen = rows_of(groups, "mean@8 per group", order="wall_clock_(s)", series=group)
        assert {row["series"] for row in groups} == {group}, "only the group chosen"
        on_clock = np.interp(steps_E, logged_steps(records), elapsed(records))
        for csv_column, expected in (("wall_clock_(s)", on_clock), ("value", value_E), ("lo", lo_E), ("hi", hi_E)):
            assert_close(column(chosen, csv_column), expected, f"{label} group/{group} {csv_column}")
    assert svg_texts(page).count("mean@8 per group") == 2
    assert {"geometry", "algebra"} <= set(svg_texts(page, "legend-label")), "the groups chosen are drawn"


def test_step_time_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """Step time has no selector of its own: the sidebar's run, baseline and chart options. Seconds
    per phase (``other`` = time/step − the phases; stacked, never smoothed), the total and the
    throughput (smoothed), recomputed from the ``time/*`` scalars, on the wall clock."""
    weight = _per_run_view(page, f"{app_url}/step-time", TRAIN_ROLLOUT, "Step time", "train: grpo · seed 0")
    rows = download(page)
    text = main_text(page)
    for label in (TRAIN_ROLLOUT, TRAIN_GRPO):
        records = steps(root100.root, label)
        phases = sorted({name for record in records for name in record["scalars"] if name.startswith("time/")
                         and name != "time/step" and not name.endswith("_share")})
        seconds_TP = np.column_stack([np.nan_to_num(scalar(records, name)) for name in phases])
        other_T = np.nan_to_num(scalar(records, "time/step")) - seconds_TP.sum(axis=1)
        assert (other_T > 1e-9).any(), "the synthetic trainer's phases do not add up to its step: an 'other' phase"
        stacked = rows_of(rows, f"{label}: Seconds per step by phase (stacked)")
        assert {row["series"] for row in stacked} == {name.removeprefix("time/") for name in phases} | {"other"}
        for name, expected in [*zip(phases, seconds_TP.T), ("other", other_T.clip(min=0))]:
            chosen = _clocked(rows, f"{label}: Seconds per step by phase (stacked)", name.removeprefix("time/"),
                              records)
            assert_close(column(chosen, "value"), expected, f"{label} {name}: not smoothed")
        for title, series, name in (("Total step time", "time/step", "time/step"),
                                    ("Throughput", "tokens / s", "perf/tokens_per_s")):
            chosen = _clocked(rows, f"{label}: {title}", series, records)
            assert_close(column(chosen, "raw"), scalar(records, name), f"{label} {name}")
            assert_close(column(chosen, "value"), ema(scalar(records, name), weight), f"{label} {name}: EMA")
        assert f"time/controllers_share {100 * np.mean(scalar(records, 'time/controllers_share')):.2f}%" in text
    assert {"Seconds per step by phase (stacked)", "Total step time", "Throughput"} <= set(svg_texts(page))


def test_study_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """The runs (10 of the first study's 100: two learning rates of Prompt-GDRO), *Group runs by*
    ``method`` (one group of 10 seeds, not two of 5), the metrics (one that is not a default),
    the group line (median), the band (IQR) and the chart options (the x axis leaves the bands on
    steps): the median and quartiles over the 10 seeds, smoothed, recomputed from steps.jsonl."""
    labels = [f"study/runs/prompt_gdro/lr{lr}/seed{seed}" for lr in (1, 2) for seed in range(5)]
    open_view(page, f"{app_url}/study?{query('study-runs', labels)}", "Study")
    assert "study: prompt_gdro lr×1: 5 seeds" in main_text(page)
    add_option(page, "group", "method", "prompt_gdro: 10 seeds")
    add_option(page, "study-metrics", "mean_reward", "?study-metrics=mean_reward", clear=True)
    choose(page, "study-centre", "median", "lines: median over seeds")
    choose(page, "study-interval", "IQR (25–75%)", "bands: IQR (25–75%)")
    weight = chart_options(page, x_shown="Bands over seeds are drawn against steps")
    rows = download(page)
    assert {row["chart"] for row in rows} == {"mean_reward"} and {row["method"] for row in rows} == {"prompt_gdro"}
    values_TS = np.column_stack([scalar(steps(root100.root, label), "mean_reward") for label in labels])
    chosen = rows_of(rows, "mean_reward", order="step")
    assert_close(column(chosen, "step"), logged_steps(steps(root100.root, labels[0])), "steps")
    assert_close(column(chosen, "n"), np.full(len(chosen), 10.0), "seeds per step")
    assert_close(column(chosen, "raw"), np.median(values_TS, axis=1), "median")
    assert_close(column(chosen, "value"), ema(np.median(values_TS, axis=1), weight), "median: EMA")
    for csv_column, quantile in (("lo", 25), ("hi", 75)):
        assert_close(column(chosen, csv_column), ema(np.percentile(values_TS, quantile, axis=1), weight), csv_column)
    assert svg_texts(page) == ["mean_reward"] and "lines: median over seeds; bands: IQR (25–75%)" in main_text(page)
    assert svg_texts(page, "legend-label") == ["prompt_gdro"], "one group: the runs grouped by method"


def test_sweep_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    """The runs (30 picked: Prompt- and Rollout-GDRO at 3 learning rates x 5 seeds), the metric (not
    the first), the final value (the last, not the tail mean) and the chart options, which do not
    apply to a sweep's final values: per method and learning rate the mean of the runs' last
    ``worst_bin_success`` with its 95% t-interval, and each run's value on the parallel coordinates."""
    from scipy import stats

    labels = [f"study/runs/{method}/lr{lr}/seed{seed}" for method in ("prompt_gdro", "rollout_gdro")
              for lr in ("0.5", "1", "2") for seed in range(5)]
    open_view(page, f"{app_url}/sweep?{query('pick', labels)}", "Sweep", charts=2)
    assert "30 runs; swept: lr_scale" in main_text(page)
    choose(page, "sweep-metric", "worst_bin_success", "?sweep-metric=worst_bin_success")
    wait_for_svg_text(page, "worst_bin_success (tail mean) against lr_scale")
    choose(page, "sweep-final", "last value", "?sweep-final=last value")
    wait_for_svg_text(page, "worst_bin_success (last value) against lr_scale")
    chart_options(page, x_shown="?x=wall clock")
    parallel, lines = download(page, 0), download(page, 1)  # the parallel coordinates come first
    finals = {}
    for label in labels:
        logged = scalar(steps(root100.root, label), "worst_bin_success")
        finals[label] = logged[np.isfinite(logged)][-1]
    for method in ("prompt_gdro", "rollout_gdro"):
        chosen = rows_of(lines, "worst_bin_success (last value) against lr_scale", order="value_of_key", method=method)
        assert_close(column(chosen, "value_of_key"), np.array([0.5, 1.0, 2.0]), f"{method}: lr scales")
        values_LS = np.array([[finals[f"study/runs/{method}/lr{lr}/seed{seed}"] for seed in range(5)]
                              for lr in ("0.5", "1", "2")])
        half_L = stats.t.ppf(0.975, 4) * values_LS.std(axis=1, ddof=1) / np.sqrt(5)
        assert_close(column(chosen, "value"), values_LS.mean(axis=1), f"{method}: mean of the last values")
        assert_close(column(chosen, "lo"), values_LS.mean(axis=1) - half_L, f"{method}: lo")
        assert_close(column(chosen, "hi"), values_LS.mean(axis=1) + half_L, f"{method}: hi")
        assert_close(column(chosen, "n"), np.full(3, 5.0), f"{method}: runs")
    metric_axis = rows_of(parallel, "parallel coordinates", order="raw", axis="worst_bin_success")
    expected = np.sort(np.array(list(finals.values())))
    assert_close(column(metric_axis, "raw"), expected, "each run's last value")
    assert_close(column(metric_axis, "position"), (expected - expected.min()) / (expected.max() - expected.min()),
                 "positions: min to max")
    drawn = set(svg_texts(page))
    assert {"worst_bin_success (last value) against lr_scale", "Parallel coordinates of the sweep"} <= drawn
