"""gdro calibrate and gdro predict end to end on a small known world written in the real file formats."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simulators import knobs
from simulators.calibrate.cli import calibrate_main, predict_main
from simulators.calibrate.recovery import synthetic_data, truth_world, write_as_real
from simulators.world import WorldConfig


@pytest.fixture(scope="module")
def real_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    truth = truth_world("middle", num_prompts=320, num_groups=4, seed=0)
    sample, sweep = synthetic_data(truth, lrs=(0.5, 1.0, 2.0), batch=32, n=4, steps=12, eval_every=6, k=8, seed=0)
    return write_as_real(sample, sweep, tmp_path_factory.mktemp("real"), k=8)


@pytest.fixture(scope="module")
def calibrated(real_files: tuple[Path, list[Path]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    samples, runs = real_files
    out = tmp_path_factory.mktemp("cal")
    code = calibrate_main(["--samples", str(samples), "--sweep", *map(str, runs), "--lr", "1", "--out", str(out),
                           "--boots", "6", "--pilot", "8", "--steps", "12", "--optimizer", "sgd"])
    assert code == 0
    return out


def test_calibrate_writes_a_world_the_simulator_reads(calibrated: Path, capsys: pytest.CaptureFixture) -> None:
    overrides = knobs.load_toml(calibrated / "world.toml")
    world = WorldConfig(**overrides["world"])
    assert world.num_groups == 4 and world.num_prompts == 320 and len(world.group_shares) == 4
    assert sorted(world.group_hardness_rank) == [0, 1, 2, 3]
    assert overrides["run"]["n_bar"] == 4
    import json
    fit = json.loads((calibrated / "fit.json").read_text())
    for stage in ("difficulty", "dynamics"):
        for name, (lo, hi) in fit[stage]["intervals"].items():
            assert lo <= hi, name
    assert (calibrated / "fig_passrate.png").stat().st_size > 1000 and (calibrated / "fig_curves.png").is_file()
    report = (calibrated / "report.md").read_text()
    assert "Weakly identified by these data" in report and "`curvature`" in report


def test_calibrate_records_the_code_that_made_the_fit(calibrated: Path, real_files: tuple[Path, list[Path]]) -> None:
    """fit.json's provenance (studykit.provenance): the digest now, a rerunnable command (--out written
    OUT: a temporary folder), the settings without --out."""
    import json

    from studykit.provenance import code_digest

    block = json.loads((calibrated / "fit.json").read_text())["provenance"]
    assert block["entry"] == ["simulators.calibrate.cli"]
    assert block["code_digest"] == code_digest(["simulators.calibrate.cli"])["code_digest"]
    samples, runs = real_files
    assert block["command"] == " ".join(["gdro calibrate --samples", str(samples), "--sweep", *map(str, runs),
                                         "--lr 1 --out OUT --boots 6 --pilot 8 --steps 12 --optimizer sgd"])
    assert block["settings"]["boots"] == 6 and block["settings"]["sweep"] == list(map(str, runs))
    assert "out" not in block["settings"] and str(calibrated) not in json.dumps(block)


def test_predict_prints_one_screen_and_the_report(calibrated: Path, capsys: pytest.CaptureFixture) -> None:
    code = predict_main([str(calibrated / "world.toml"), "--draws", "3", "--seeds", "1", "--steps", "10",
                         "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 0
    for label in ("Prompt-GDRO", "Rollout-GDRO", "joint", "step-matched GRPO", "vs tuned GRPO", "In plain words",
                  "What decides the gain", "of 3 worlds the data allow", "(median world", "ScaleRL's sigmoid"):
        assert label in out
    assert out.strip().splitlines()[-1].startswith("report: ")
    assert len(out.strip().splitlines()) <= 20  # one screen
    import json

    summary = json.loads((calibrated / "predict" / "summary.json").read_text())
    entry = summary["methods"]["prompt_gdro"]["test/accuracy"]["vs_tuned"]
    assert entry["worlds"] == 3 and len(entry["per_world"]) == 3
    moved = summary["methods"]["prompt_gdro"]["decided_by"]["test/accuracy"]["vs_tuned"]
    fit = json.loads((calibrated / "fit.json").read_text())
    varying = [n for stage in ("difficulty", "dynamics") for n, v in fit[stage]["draws"].items()
               if n not in ("size_exponent", "size_difficulty_corr", "lr_shared") and max(v) > min(v)]
    assert sorted(r["parameter"] for r in moved) == sorted(varying)  # every varying parameter, both ends
    assert all(len(r["gains"]) == 2 for r in moved) and moved == sorted(moved, key=lambda r: -r["moves"])
    assert sorted(f["lr"] for f in fit["scaling"]) == [0.5, 1.0, 2.0]  # one sigmoid per sweep run
    assert summary["scaling"]["lr"] == 1.0 and summary["scaling"]["rollouts"] == 10 * 32 * 4  # planned lr, run
    runs = sorted(p.name for p in (calibrated / "predict" / "runs").iterdir())
    assert len(runs) == 3 + 1 + 2 * len(varying)  # the drawn worlds, the median world, two ends per parameter


def test_plain_words_say_the_verdict_and_what_decides_it() -> None:
    from simulators.calibrate.predict import decided_by, over_worlds
    from simulators.calibrate.predict_report import plain_words

    metric = "test/accuracy"
    keys = [("", math.nan), ("curvature", 0.1), ("curvature", 2.0), ("transfer", 0.1), ("transfer", 0.9)]
    cases = {"prompt_gdro": ([0.03] * 39 + [-0.01], [0.03, 0.035, -0.02, 0.03, 0.028]),
             "rollout_gdro": ([-0.02] * 40, [-0.02, -0.018, -0.025, -0.02, -0.021]),
             "joint": ([0.02] * 20 + [-0.02] * 20, [])}
    summary = {"threshold": 0.01, "decisive": 0.95, "methods": {
        m: {metric: {"vs_tuned": over_worlds(np.array(worlds), 0.01)},
            "decided_by": {metric: {"vs_tuned": decided_by(np.array(moved), keys, 0.01)}} if moved else {}}
        for m, (worlds, moved) in cases.items()}}
    prompt, rollout, joint = plain_words(summary, metric)
    assert prompt == ("Prompt-GDRO vs tuned GRPO: better by more than 1 pp in 39 of 40 worlds the data allow; decided "
                      "most by the price of a step curvature (moves it 5.0 pp across its interval, flips it).")
    assert rollout == ("Rollout-GDRO vs tuned GRPO: worse by more than 1 pp in 40 of 40 worlds the data allow; decided "
                       "most by the price of a step curvature (moves it 0.5 pp across its interval).")
    assert joint == "joint Prompt+Rollout vs tuned GRPO: undecided: better in 20, worse in 20 of 40 worlds the data allow."


@pytest.mark.parametrize("args,message", [(["--samples", "/nonexistent"], "no such file"),
                                          (["--samples"], "expected at least one argument")])
def test_bad_calibrate_input_is_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert calibrate_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_bad_predict_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "w.toml").write_text("[world]\nnum_groups = 'many'\n")
    assert predict_main([str(tmp_path / "w.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gdro predict: error:") and len(err.splitlines()) == 1
    assert predict_main([str(tmp_path / "missing.toml")]) == 2
    assert f"WORLD {tmp_path / 'missing.toml'} does not exist" in capsys.readouterr().err


def test_lm_comparison_end_to_end(calibrated: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """lmcompare reads a study summary.json (here a made-up 2-seed one), predicts at its design, writes the report."""
    import json

    from simulators.calibrate import lmcompare

    final = {m: {"pass@1": [0.30 + d, 0.31 + d], "pass@8": [0.50, 0.49 + d]} for m, d in
             (("grpo", 0.0), ("grpo_matched_first", 0.01), ("grpo_matched_second", 0.01), ("prompt_gdro", 0.02),
              ("rollout_gdro", -0.01), ("joint", 0.0))}
    summary = {"final": final, "initial": {"pass@1": [0.25, 0.26], "pass@8": [0.5, 0.5]},
               "tuned_grpo": {"final": {"pass@1": [0.33, 0.32], "pass@8": [0.5, 0.5]}},
               "config": {"steps": 8, "prompts_per_step": 32, "n_bar": 4, "n_min": 2, "n_max": 12, "lr": 1.0}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    code = lmcompare.main(["--calibration", str(calibrated), "--study", str(tmp_path / "summary.json"), "--out",
                           str(tmp_path / "out"), "--draws", "2", "--seeds", "1", "--workers", "1",
                           "--work", str(tmp_path / "work")])
    assert code == 0
    from studykit.provenance import code_digest  # comparison.json records the code that made it

    block = json.loads((tmp_path / "out" / "comparison.json").read_text())["provenance"]
    assert block["entry"] == ["simulators.calibrate.lmcompare"]
    assert block["code_digest"] == code_digest(["simulators.calibrate.lmcompare"])["code_digest"]
    assert block["command"] == (f"python -m simulators.calibrate.lmcompare --calibration {calibrated} --study "
                                f"{tmp_path / 'summary.json'} --out OUT --draws 2 --seeds 1 --workers 1")  # no --work
    assert block["settings"]["draws"] == 2 and not {"out", "work"} & set(block["settings"])
    assert str(tmp_path / "out") not in json.dumps(block) and str(tmp_path / "work") not in json.dumps(block)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Prompt-GDRO − GRPO" in report and "GRPO − warm start" in report and "Prediction error" in report
    rows = json.loads((tmp_path / "out" / "comparison.json").read_text())["rows"]
    prompt = next(r for r in rows if r["comparison"] == "Prompt-GDRO − GRPO" and r["metric"] == "pass@1")
    assert prompt["measured"][0] == pytest.approx(0.02)
    tuned = next(r for r in rows if r["comparison"] == "Prompt-GDRO − tuned GRPO" and r["metric"] == "pass@1")
    assert tuned["measured"][0] == pytest.approx(np.mean([0.32 - 0.33, 0.33 - 0.32]))  # paired by seed
    second = next(r for r in rows if r["comparison"].startswith("step-matched GRPO (c2") and r["metric"] == "pass@8")
    assert second["measured"][0] == pytest.approx(0.005)
    for row in rows:  # the error is measured - predicted median; its interval both intervals combined, the
        median, lo, hi = row["predicted"]  # predicted one's side towards the measurement
        assert lo <= median <= hi
        assert row["error"][0] == pytest.approx(row["measured"][0] - median)
        side = hi - median if row["measured"][0] >= median else median - lo
        assert row["error"][1] == pytest.approx(np.hypot(side, np.nan_to_num(row["measured"][1])))
        assert row["consistent"] == (abs(row["error"][0]) <= row["error"][1])


def test_predict_without_any_multiplier_matches_at_factor_one(tmp_path: Path) -> None:
    """When no prompt carries an advantage in any step (every group all-wrong: the quick LM study's calibrated world,
    4 steps), Prompt-GDRO's runs log no multiplier moment; step matching then falls back to factor 1 instead of failing."""
    from simulators.calibrate import predict

    settings = predict.Settings(draws=1, seeds=1, steps=2, batch=8, lr_scale=1.0, optimizer="sgd", workers=1,
                                out=tmp_path, n_bar=4, n_min=2, n_max=12)
    table = predict.run_all(settings, [{"num_prompts": 16, "num_groups": 2, "difficulty_offset": 20.0}], max_extension=0)
    assert table["matched_c1"].tolist() == [1.0] and table["matched_c2"].tolist() == [1.0]
    np.testing.assert_array_equal(table["grpo_matched_c1|test/accuracy"], table["grpo@1|test/accuracy"])
