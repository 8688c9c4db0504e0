"""The gain-level recovery study at toy size: rows are the predicted gains against the true ones, the truth is
what the simulator measures directly, and the summary's counts are those of a plain loop over the rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulators.calibrate import gain_recovery, predict


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("gains")
    return gain_recovery.recover_gains("cheap", 0, out, draws=6, truth_seeds=3, num_prompts=320, steps=10, batch=16,
                                       data_steps=12, workers=1)


@pytest.mark.slow
def test_each_row_compares_a_predicted_interval_with_the_truth(rows: list[dict]) -> None:
    labels = {"grpo_matched_c1", "grpo_matched_c2", *predict.METHODS}
    assert {(r["method"], r["metric"], r["baseline"]) for r in rows} == {
        (m, metric, base) for m in labels for metric, _ in predict.METRICS for base in ("vs_grpo", "vs_tuned")}
    for r in rows:
        assert r["lo"] <= r["median"] <= r["hi"]
        assert r["covered"] == (r["lo"] <= r["truth"] <= r["hi"]) and r["width"] == r["hi"] - r["lo"]
        assert r["clear"] == (abs(r["truth"]) > max(2 * r["truth_se"], predict.THRESHOLD))
        assert not (r["sign_right"] and r["sign_wrong"])
        if r["sign_right"] or r["sign_wrong"]:
            assert r["clear"] and r["verdict_sign"] != 0


@pytest.mark.slow
def test_the_truth_is_the_simulators_own_paired_gain(rows: list[dict], tmp_path: Path) -> None:
    """Prompt-GDRO vs GRPO at the same lr in the true world, run here by the simulator's loop seed by seed."""
    from simulators.calibrate.recovery import truth_world
    from simulators.loop import Simulation

    truth = truth_world("cheap", 320, 5, 0, gain_recovery.GAIN_WORLDS).to_dict()
    settings = predict.Settings(draws=1, seeds=3, steps=10, batch=16, lr_scale=1.0, optimizer="sgd", workers=1,
                                out=tmp_path)
    diffs = []
    for seed in range(3):
        final = {}
        for method in ("grpo", "prompt_gdro"):
            sim = Simulation(predict.sim_config(settings, truth, method, seed, 1.0))
            sim.evaluate()  # the run's step-0 evaluation, as a run directory records it
            for _ in range(10):
                sim.step()
            final[method] = sim.evaluate()["test/accuracy"]
        diffs.append(final["prompt_gdro"] - final["grpo"])
    row = next(r for r in rows if (r["method"], r["metric"], r["baseline"]) == ("prompt_gdro", "test/accuracy",
                                                                                 "vs_grpo"))
    assert row["truth"] == pytest.approx(np.mean(diffs), abs=1e-12)
    assert row["truth_se"] == pytest.approx(np.std(diffs, ddof=1) / np.sqrt(3), abs=1e-12)


@pytest.mark.slow
def test_the_summary_counts_the_rows(rows: list[dict]) -> None:
    summary = gain_recovery.summarize_rows(rows + [dict(r, world="other") for r in rows[:7]])
    for name, mine in (("cheap", rows), ("other", rows[:7])):
        s = summary["worlds"][name]
        covered = 0
        for r in mine:
            covered += r["covered"]
        assert (s["rows"], s["covered"]) == (len(mine), covered)
        assert s["sign_right"] == sum(1 for r in mine if r["sign_right"])
        assert s["median_width"] == pytest.approx(float(np.median([r["width"] for r in mine])))
    assert summary["all"]["rows"] == len(rows) + 7 and summary["fits"] == 1 + 1
    assert "| **all** |" in gain_recovery.markdown(summary)


def test_interval_kinds_against_a_hand_count() -> None:
    """Two worlds of two rows: the widening factor is the side-relative distance of the truth from the median,
    chosen on the other world; the Gaussian interval is mean +- 1.96 sd of the per-world gains."""
    def row(world: str, truth: float) -> dict:
        per_world = [-0.01, 0.0, 0.01, 0.02]
        return {"world": world, "truth": truth, "median": 0.005, "lo": -0.01, "hi": 0.02, "per_world": per_world,
                "covered": -0.01 <= truth <= 0.02}

    rows = [row("a", 0.005), row("a", 0.035), row("b", 0.0), row("b", -0.04)]
    assert [gain_recovery.widening(r) for r in rows] == pytest.approx([0.0, 2.0, 1 / 3, 3.0])
    kinds = gain_recovery.interval_kinds(rows)
    assert kinds["central"] == 0.5 and kinds["widening"] == pytest.approx(3.0)
    # leave one world out: world a gets k = 3 (world b's highest) and covers both; b gets k = 2 and covers 1 of 2
    assert kinds["widened_leave_one_world_out"] == 0.75
    sd = np.std([-0.01, 0.0, 0.01, 0.02], ddof=1)
    assert kinds["gaussian"] == np.mean([abs(t - 0.005) <= 1.96 * sd for t in (0.005, 0.035, 0.0, -0.04)])
