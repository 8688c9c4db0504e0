"""studykit.stats against scipy and naive loops; studykit.tables formatting."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps

from studykit.stats import bootstrap_ci, excludes_zero, mean_ci, paired_ci, relative_gain_ci
from studykit.tables import fmt, markdown_table, write_json


def test_mean_ci_is_scipys_t_interval() -> None:
    x = np.array([0.31, 0.35, 0.29, 0.4, 0.33])
    mean, half = mean_ci(x)
    low, high = sps.t.interval(0.95, df=4, loc=x.mean(), scale=sps.sem(x))
    assert mean == pytest.approx(x.mean()) and half == pytest.approx((high - low) / 2)
    low90, high90 = sps.t.interval(0.9, df=4, loc=x.mean(), scale=sps.sem(x))
    assert mean_ci(x, level=0.9)[1] == pytest.approx((high90 - low90) / 2)
    assert np.isnan(mean_ci(np.array([0.5]))[1])


def test_mean_ci_ignores_nan_and_runs_over_an_axis() -> None:
    x = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 4.0]])
    mean, half = mean_ci(x, axis=0)
    assert mean.tolist() == pytest.approx([3.0, 3.0])
    low, high = sps.t.interval(0.95, df=1, loc=3.0, scale=sps.sem([2.0, 4.0]))
    assert half[1] == pytest.approx((high - low) / 2)
    assert np.isnan(mean_ci(np.array([np.nan, np.nan]))[0])


def test_paired_and_relative_gains_by_hand() -> None:
    a, b = np.array([0.5, 0.6, 0.55]), np.array([0.4, 0.45, 0.5])
    diff = a - b
    assert paired_ci(a, b) == pytest.approx((diff.mean(), sps.t.ppf(0.975, 2) * diff.std(ddof=1) / np.sqrt(3)))
    rel = 100 * (a / b - 1)
    assert relative_gain_ci(a, b)[0] == pytest.approx(rel.mean())
    assert relative_gain_ci(a, np.array([0.4, 0.0, 0.5]))[0] == pytest.approx(np.mean([rel[0], rel[2]]))
    with pytest.raises(ValueError, match="same seeds"):
        paired_ci(a, b[:2])
    assert excludes_zero(1.0, 0.5) and not excludes_zero(1.0, 1.5) and not excludes_zero(1.0, float("nan"))


def test_bootstrap_is_scipys_percentile_bootstrap() -> None:
    x = np.random.default_rng(1).exponential(size=25)
    estimate, low, high = bootstrap_ci(x, np.mean, level=0.9, resamples=4000, seed=3)
    ref = sps.bootstrap((x,), np.mean, confidence_level=0.9, n_resamples=4000, method="percentile",
                        random_state=np.random.default_rng(3), vectorized=False)
    assert estimate == pytest.approx(x.mean())
    assert low == pytest.approx(ref.confidence_interval.low, rel=1e-9)
    assert high == pytest.approx(ref.confidence_interval.high, rel=1e-9)
    median = bootstrap_ci(x, np.median, resamples=500, seed=0)
    assert median[1] < np.median(x) < median[2]
    assert np.isnan(bootstrap_ci(np.array([1.0]))[1])


def test_tables_format_and_json(tmp_path) -> None:
    assert fmt(0.01234, 0.004, 1, 100) == "1.2 ± 0.4" and fmt(-0.0001, float("nan"), 1, 100) == "0.0"
    assert fmt(float("nan"), 0.1) == "n/a"
    assert markdown_table(["a", "b"], [[1, "x"]]).splitlines() == ["| a | b |", "|---|---|", "| 1 | x |"]
    write_json(tmp_path / "s.json", {"v": np.array([1.0, 2.0]), "n": np.int64(3)})
    assert json.loads((tmp_path / "s.json").read_text()) == {"v": [1.0, 2.0], "n": 3}
