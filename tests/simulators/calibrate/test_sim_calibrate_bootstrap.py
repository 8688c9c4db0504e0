"""gdro predict --bootstrap: each predicted gain's interval is set by how far its own bootstrap refits missed their
worlds' true gains, so a fit whose refits miss more gets a wider interval than one whose refits land."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pytest

from simulators.calibrate import bootstrap, predict

TableMaker = Callable[[np.ndarray, float], dict]

METRIC = predict.METRICS[0][0]


def _rows(multiple: float, count: int = 40) -> list[dict]:
    """Bootstrap rows whose true gain lies ``multiple`` half-widths of the refit's interval from its median,
    alternately above and below, in every metric."""
    rows = []
    for metric, _ in predict.METRICS:
        for i in range(count):
            median, lo, hi = 0.01, 0.0, 0.03  # sides 1 pp below, 2 pp above
            truth = median + multiple * (hi - median if i % 2 else lo - median)
            rows.append({"metric": metric, "truth": truth, "median": median, "lo": lo, "hi": hi,
                         "stretch": bootstrap.stretch(truth, median, lo, hi)})
    return rows


def _summary(prediction_table: TableMaker) -> dict:
    gain_D = np.linspace(-0.01, 0.03, 40)
    return predict.summarize(prediction_table(gain_D, 0.0), 40, [])


def test_stretch_is_the_distance_in_units_of_the_side_facing_the_truth() -> None:
    assert bootstrap.stretch(0.05, 0.01, 0.0, 0.03) == pytest.approx(2.0)  # 4 pp beyond a 2 pp upper side
    assert bootstrap.stretch(-0.02, 0.01, 0.0, 0.03) == pytest.approx(3.0)  # 3 pp below a 1 pp lower side
    assert bootstrap.stretch(0.02, 0.01, 0.0, 0.03) == pytest.approx(0.5)  # inside the interval
    assert bootstrap.stretch(0.01, 0.01, 0.0, 0.03) == 0.0
    assert bootstrap.stretch(0.002, 0.0, 0.0, 0.0) == pytest.approx(0.002 / bootstrap.SIDE_FLOOR)  # no width: floor


def test_the_factor_covers_95_percent_of_the_bootstrap_truths() -> None:
    rows = [{"metric": metric, "truth": 0.0, "stretch": float(s)} for metric, _ in predict.METRICS
            for s in range(1, 41)]
    factors = bootstrap.factors(rows)
    assert set(factors) == {m for m, _ in predict.METRICS}
    for factor in factors.values():
        assert factor == 39.0  # 39 of 40 stretches <= it (97.5%), 38 of 40 would be 95% only with 38 < it
        assert np.mean([r["stretch"] <= factor for r in rows[:40]]) >= 0.95


def test_a_fit_whose_refits_miss_more_gets_a_wider_interval(prediction_table: TableMaker) -> None:
    """Two fits with the same drawn worlds: one whose bootstrap refits miss their worlds' gains by 0.5 pp, one
    whose refits miss by 6 pp. Each gain's printed interval is its median +- t(0.975, B) x rms of its own errors
    (B = 6: 2.447), or the central interval on a side where that is wider: narrower than x WIDENING for the first,
    wider for the second."""
    def rows(miss: float) -> list[dict]:
        return [{"method": label, "metric": metric, "baseline": base, "truth": 0.01 + (miss if b % 2 else -miss),
                 "median": 0.01} for label in ("grpo_matched_c1", "grpo_matched_c2", *predict.METHODS)
                for metric, _ in predict.METRICS for base in ("vs_grpo", "vs_tuned") for b in range(6)]

    plain = _summary(prediction_table)  # the central interval [-0.01, 0.03] about the median 0.01: sides of 2 pp
    good = bootstrap.apply(_summary(prediction_table), rows(0.005), {"count": 6})
    poor = bootstrap.apply(_summary(prediction_table), rows(0.06), {"count": 6})
    for label in plain["methods"]:
        for base in ("vs_grpo", "vs_tuned"):
            central, g, p = (s["methods"][label][METRIC][base] for s in (plain, good, poor))
            width = lambda e: e["wide_hi"] - e["wide_lo"]  # noqa: E731
            assert width(g) < width(central) < width(p)  # central's printed interval: x WIDENING
            assert (g["wide_lo"], g["wide_hi"]) == (central["lo"], central["hi"])  # 2.447 x 0.5 pp < its 2 pp sides
            assert p["error_half_width"] == pytest.approx(2.447 * 0.06, abs=1e-3)
            assert (p["wide_lo"], p["wide_hi"]) == pytest.approx((0.01 - 2.447 * 0.06, 0.01 + 2.447 * 0.06), abs=1e-4)
            assert p["errors"] == 6 and p["widening"] == "bootstrap"
    assert poor["widening"]["source"] == "bootstrap" and poor["widening"]["count"] == 6
    assert poor["widening"]["half_widths"][METRIC] == pytest.approx(2.447 * 0.06, abs=1e-3)
    assert plain["methods"]["prompt_gdro"][METRIC]["vs_grpo"]["widening"] == predict.WIDENING


def test_each_gain_is_widened_by_its_own_errors_only(prediction_table: TableMaker) -> None:
    """Errors are kept apart per method, metric and baseline: a miss of Prompt-GDRO against tuned GRPO widens that
    gain alone; a gain without bootstrap rows keeps the global x WIDENING."""
    rows = [{"method": "prompt_gdro", "metric": METRIC, "baseline": "vs_tuned", "truth": t, "median": 0.0}
            for t in (0.1, -0.1, 0.1, -0.1)] + [
           {"method": "joint", "metric": METRIC, "baseline": "vs_tuned", "truth": t, "median": 0.0}
            for t in (0.001, -0.001, 0.001, float("nan"))]
    summary = bootstrap.apply(_summary(prediction_table), rows, {"count": 4})
    wide = summary["methods"]["prompt_gdro"][METRIC]["vs_tuned"]
    assert wide["error_half_width"] == pytest.approx(2.776 * 0.1, abs=1e-3) and wide["errors"] == 4  # t(0.975, 4)
    narrow = summary["methods"]["joint"][METRIC]["vs_tuned"]
    assert narrow["errors"] == 3 and narrow["error_half_width"] == pytest.approx(3.182 * 0.001, abs=1e-5)
    assert (narrow["wide_lo"], narrow["wide_hi"]) == (narrow["lo"], narrow["hi"])  # the central interval is wider
    kept = summary["methods"]["prompt_gdro"][METRIC]["vs_grpo"]
    assert kept["widening"] == predict.WIDENING and "error_half_width" not in kept


def test_bootstrap_refits_worlds_spread_over_the_draws(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """bootstrap() refits ``count`` distinct stored draws and turns their rows into the factors."""
    seen = []

    def fake(cal, shapes, settings, world, seed, truth_seeds):  # noqa: ANN001
        seen.append((world["score_noise"], seed))
        return [dict(r, stretch=world["score_noise"]) for r in _rows(1.0, 2)]

    monkeypatch.setattr(bootstrap, "replicate", fake)
    draws = {"score_noise": [float(v) for v in range(1, 9)], "transfer": [0.5] * 8}
    fit = {"difficulty": {"draws": {}, "sizes": [100, 60]}, "plan": {"pool_size": 160, "batch": 16, "steps": 10},
           "dynamics": {"draws": draws, "lrs": [0.5, 1.0], "batch": 16, "n": 4, "steps": 12, "eval_steps": [6, 12]}}
    cal = predict.Calibrated({"world": {}}, fit, tmp_path / "world.toml")
    settings = predict.Settings(draws=8, seeds=2, steps=10, batch=16, lr_scale=1.0, optimizer="sgd", workers=1,
                                out=tmp_path)
    result = bootstrap.bootstrap(cal, settings, 4)
    assert [s for s, _ in seen] == [1.0, 3.0, 5.0, 7.0] and len({seed for _, seed in seen}) == 4
    assert result["factors"][METRIC] == 7.0 and result["count"] == 4 and result["truth_seeds"] == 4
    assert result["shapes"] == {"num_prompts": 160, "num_groups": 2, "k": 8, "lrs": [0.5, 1.0], "batch": 16, "n": 4,
                                "steps": 12, "eval_every": 6}
    assert not math.isnan(result["factors"][METRIC])


def test_the_screen_says_which_widening_it_printed() -> None:
    from simulators.calibrate.predict_report import widening_text

    assert f"x{predict.WIDENING:g}" in widening_text({}) and "--bootstrap" in widening_text({"widening": {"source": "global"}})
    text = widening_text({"widening": {"source": "bootstrap", "count": 6, "factors": {METRIC: 1.234}}})
    assert "6 bootstrap refits" in text and "accuracy x1.23" in text and "2.44" not in text
    text = widening_text({"widening": {"source": "bootstrap", "method": "error", "count": 6,
                                       "half_widths": {METRIC: 0.0234}}})
    assert "6 bootstrap refits" in text and "accuracy +-2.3" in text and "2.44" not in text


def test_the_recovery_comparison_scores_each_interval_on_the_same_rows() -> None:
    """Two rows: the global widening covers both, the fit's own (narrower) interval one; the table counts that."""
    from simulators.calibrate import gain_recovery

    base = {"world": "w", "seed": 0, "median": 0.0, "lo": -0.01, "hi": 0.01, "boot": 6, "boot_factor": 1.5,
            "boot_lo": -0.015, "boot_hi": 0.015, "boot_seconds": 1.0, "sign_right": False, "sign_wrong": False,
            "clear": False}
    outside_own = 0.95 * predict.WIDENING * 0.01  # inside the global widening of the 1 pp sides, beyond 1.5 pp
    assert outside_own > base["boot_hi"]
    rows = [dict(base, truth=0.012), dict(base, truth=outside_own)]
    result = gain_recovery.per_fit_comparison(rows)["all"]
    assert (result["central"]["covered"], result["global"]["covered"], result["bootstrap"]["covered"]) == (0, 2, 1)
    assert result["bootstrap"]["median_width"] == pytest.approx(0.03)
    assert result["global"]["median_width"] == pytest.approx(2 * predict.WIDENING * 0.01)
    assert f"| **all** | 1 / 2 | 0/2 (0%), 2.0 pp | 2/2 (100%), {2 * predict.WIDENING:.1f} pp | 1/2 (50%), 3.0 pp |" in \
        gain_recovery.per_fit_markdown(gain_recovery.per_fit_comparison(rows))


def test_the_recovery_comparison_adds_the_error_interval_from_the_refits_rows() -> None:
    """Rows that carry their refits' rows get the error interval (median +- t(0.975, 2) x rms, 4.303 x 1 pp here),
    scored beside the others, overall and against tuned GRPO alone."""
    from simulators.calibrate import gain_recovery

    base = {"world": "w", "seed": 0, "median": 0.0, "lo": -0.01, "hi": 0.01, "boot": 2, "boot_factor": 1.5,
            "boot_lo": -0.015, "boot_hi": 0.015, "boot_seconds": 1.0, "sign_right": False, "sign_wrong": False,
            "clear": False, "boot_rows": [{"truth": 0.01, "median": 0.0}, {"truth": 0.0, "median": 0.01}]}
    rows = [gain_recovery.with_error_interval(dict(base, truth=t, baseline=b))
            for t, b in ((0.04, "vs_tuned"), (0.05, "vs_tuned"), (0.0, "vs_grpo"))]
    assert (rows[0]["error_lo"], rows[0]["error_hi"]) == pytest.approx((-0.04303, 0.04303), abs=1e-5)
    result = gain_recovery.per_fit_comparison(rows)["all"]
    assert (result["error"]["covered"], result["error"]["tuned_covered"], result["error"]["tuned_rows"]) == (2, 1, 2)
    assert (result["bootstrap"]["covered"], result["bootstrap"]["tuned_covered"]) == (1, 0)
    table = gain_recovery.per_fit_markdown(gain_recovery.per_fit_comparison(rows))
    assert "2/3 (67%), 8.6 pp; vs tuned 1/2, 8.6 pp" in table and "bootstrap errors" in table


@pytest.mark.slow
def test_gdro_predict_bootstrap_end_to_end(tmp_path, capsys: pytest.CaptureFixture) -> None:
    """gdro predict --bootstrap 1 on a tiny fit: the screen names the fit's own factors, summary.json keeps them
    and each printed interval is the central one stretched by its metric's factor; rows.json has the refit's rows."""
    import json

    from simulators.calibrate.cli import calibrate_main, predict_main
    from simulators.calibrate.recovery import synthetic_data, truth_world, write_as_real

    truth = truth_world("middle", num_prompts=160, num_groups=2, seed=0)
    sample, sweep = synthetic_data(truth, lrs=(0.5, 1.0, 2.0), batch=16, n=4, steps=12, eval_every=6, k=8, seed=0)
    samples, runs = write_as_real(sample, sweep, tmp_path / "real", k=8)
    assert calibrate_main(["--samples", str(samples), "--sweep", *map(str, runs), "--lr", "1", "--out",
                           str(tmp_path / "cal"), "--boots", "4", "--pilot", "8", "--steps", "8",
                           "--optimizer", "sgd"]) == 0
    capsys.readouterr()
    assert predict_main([str(tmp_path / "cal" / "world.toml"), "--draws", "3", "--seeds", "1", "--steps", "8",
                         "--workers", "1", "--bootstrap", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 bootstrap refits" in out and "x2.44" not in out
    summary = json.loads((tmp_path / "cal" / "predict" / "summary.json").read_text())
    assert summary["widening"]["source"] == "bootstrap" and summary["widening"]["count"] == 1
    rows = json.loads((tmp_path / "cal" / "predict" / "bootstrap" / "rows.json").read_text())
    assert len(rows) == 5 * 3 * 2
    for metric, _ in predict.METRICS:
        entry = summary["methods"]["joint"][metric]["vs_tuned"]
        row = next(r for r in rows if (r["method"], r["metric"], r["baseline"]) == ("joint", metric, "vs_tuned"))
        half = 12.706 * abs(row["truth"] - row["median"])  # t(0.975, 1) x rms of one error
        assert entry["error_half_width"] == pytest.approx(half, rel=1e-4, abs=1e-9)
        half = entry["error_half_width"]
        assert entry["wide_lo"] == pytest.approx(min(entry["lo"], entry["median"] - half))
        assert entry["wide_hi"] == pytest.approx(max(entry["hi"], entry["median"] + half))
    assert predict_main([str(tmp_path / "cal" / "world.toml"), "--bootstrap", "-1"]) == 2
    assert "--bootstrap -1" in capsys.readouterr().err
