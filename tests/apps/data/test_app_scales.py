"""Honest scales: bands clipped to a metric's range, axes that do not turn noise into a cliff,
colour scales anchored where the quantity has a natural scale, metric kinds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from apps.data import scales, study
from gdro_lab.runformat.runlog import RunData


def _run(name: str, values: list[float], num_bins: int = 10) -> RunData:
    steps = np.arange(len(values))
    return RunData(Path(name), {"num_bins": num_bins}, {"method": "m", "seed": name}, steps,
                   {"mean_success": np.array(values, dtype=float), "effective_support": np.array(values) * 10,
                    "lead_lag_gap": np.array(values) - 0.5}, {})


def test_seed_bands_of_a_rate_stay_in_zero_one() -> None:
    seeds = {"a": [0.05, 0.9, 0.98], "b": [0.6, 0.1, 0.99]}
    methods = study.group_by_method({name: _run(name, values) for name, values in seeds.items()})
    frame = study.band_frame(methods, "mean_success", min_seeds=2)  # the app draws none for 2 seeds
    values_TS = np.array(list(seeds.values())).T
    half = stats.t.ppf(0.975, 1) * values_TS.std(axis=1, ddof=1) / np.sqrt(2)  # scipy's t, by hand
    raw_lo, raw_hi = values_TS.mean(axis=1) - half, values_TS.mean(axis=1) + half
    assert (raw_lo < 0).any() and (raw_hi > 1).any(), "the unclipped interval leaves [0, 1]: the case under test"
    assert frame["lo"].to_numpy() == pytest.approx(np.clip(raw_lo, 0, 1))
    assert frame["hi"].to_numpy() == pytest.approx(np.clip(raw_hi, 0, 1))
    gap = study.band_frame(methods, "lead_lag_gap", min_seeds=2)
    assert (gap["lo"] < -0.5).any(), "a metric without a natural range is not clipped"


def test_final_table_intervals_are_clipped_too() -> None:
    methods = study.group_by_method({"a": _run("a", [0.0, 0.02]), "b": _run("b", [0.0, 0.95]),
                                     "c": _run("c", [0.0, 0.01])})
    table = study.final_table(methods, ["mean_success"])
    assert table["seeds"].iloc[0] == 3
    assert table["mean_success lo"].iloc[0] == 0.0 and table["mean_success hi"].iloc[0] <= 1.0


def test_effective_support_near_its_top_is_not_a_cliff() -> None:
    values = np.array([10, 10, 10, 9.999])
    low, high = scales.y_domain(values, scales.natural_range("effective_support", 10, values))
    assert high == 10.0 and high - low >= 0.1 * 9, "at least a tenth of [1, 10]: 0.001 is a flat line"
    assert (values.max() - values.min()) / (high - low) < 0.01


def test_close_rates_are_not_opposite_ends_of_the_axis() -> None:
    values = np.array([0.099, 0.106])
    low, high = scales.y_domain(values, (0.0, 1.0))
    assert low >= 0.0 and high - low >= 0.1
    assert (0.106 - 0.099) / (high - low) < 0.1
    wide = np.array([0.2, 0.8])
    low, high = scales.y_domain(wide, (0.0, 1.0))
    assert low <= 0.2 and high >= 0.8 and 0.0 <= low and high <= 1.0, "a spread wider than the floor is kept, padded"


def test_unbounded_metric_gets_a_span_relative_to_its_size() -> None:
    low, high = scales.y_domain(np.array([5.0, 5.0001]))
    assert high - low >= 0.5 and low < 5.0 < 5.0001 < high
    assert scales.y_domain(np.array([np.nan])) is None
    low, high = scales.y_domain(np.array([0.0, 3e-14, -2e-14]))
    assert high - low >= 0.1, "float noise around 0 is a flat line at 0, not a chart-filling wiggle"


def test_heatmap_colour_scales_are_anchored() -> None:
    assert scales.colour_domain("weight", np.array([0.099, 0.106])) == [0.0, 1.0]
    assert scales.colour_domain("share", np.array([0.3])) == [0.0, 1.0]
    assert scales.colour_domain("reward", np.array([0.1, 0.2])) == [-1.0, 1.0]
    assert scales.colour_domain("rollouts", np.array([3.0, 5.0]), (2.0, 12.0)) == [2.0, 12.0]
    assert scales.colour_domain("multiplier", np.array([0.8, 1.6])) == [0.0, 1.6]
    assert scales.colour_domain("signal", np.array([-0.1, 0.1])) is None, "no natural scale: min-max"


@pytest.mark.parametrize("name, values, kind", [
    ("test/worst_group_pass@8", [0.3], "rate"), ("accuracy", [0.5], "rate"), ("pooled/mean@8", [0.4], "rate"),
    ("reward/timeouts", [0.0, 0.0], "count"), ("reward/errors", [1.0], "count"), ("rollouts_total", [1e6], "count"),
    ("time/controllers_share", [0.01], "rate"), ("time/generate", [6.0], "seconds"), ("lead_lag_gap", [-0.2], "other"),
    ("accuracy", [1.5], "other")])
def test_metric_kinds(name: str, values: list[float], kind: str) -> None:
    assert scales.metric_kind(name, values) == kind


def test_natural_ranges() -> None:
    assert scales.natural_range("mean_success") == (0.0, 1.0)
    assert scales.natural_range("effective_support", 10, [9.5]) == (1.0, 10.0)
    assert scales.natural_range("effective_support", 10, [24.0]) == (1.0, math.inf), "a support over more than bins"
    assert scales.natural_range("se_reduction_pct") == (-math.inf, 100.0)
    assert scales.natural_range("time/step", values=[3.0]) == (0.0, math.inf)


def test_a_constant_heatmap_field_gets_a_scale_centred_on_its_value() -> None:
    uniform = np.full((30, 10), 0.1)  # GRPO's weights: uniform, never updated
    assert scales.heatmap_domain("weight", uniform) == pytest.approx([0.05, 0.15]), "not the meaningless -0.4-0.6"
    assert scales.heatmap_domain("weight", np.full(5, 0.99)) == pytest.approx([0.9, 1.0]), "inside the natural range"
    assert scales.heatmap_domain("signal", np.full(5, 20.0)) == pytest.approx([19.0, 21.0]), "no natural range: ±5%"
    assert scales.heatmap_domain("rollouts", np.full(5, 4.0), "auto", (2.0, 12.0)) == pytest.approx([3.5, 4.5])
    varying = np.array([0.09, 0.1, 0.11])
    assert scales.heatmap_domain("weight", varying) == pytest.approx([0.09, 0.11]), "auto: the values' range"
    assert scales.heatmap_domain("weight", varying, "natural") == [0.0, 1.0]
    assert scales.heatmap_domain("weight", np.array([np.nan])) is None
