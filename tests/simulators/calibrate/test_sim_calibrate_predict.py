"""gdro predict's verdicts: counts over the drawn worlds, order-statistic intervals, the one-at-a-time
"decided by" worlds, and a world file / identification flag that agree with the printed intervals."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulators.calibrate import predict
from simulators.calibrate.calibration import identification
from simulators.calibrate.dynamics import SHARED_RATIO
from simulators.calibrate.posterior import central_interval
from simulators.calibrate.predict_report import verdict

gains = st.lists(st.floats(-0.3, 0.3, allow_nan=False), min_size=2, max_size=60)


@given(gains, st.floats(0.0, 0.05))
@settings(max_examples=200, deadline=None)
def test_the_counts_over_worlds_are_those_of_a_plain_loop(values: list[float], threshold: float) -> None:
    entry = predict.over_worlds(np.array(values), threshold)
    above = below = above_t = below_t = 0
    for v in values:
        above += v > 0
        below += v < 0
        above_t += v > threshold
        below_t += v < -threshold
    assert (entry["above_zero"], entry["below_zero"], entry["above_threshold"], entry["below_threshold"]) == \
        (above, below, above_t, below_t)
    assert entry["worlds"] == len(values) and entry["median"] == pytest.approx(float(np.median(values)))
    # the interval's ends are drawn values, at most 2.5% of the worlds (rounded up) outside each end
    assert entry["lo"] in values and entry["hi"] in values and entry["lo"] <= entry["median"] <= entry["hi"]
    n = len(values)
    outside = math.ceil(0.025 * (n - 1))
    assert sum(v < entry["lo"] for v in values) <= outside and sum(v > entry["hi"] for v in values) <= outside


def test_nan_worlds_are_left_out_and_one_world_has_no_interval() -> None:
    entry = predict.over_worlds(np.array([0.02, math.nan]), 0.01)
    assert entry["worlds"] == 1 and math.isnan(entry["lo"]) and entry["median"] == 0.02
    assert verdict(entry, 0.01).startswith("no verdict")


@given(st.lists(st.floats(-8, 8), min_size=3, max_size=80))
@settings(max_examples=200, deadline=None)
def test_an_interval_on_the_log_scale_is_the_log_of_the_printed_one(logs: list[float]) -> None:
    """The identification flag (fitting scale: log) and the printed interval (linear) are the same two draws."""
    x = np.exp(np.array(logs))
    np.testing.assert_array_equal(np.log(central_interval(x)), central_interval(np.log(x)))


def test_the_weak_flag_reads_the_printed_interval() -> None:
    """A skewed posterior (one draw near the top of a log-scale range) where percentiles interpolated on the
    two scales disagree: the linear one printed 58% of the log range, the log one flagged 41% (well
    identified). Order statistics give one interval on both scales, and the flag follows it."""
    rng = np.random.default_rng(7)
    logs = rng.normal(np.log(0.05), 1.4, 40)
    logs[-1] = np.log(99.0)
    lo, hi = np.log(1e-3), np.log(100.0)

    def share(interval: np.ndarray) -> float:
        return float((interval[1] - interval[0]) / (hi - lo))

    interpolated = (share(np.log(np.percentile(np.exp(logs), [2.5, 97.5]))), share(np.percentile(logs, [2.5, 97.5])))
    assert interpolated[0] > 0.5 > interpolated[1], "the fixture is one where interpolation splits the scales"
    printed = share(np.log(central_interval(np.exp(logs))))
    note = identification(logs[:, None], np.array([lo]), np.array([hi]), ("lr_group",))["lr_group"]
    assert note.startswith("weak") == (printed > 0.5)


@pytest.mark.parametrize("fit_class", ["difficulty", "dynamics"])
def test_the_printed_interval_and_the_flag_are_the_same_two_draws(fit_class: str) -> None:
    """Stage 1's and stage 2's printed intervals are order statistics of the draws, and the flag's share of the
    log range is computed from exactly those two draws (an interpolated percentile differs in the percent)."""
    from simulators.calibrate.dynamics import DynamicsFit
    from simulators.calibrate.initial_difficulty import DifficultyFit

    rng = np.random.default_rng(1)
    lo, hi = np.log(1e-3), np.log(100.0)
    logs = np.clip(rng.normal(np.log(0.3), 2.2, 40), lo + 0.01, hi - 0.01)
    draws = {"lr_group": np.exp(logs)}
    fit = (DifficultyFit({}, draws, np.zeros(1), ("a",), np.ones(1), 0.0) if fit_class == "difficulty" else
           DynamicsFit({}, draws, 1.0, np.zeros(1), None, None, None))  # type: ignore[arg-type]
    low, high = fit.interval("lr_group")
    assert low in draws["lr_group"] and high in draws["lr_group"]
    share = (np.log(high) - np.log(low)) / (hi - lo)
    interpolated = np.percentile(logs, [2.5, 97.5])
    assert round(100 * share) != round(100 * (interpolated[1] - interpolated[0]) / (hi - lo))  # the fixture splits
    note = identification(logs[:, None], np.array([lo]), np.array([hi]), ("lr_group",))["lr_group"]
    assert note == f"weak: interval spans {100 * share:.0f}% of the allowed range"


@pytest.mark.parametrize("values,expected", [
    ([0.02] * 39 + [-0.02], "better by more than 1 pp in 39 of 40"),
    ([-0.02] * 38 + [0.02] * 2, "worse by more than 1 pp in 38 of 40"),
    ([0.005] * 38 + [0.02, -0.02], "within ±1 pp in 38 of 40"),
    ([0.02] * 20 + [0.005] * 19 + [-0.02], "better in 39 of 40 worlds the data allow, by more than 1 pp in 20"),
    ([-0.02] * 20 + [-0.005] * 19 + [0.02], "worse in 39 of 40 worlds the data allow, by more than 1 pp in 20"),
    ([0.02] * 30 + [-0.02] * 10, "undecided: better in 30, worse in 10 of 40"),
    ([0.02] * 37 + [-0.02] * 3, "undecided: better in 37, worse in 3 of 40"),  # 37 < 95% of 40
])
def test_the_verdict_follows_the_counts(values: list[float], expected: str) -> None:
    assert verdict(predict.over_worlds(np.array(values), 0.01), 0.01).startswith(expected)


def test_decided_by_names_the_biggest_mover_and_whether_it_flips() -> None:
    keys = [("", math.nan), ("curvature", 0.1), ("curvature", 2.0), ("score_noise", 0.5), ("score_noise", 6.0),
            ("transfer", 0.2), ("transfer", 0.8)]
    gain = np.array([0.004, 0.006, -0.03, 0.001, 0.009, 0.003, 0.005])
    rows = predict.decided_by(gain, keys, threshold=0.01)
    assert [r["parameter"] for r in rows] == ["curvature", "score_noise", "transfer"]
    assert rows[0]["moves"] == pytest.approx(0.034) and rows[0]["values"] == [0.1, 2.0]
    assert rows[0]["gains"] == [0.006, -0.03] and rows[0]["median_world"] == 0.004
    assert [r["flips"] for r in rows] == [True, False, False]  # only -3 pp leaves the +-1 pp band


def _calibrated(tmp_path: Path) -> predict.Calibrated:
    rng = np.random.default_rng(1)
    difficulty = {"difficulty_offset": rng.normal(-1, 0.2, 40).tolist(), "unsolvable_frac": [0.1] * 40,
                  "size_exponent": [1.0] * 40}
    dynamics = {"lr_group": np.exp(rng.normal(np.log(0.3), 0.3, 40)).tolist(),
                "curvature": np.exp(rng.normal(np.log(0.2), 0.5, 40)).tolist(), "lr_shared": [9.0] * 40}
    fit = {"difficulty": {"draws": difficulty}, "dynamics": {"draws": dynamics}}
    return predict.Calibrated({"world": {"num_prompts": 64, "num_groups": 2, "lr_shared": 123.0}}, fit, tmp_path)


def test_drawn_worlds_carry_the_shared_step_of_their_own_group_step(tmp_path: Path) -> None:
    cal = _calibrated(tmp_path)
    worlds = predict.world_draws(cal, 40)
    assert cal.draw_count == 40 and len(worlds) == 40
    lr_group = np.array(cal.fit["dynamics"]["draws"]["lr_group"])  # type: ignore[index]
    np.testing.assert_allclose([w["lr_group"] for w in worlds], lr_group)
    np.testing.assert_allclose([w["lr_shared"] for w in worlds], SHARED_RATIO * lr_group)
    assert all("size_exponent" not in w for w in worlds)


def test_perturbed_worlds_move_one_parameter_to_its_interval_ends(tmp_path: Path) -> None:
    cal = _calibrated(tmp_path)
    worlds, keys = predict.perturbed_worlds(cal)
    drawn = predict.drawn_parameters(cal)
    medians = {name: float(np.median(v)) for name, v in drawn.items()}
    assert keys[0][0] == "" and {k: worlds[0][k] for k in medians} == medians
    assert [k for k, _ in keys[1:]] == ["difficulty_offset"] * 2 + ["lr_group"] * 2 + ["curvature"] * 2
    for world, (name, value) in zip(worlds[1:], keys[1:]):  # unsolvable_frac does not vary: not perturbed
        lo, hi = sorted(drawn[name])[1], sorted(drawn[name])[-2]  # 40 draws: the 2nd smallest and 2nd largest
        assert value in (lo, hi) and world[name] == value
        assert all(world[k] == medians[k] for k in medians if k != name)
        assert world["lr_shared"] == pytest.approx(SHARED_RATIO * world["lr_group"])


def test_the_world_file_holds_values_inside_their_intervals(tmp_path: Path) -> None:
    """world.toml is written from the posterior medians: every fitted value inside its own 95% interval."""
    import json

    from simulators import knobs
    from simulators.calibrate.cli import calibrate_main
    from simulators.calibrate.recovery import synthetic_data, truth_world, write_as_real

    truth = truth_world("hard", num_prompts=240, num_groups=3, seed=2)
    sample, sweep = synthetic_data(truth, lrs=(0.5, 2.0), batch=16, n=4, steps=8, eval_every=4, k=8, seed=2)
    samples, runs = write_as_real(sample, sweep, tmp_path / "real", k=8)
    assert calibrate_main(["--samples", str(samples), "--sweep", *map(str, runs), "--lr", "1", "--out",
                           str(tmp_path / "cal"), "--boots", "8", "--pilot", "8", "--steps", "8"]) == 0
    world = knobs.load_toml(tmp_path / "cal" / "world.toml")["world"]
    fit = json.loads((tmp_path / "cal" / "fit.json").read_text())
    checked = 0
    for stage in ("difficulty", "dynamics"):
        for name, median in fit[stage]["medians"].items():
            lo, hi = fit[stage]["intervals"][name]
            assert lo <= world[name] <= hi, f"{name} = {world[name]} outside [{lo}, {hi}]"
            assert world[name] == pytest.approx(median, rel=1e-5)
            checked += 1
    assert checked == 13
    assert world["lr_shared"] == pytest.approx(SHARED_RATIO * world["lr_group"], rel=1e-4)


def test_draws_piling_up_at_an_arbitrary_end_are_flagged() -> None:
    """score_noise's range ends are arbitrary: 6 of 40 draws within 2% of its low end flag it weak (a narrow
    interval inside the range and no edge reached otherwise); transfer's 0 is its own end, never flagged."""
    lo, hi = np.array([np.log(0.05), 0.0]), np.array([np.log(20.0), 1.0])
    rng = np.random.default_rng(3)
    noise = np.concatenate([rng.uniform(lo[0] + 0.005, lo[0] + 0.1, 6), rng.normal(np.log(2.0), 0.1, 34)])
    transfer = np.concatenate([np.full(6, 0.001), rng.uniform(0.3, 0.4, 34)])
    notes = identification(np.stack([noise, transfer], axis=1), lo, hi, ("score_noise", "transfer"))
    assert "6 of 40 draws pile up at the low end of the allowed range" in notes["score_noise"]
    assert "pile up" not in notes["transfer"]
    few = identification(noise[2:, None], lo[:1], hi[:1], ("score_noise",))["score_noise"]
    assert "4 of 38 draws pile up" in few
    assert "pile up" not in identification(noise[4:, None], lo[:1], hi[:1], ("score_noise",))["score_noise"]  # 2 < 10%


def test_the_printed_interval_is_the_central_one_widened_by_the_recovery_studys_factor() -> None:
    import json

    from simulators.calibrate.gain_recovery import interval_kinds

    root = Path(__file__).resolve().parents[3] / "reports" / "calibration" / "gain-recovery"
    rows = json.loads((root / "rows.json").read_text())
    assert predict.WIDENING == pytest.approx(interval_kinds(rows)["widening"], abs=0.005)  # the committed study's
    entry = predict.over_worlds(np.array([0.0, 0.01, 0.02, 0.05] * 10), 0.01)
    assert (entry["lo"], entry["median"], entry["hi"]) == (0.0, 0.015, 0.05)
    assert entry["wide_lo"] == pytest.approx(0.015 - predict.WIDENING * 0.015)
    assert entry["wide_hi"] == pytest.approx(0.015 + predict.WIDENING * 0.035)


def test_the_threshold_decides_every_methods_counts(prediction_table) -> None:
    """`gdro predict --threshold 5`: every method's counts beyond the threshold, and so its verdict, use 5 pp, not
    the default 1 pp. Gains of 2..4 pp over GRPO at the planned lr are beyond 1 pp in every world and beyond 5 pp
    in none; 6..8 pp below tuned GRPO are beyond 5 pp in every world."""
    gain = np.linspace(0.02, 0.04, 20)
    summary = predict.summarize(prediction_table(gain, 0.1), 20, [], threshold=0.05)
    assert summary["threshold"] == 0.05 and summary["tuned_scale"] == [2.0] * 20
    for label, row in summary["methods"].items():
        for metric, _ in predict.METRICS:
            vs_grpo, vs_tuned = row[metric]["vs_grpo"], row[metric]["vs_tuned"]
            np.testing.assert_allclose(vs_grpo["per_world"], gain)
            np.testing.assert_allclose(vs_tuned["per_world"], gain - 0.1)
            counts = [(vs_grpo["above_threshold"], vs_grpo["below_threshold"]),
                      (vs_tuned["above_threshold"], vs_tuned["below_threshold"])]
            assert counts == [(int(np.sum(gain > 0.05)), 0), (0, int(np.sum(gain - 0.1 < -0.05)))] == [(0, 0), (0, 20)]
            assert verdict(vs_grpo, 0.05) == "within ±5 pp in 20 of 20 worlds the data allow", label
