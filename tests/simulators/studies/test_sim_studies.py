"""End to end: each study writes complete run directories and a report; the CLI fails in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gdro_lab import read_run
from gdro_lab.runformat.runlog import find_runs
from simulators import cli
from simulators.studies import curriculum_study

TINY = ["--seeds", "2", "--prompts", "400", "--batch", "32", "--no-progress"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check_report(out: Path, figures: int) -> dict:
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# Study") and "±" in report
    pngs = sorted(out.glob("fig_*.png"))
    assert len(pngs) >= figures and all(p.stat().st_size > 5000 for p in pngs)
    for png in pngs:
        assert f"({png.name})" in report
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_tiny_curriculum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cur"
    code, stdout, _ = run_cli(["curriculum", "--out", str(out), "--steps", "40", "--methods",
                               "grpo,class_gdro,prompt_gdro,joint", "--lr-grid", "0.707107,1", "--lr-extend", "1",
                               *TINY], capsys)
    assert code == 0 and stdout.strip().endswith(f"report: {(out / 'report.md').resolve()}")
    # The decision: one gain line per method and metric, one line per paper claim with a verdict.
    assert stdout.startswith("decision (held-out test split")
    gains_part, claims_part = stdout.split("paper claims")
    assert sum("tuned GRPO" in line and "step-matched √E[m²]" in line for line in gains_part.splitlines()) == 9
    assert sum(line.startswith("  step matching, ") for line in gains_part.splitlines()) == 3
    claim_lines = claims_part.strip().splitlines()[1:-1]
    from studykit.claims import CLAIMS
    assert len(claim_lines) == len(CLAIMS)  # every claim of the paper, tested or not
    assert all(line.split()[0] in ("direction", "untested") for line in claim_lines)  # a toy world never reproduces
    # every claim the study does not test is printed as untested, by name (the wave's end profiles, the
    # controllers' cost, the theorems the surrogate study tests), and nothing is "reproduced" in a toy world
    printed = {c.key: line for c, line in zip(CLAIMS, claim_lines)}
    assert all(c.text in printed[c.key] and c.paper in printed[c.key] for c in CLAIMS)
    for key in ("wave_profiles", "weight_entropy", "overhead", "lemma41", "eq27", "thm42", "six_bins", "wse"):
        assert printed[key].startswith("  untested"), key
    for key in ("pgdro_pass8", "pgdro_mean8", "toy_wg_gain", "wave", "toy_ema_vs_class"):
        assert printed[key].startswith("  direction only, "), key  # measured, but never on the paper's scale
    assert "relative held-out pass@8" in printed["pgdro_pass8"] and "+8.96 to +13.13%" in printed["pgdro_pass8"]
    assert "reproduced" not in claims_part.replace("reproduced / refuted", "")
    tuned = [line for line in gains_part.splitlines() if line.startswith("  tuned lr scales")]
    assert len(tuned) == 1 and "√2 steps" in tuned[0] and "EMA-debiased Prompt-GDRO" in tuned[0]
    assert any(line.startswith("  what decides it") and "world.curvature = 0.15" in line
               and "world.score_noise" in line for line in gains_part.splitlines())
    summary = check_report(out, 6)
    assert set(summary["metrics"]) == {"grpo", "class_gdro", "prompt_gdro", "joint"}
    assert set(summary["decision"]["gains"]) == {"class_gdro", "prompt_gdro", "joint"}
    factors = summary["step_match_factor"]["prompt_gdro"]
    assert factors["second"] >= factors["first"] > 1.0
    by_key = {c["key"]: c for c in summary["claims"]}
    assert by_key["toy_ema_vs_class"]["verdict"] != "untested" and by_key["wse"]["verdict"] == "untested"
    # every method's grid: the start (sqrt(2) steps) plus at most one extension step per side
    for method, grid in summary["decision"]["lr_grid"].items():
        assert {0.707106781187, 1.0} <= set(grid) and len(grid) <= 4, method
    runs = find_runs(out / "runs")
    matched = [p for p in runs if p.parent.name.startswith("grpo_matched_")]
    gridded = sum(len(g) for g in summary["decision"]["lr_grid"].values())
    assert len(runs) == gridded * 2 + len(matched) and len(matched) in (8, 10, 12)
    for path in runs:
        run = read_run(path)
        assert run.meta["status"] == "finished" and run.steps[-1] == 40 and run.evals
        assert len(run.steps) == 4  # log_every 10
        assert "multiplier_sq_mean" in run.scalars and "sim/forgetting" in run.scalars
        at_default = path.parent.name == "lr1"
        assert run.snapshot_steps == ([40] if path.name == "seed0" and at_default else [])
    assert_seeds_share_config(runs)
    for path in matched:  # a derived baseline names what it is matched to (the app labels it by these keys)
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        method, kind = path.parent.name.removeprefix("grpo_matched_").rsplit("_", 1)
        assert config["method"] == "grpo" and config["matched_to"] == method and config["match"] == f"{kind}_moment"
        factor = summary["step_match_factor"][method][kind]
        assert config["lr_scale"] == pytest.approx(factor, abs=1e-4)
    assert all("matched_to" not in json.loads((p / "config.json").read_text()) for p in runs if p not in matched)
    # Running again into the same folder replaces the simulator's own runs.
    assert run_cli(["curriculum", "--out", str(out), "--steps", "10", "--methods", "grpo", "--lr-grid", "1",
                    *TINY], capsys)[0] == 0
    assert len(find_runs(out / "runs")) == 2


def assert_seeds_share_config(runs: list[Path]) -> None:
    """Every seed folder of one method/lr writes the same config.json except its seed (the app groups
    runs by config-without-seed; seed 0 used to write snapshot_every 0 and the others -1)."""
    by_parent: dict[Path, list[dict]] = {}
    for path in runs:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        assert config["seed"] == int(path.name.removeprefix("seed"))
        by_parent.setdefault(path.parent, []).append({k: v for k, v in config.items() if k != "seed"})
    assert by_parent and all(len(configs) >= 2 for configs in by_parent.values())
    for parent, configs in by_parent.items():
        assert all(c == configs[0] for c in configs[1:]), f"seeds of {parent.name} differ beyond the seed"


def test_seed_config_check_catches_a_difference(tmp_path: Path) -> None:
    for seed, snap in ((0, 0), (1, -1)):
        (tmp_path / "m" / f"seed{seed}").mkdir(parents=True)
        (tmp_path / "m" / f"seed{seed}" / "config.json").write_text(json.dumps({"seed": seed, "snapshot_every": snap}))
    with pytest.raises(AssertionError, match="differ beyond the seed"):
        assert_seeds_share_config(sorted((tmp_path / "m").iterdir()))


def test_tiny_sqrt_law(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sqrt"
    code, stdout, _ = run_cli(["sqrt-law", "--out", str(out), "--steps", "40", "--methods",
                               "grpo,rollout_gdro,sqrt_oracle", "--lr-grid", "0.707107,1,1.41421", "--lr-extend", "0",
                               *TINY], capsys)
    assert code == 0
    summary = check_report(out, 4)
    assert set(summary["worlds"]) == {"base", "bimodal"}
    runs = find_runs(out / "runs")
    assert len(runs) == 2 * 3 * 3 * 2  # worlds x methods x lr {0.71, 1, 1.41} x seeds; no extra step-matched runs
    assert_seeds_share_config(runs)
    report = (out / "report.md").read_text(encoding="utf-8")
    # The tuned and step-matched baselines and held-out (test split) accuracy columns, per world.
    assert report.count("Δ vs tuned GRPO (pp)") == 2 and report.count("Δ vs step-matched √E[m²] (pp)") == 2
    assert report.count("held-out worst-group (%)") >= 2 and "final acc (%)" not in report
    for name, world in summary["worlds"].items():
        gains = world["decision"]["gains"]
        assert set(gains) == {"rollout_gdro", "sqrt_oracle"}
        grid = [0.707106781187, 1.0, 1.41421356237]
        assert world["decision"]["lr_grid"] == {m: grid for m in ("grpo", "rollout_gdro", "sqrt_oracle")}
        for method, entry in gains.items():
            for metric in ("test/worst_group_accuracy", "test/accuracy"):
                # Held-out gain vs GRPO at lr 1, recomputed from the run directories (paired by seed).
                mine = [read_run(out / "runs" / name / method / "lr1" / f"seed{s}").evals[-1]["metrics"][metric]
                        for s in range(2)]
                base = [read_run(out / "runs" / name / "grpo" / "lr1" / f"seed{s}").evals[-1]["metrics"][metric]
                        for s in range(2)]
                assert entry[metric]["vs_grpo"][0] == pytest.approx(float(np.mean(np.subtract(mine, base))))
                # Allocators do not reweight: both step-matched GRPOs are GRPO at the same lr.
                assert entry[metric]["vs_matched_first"] == entry[metric]["vs_grpo"]
                assert entry[metric]["vs_matched_second"] == entry[metric]["vs_grpo"]
                tuned = world["decision"]["tuned_lr"][metric]
                assert tuned[method] in grid and tuned["grpo"] in grid
        assert world["metrics"]["grpo"]["test/accuracy"][0] > 0
        assert world["step_match_factor"] == {m: {"first": 1.0, "second": 1.0} for m in ("rollout_gdro", "sqrt_oracle")}
    # The decision on stdout: one block per world, each with tuned gains and claim verdicts.
    assert stdout.count("decision (held-out test split") == 2 and stdout.count("sqrt-law, world `") == 2
    assert sum("| tuned GRPO " in line for line in stdout.splitlines()) == 2 * 2 * 3
    assert all(line.split()[0] == "direction" for line in stdout.splitlines() if "Rollout-GDRO raises" in line)


def test_tiny_surrogate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sur"
    code, _, _ = run_cli(["surrogate", "--out", str(out), "--steps", "200", "--seeds", "2", "--prompts", "300",
                          "--batch", "40", "--no-progress"], capsys)
    assert code == 0
    summary = check_report(out, 1)
    assert summary["sandwich_violations"] == 0 and summary["gap_below_bound_everywhere"] is True
    assert len(find_runs(out / "runs")) == 2
    by_key = {c["key"]: c["verdict"] for c in summary["claims"]}
    assert by_key["lemma41"] == "reproduced" and by_key["eq27"] == "reproduced" and by_key["wse"] == "untested"


@pytest.mark.slow
def test_tiny_ablation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "abl"
    code, _, _ = run_cli(["ablation", "--out", str(out), "--steps", "12", "--seeds", "2", "--prompts", "300",
                          "--batch", "32", "--no-progress"], capsys)
    assert code == 0
    summary = check_report(out, 1)
    assert len(summary["cells"]) == 64
    assert len(find_runs(out / "runs")) == 64 * 2 + len(summary["grpo_lr_grid"]) * 2  # GRPO on its own lr grid
    assert len(summary["grpo_lr_grid"]) >= 5
    fair = summary["fair_baselines"]
    # E[m] is over every trained prompt, √E[m²] over the rollouts that carry an advantage (studykit.stepmatch),
    # so √E[m²] may fall below E[m] (mean-1 cells: 1.00 / 0.98); both are positive and finite
    assert len(fair) == 64 and all(0 < e["mean_multiplier"] < 20 and 0 < e["rms_multiplier"] < 20 for e in fair)
    entry = fair[0]["test/worst_group_accuracy"]
    assert set(entry) == {"vs_grpo", "vs_matched_first", "vs_matched_second", "vs_tuned", "tuned_grpo_lr"}
    assert {c["key"]: c["verdict"] for c in summary["claims"]}["six_bins"].startswith("direction only")


@pytest.mark.parametrize("args, needle", [
    (["nope"], "invalid choice"),
    (["--seeds", "0"], "--seeds"),
    (["--steps", "ten"], "--steps"),
    (["curriculum", "--batch", "500", "--prompts", "100"], "--batch"),
    (["curriculum", "--methods", "grpo,foo"], "foo"),
    (["curriculum", "--interference", "3", "--steps", "5", "--prompts", "100", "--batch", "10"], "interference"),
    (["curriculum", "--prompts", "10", "--batch", "10", "--steps", "5"], "num_prompts"),
    (["--bogus"], "unrecognized"),
    (["--set", "world.trasnfer=0.5"], "trasnfer"),
    (["--set", "world.transfer=high"], "transfer"),
    (["--set", "prompt_gdro.eta=-1"], "eta"),
    (["--set", "galaxy.x=1"], "NAMESPACE"),
    (["--set", "world.transfer"], "KEY=VALUE"),
    (["--plugin", "no_such_module_xyz"], "no_such_module_xyz"),
    (["--lr-grid", "1,abc"], "--lr-grid"),
    (["--lr-grid", "0.25,0.5,1"], "at most sqrt(2)"),  # 2x steps are too coarse
    (["--lr-extend", "-1"], "--lr-extend"),
])
def test_bad_arguments_are_one_line_errors(args: list[str], needle: str, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    code, stdout, stderr = run_cli([*args, "--out", str(tmp_path / "x")], capsys)
    assert code == 2 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gdro simulate: error:") and needle in lines[0]
    assert "Traceback" not in stderr


def test_foreign_files_are_never_deleted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stray = tmp_path / "runs" / "notes.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("mine")
    code, _, stderr = run_cli(["curriculum", "--out", str(tmp_path), "--steps", "5", "--methods", "grpo", *TINY], capsys)
    assert code == 2 and "holds files gdro simulate did not write" in stderr and "nothing was written" in stderr
    assert stray.read_text() == "mine" and sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "runs", "runs/notes.txt"]


def test_help_and_default_study(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_cli(["--help"], capsys)
    assert code == 0 and "sqrt-law" in stdout and "--seeds" in stdout
    seen = {}

    def fake_run(settings):
        seen["settings"] = settings
        return Path("reports/curriculum/report.md")

    monkeypatch.setattr(curriculum_study, "run", fake_run)
    code, stdout, _ = run_cli([], capsys)
    s = seen["settings"]
    assert code == 0 and "report:" in stdout
    assert (s.seeds, s.steps, s.prompts, s.batch, s.workers) == (5, 400, 4000, 128, 2)
    # Outputs go to ./gdro-runs (gitignored), never into the repository's reports/.
    assert s.out == Path("gdro-runs") / "curriculum" and s.methods == ()
    code, stdout, _ = run_cli(["--full"], capsys)
    s = seen["settings"]
    assert (s.steps, s.prompts, s.batch) == (1000, 14116, 256) and len(s.methods) == 8 and 0.5 in s.lr_grid
    assert all(b / a < 1.4143 for a, b in zip(s.lr_grid, s.lr_grid[1:])) and s.lr_extend == 8


def test_update_reports_copies_only_with_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "repo_reports"
    monkeypatch.setattr(cli, "repository_reports", lambda: reports)
    out = tmp_path / "cur"
    args = ["curriculum", "--out", str(out), "--steps", "10", "--lr-grid", "1", *TINY]
    assert run_cli(args, capsys)[0] == 0
    assert not reports.exists()
    code, stdout, _ = run_cli([*args, "--update-reports"], capsys)
    assert code == 0 and f"updated: {(reports / 'curriculum' / 'report.md').resolve()}" in stdout
    copied = sorted(p.name for p in (reports / "curriculum").iterdir())
    assert "report.md" in copied and "summary.json" in copied and any(n.startswith("fig_") for n in copied)
    assert not (reports / "curriculum" / "runs").exists()


def test_a_run_with_other_methods_never_replaces_the_default_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """--update-reports with --methods (or --set) must name its report: the default study's stays."""
    reports = tmp_path / "repo_reports"
    (reports / "curriculum").mkdir(parents=True)
    (reports / "curriculum" / "report.md").write_text("the default study's report")
    monkeypatch.setattr(cli, "repository_reports", lambda: reports)
    args = ["curriculum", "--steps", "10", "--methods", "grpo", "--lr-grid", "1", *TINY]
    code, _, err = run_cli([*args, "--out", str(tmp_path / "a"), "--update-reports"], capsys)
    assert code == 2 and "--update-reports curriculum-custom" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists(), "refused before any compute"
    code, _, err = run_cli([*args, "--out", str(tmp_path / "b"), "--update-reports", "sqrt-law"], capsys)
    assert code == 2 and "gdro simulate sqrt-law --update-reports" in err
    code, stdout, _ = run_cli([*args, "--out", str(tmp_path / "c"), "--update-reports", "curriculum-grpo"], capsys)
    assert code == 0 and (reports / "curriculum-grpo" / "summary.json").is_file()
    assert (reports / "curriculum" / "report.md").read_text() == "the default study's report"
    made = json.loads((reports / "curriculum-grpo" / "summary.json").read_text())["provenance"]["command"]
    kept = [word for word in args if word != "--no-progress"]
    assert made == " ".join(["gdro simulate", *kept, "--update-reports", "curriculum-grpo"]), \
        "rerunnable anywhere: the machine's --out and progress switch left out"


def test_plain_progress_lines_when_not_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from simulators import parallel
    bar = parallel.PlainProgress(100, "demo", every=0.0)
    bar.update(40)
    bar.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("demo: 40/100 steps (40%)") and lines[-1].startswith("demo: 40/100")
