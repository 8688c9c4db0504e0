"""gdro predict --bootstrap: each fit's interval is widened by what its own bootstrap refits needed to cover
their worlds' true gains, so a fit whose refits miss more gets a wider interval than one whose refits land."""

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
    """Two fits with the same drawn worlds: one whose bootstrap truths land inside half the refits' interval, one
    whose truths fall three half-widths out. The first prints a narrower interval than the global x2.44, the
    second a wider one; each is its central interval stretched by its factor about the median."""
    good_factors, poor_factors = bootstrap.factors(_rows(0.5)), bootstrap.factors(_rows(3.0))
    assert good_factors[METRIC] == pytest.approx(0.5) and poor_factors[METRIC] == pytest.approx(3.0)
    good = bootstrap.apply(_summary(prediction_table), good_factors, {"count": 8})
    poor = bootstrap.apply(_summary(prediction_table), poor_factors, {"count": 8})
    plain = _summary(prediction_table)
    for label in plain["methods"]:
        for base in ("vs_grpo", "vs_tuned"):
            central, g, p = (s["methods"][label][METRIC][base] for s in (plain, good, poor))
            width = lambda e: e["wide_hi"] - e["wide_lo"]  # noqa: E731
            assert width(g) < width(central) < width(p)  # central's printed interval: x2.44
            assert width(g) == pytest.approx(0.5 * (central["hi"] - central["lo"]))
            assert width(p) == pytest.approx(3.0 * (central["hi"] - central["lo"]))
            assert g["wide_lo"] <= g["median"] <= g["wide_hi"] and g["widening"] == 0.5
    assert poor["widening"] == {"source": "bootstrap", "factors": poor_factors, "count": 8}
    assert plain["methods"]["prompt_gdro"][METRIC]["vs_grpo"]["widening"] == predict.WIDENING


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

    assert "x2.44" in widening_text({}) and "--bootstrap" in widening_text({"widening": {"source": "global"}})
    text = widening_text({"widening": {"source": "bootstrap", "count": 6, "factors": {METRIC: 1.234}}})
    assert "6 bootstrap refits" in text and "accuracy x1.23" in text and "2.44" not in text


def test_the_recovery_comparison_scores_each_interval_on_the_same_rows() -> None:
    """Two rows: the global x2.44 covers both, the fit's own (narrower) interval one; the table counts that."""
    from simulators.calibrate import gain_recovery

    base = {"world": "w", "seed": 0, "median": 0.0, "lo": -0.01, "hi": 0.01, "boot": 6, "boot_factor": 1.5,
            "boot_lo": -0.015, "boot_hi": 0.015, "boot_seconds": 1.0, "sign_right": False, "sign_wrong": False,
            "clear": False}
    rows = [dict(base, truth=0.012), dict(base, truth=0.02)]
    result = gain_recovery.per_fit_comparison(rows)["all"]
    assert (result["central"]["covered"], result["global"]["covered"], result["bootstrap"]["covered"]) == (0, 2, 1)
    assert result["bootstrap"]["median_width"] == pytest.approx(0.03)
    assert result["global"]["median_width"] == pytest.approx(2 * predict.WIDENING * 0.01)
    assert "| **all** | 1 / 2 | 0/2 (0%), 2.0 pp | 2/2 (100%), 4.9 pp | 1/2 (50%), 3.0 pp |" in \
        gain_recovery.per_fit_markdown(gain_recovery.per_fit_comparison(rows))


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
    assert len(rows) == 5 * 3 * 2 and summary["widening"]["factors"] == bootstrap.factors(rows)
    for metric, factor in summary["widening"]["factors"].items():
        entry = summary["methods"]["joint"][metric]["vs_tuned"]
        assert entry["wide_hi"] - entry["wide_lo"] == pytest.approx(factor * (entry["hi"] - entry["lo"]))
    assert predict_main([str(tmp_path / "cal" / "world.toml"), "--bootstrap", "-1"]) == 2
    assert "--bootstrap -1" in capsys.readouterr().err
