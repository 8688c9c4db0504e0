"""`gdro eval`: metrics through a fake engine, the tiny model end to end, appends, bad inputs."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

from gdro_cli.main import main as gdro
from gdro_lab.runformat.runlog import RunWriter, read_run
from real_runs import eval_cli
from real_runs.data import format_prompt, load_dataset_records
from real_runs.types import Rollouts, SamplingParams

K, N = 2, 4


def _correct_count(problem_id: str) -> int:
    """How many of the N samples the fake engine gets right for a prompt (0..N, by row)."""
    return int(problem_id.rsplit(":", 1)[1]) % (N + 1)


class FakeEngine:
    """Answers prompt i right in its first c_i samples and wrong in the others."""

    def __init__(self, problems) -> None:
        self.by_prompt = {format_prompt(p, None): p for p in problems}
        self.calls: list[SamplingParams] = []

    def generate(self, prompts, counts_P, sampling):
        self.calls.append(sampling)
        texts = []
        for prompt, count in zip(prompts, counts_P):
            problem = self.by_prompt[prompt]
            right = _correct_count(problem.id)
            for j in range(count):
                if problem.source == "gpqa":
                    letter = problem.answer[0] if j < right else "ABCD"[("ABCD".index(problem.answer[0]) + 1) % 4]
                    texts.append(f"so the answer is \\boxed{{{letter}}}")
                else:
                    texts.append(f"\\boxed{{{problem.answer}}}" if j < right else "\\boxed{-987654}")
        total = int(np.sum(counts_P))
        return Rollouts(np.asarray(counts_P), [[1]] * len(prompts), [[1, 2]] * total,
                        [np.zeros(2, np.float32)] * total, texts, ["stop"] * total)

    def load_weights(self, state_dict) -> None:
        pass


@pytest.fixture
def fake_engine(monkeypatch, data_dir):
    holder = {}

    def load(args):
        problems = [p for b in args.benchmarks.split(",") for p in load_dataset_records(b, limit=args.limit)]
        holder["engine"] = FakeEngine(problems)
        return holder["engine"], None

    monkeypatch.setattr(eval_cli, "_load_engine", load)
    return holder


def _brute_pass(c: int, n: int, k: int) -> float:
    subsets = list(itertools.combinations([True] * c + [False] * (n - c), k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_metrics_through_a_fake_engine(fake_engine, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    rc = gdro(["eval", "--model", "fake", "--benchmarks", "math500,aime24,gpqa", "--limit", "12",
               "--k", str(K), "--n", str(N), "--out", str(out), "--num-boot", "100",
               "--batch-prompts", "5", "--save-samples"])
    assert rc == 0
    run = read_run(out)
    assert run.meta["producer"] == "gdro eval" and run.meta["status"] == "finished"
    assert len(run.evals) == 1 and run.evals[0]["step"] == 0
    metrics = run.evals[0]["metrics"]
    for bench in ("math500", "aime24", "gpqa"):
        counts = [_correct_count(p.id) for p in load_dataset_records(bench, limit=12)]
        assert metrics[f"{bench}/mean@{K}"] == pytest.approx(np.mean(counts) / N)
        assert metrics[f"{bench}/pass@{K}"] == pytest.approx(np.mean([_brute_pass(c, N, K) for c in counts]))
        assert metrics[f"{bench}/mean@{K}_lo"] <= metrics[f"{bench}/mean@{K}"] <= metrics[f"{bench}/mean@{K}_hi"]
    assert metrics["pooled/num_prompts"] == 36
    math500 = load_dataset_records("math500", limit=12)
    group_means = {}
    for problem in math500:
        group_means.setdefault(problem.group, []).append(_correct_count(problem.id) / N)
    for group, values in group_means.items():
        assert metrics[f"group/{group}/mean@{K}"] == pytest.approx(np.mean(values))
    all_groups = [np.mean(v) for v in group_means.values()] + [metrics["aime24/mean@2"], metrics["gpqa/mean@2"]]
    assert metrics[f"worst_group/mean@{K}"] == pytest.approx(min(all_groups))
    assert metrics[f"worst_benchmark/mean@{K}"] == pytest.approx(
        min(metrics[f"{b}/mean@{K}"] for b in ("math500", "aime24", "gpqa")))
    # The paper's validation sampling is the default; chunks get distinct seeds.
    calls = fake_engine["engine"].calls
    assert {(c.temperature, c.top_p, c.top_k, c.max_new_tokens) for c in calls} == {(0.6, 0.8, 20, 4096)}
    assert len(calls) == 8 and len({c.seed for c in calls}) == 8
    samples = (out / "eval_samples_step0.jsonl").read_text().splitlines()
    assert len(samples) == 36 * N
    first = json.loads(samples[0])  # gdro calibrate reads each prompt's group label, source and token count
    assert {"group", "source", "tokens"} <= set(first) and first["source"] in ("math500", "aime24", "gpqa")
    table = capsys.readouterr().out
    assert "math500" in table and "worst group:" in table and "worst benchmark:" in table


def test_append_to_a_live_trainer_run(fake_engine, tmp_path: Path) -> None:
    run_dir = tmp_path / "trainer"
    writer = RunWriter(run_dir, {"lr": 1e-6}, num_bins=3, producer="trainer")
    for step in range(4):
        writer.log_step(step, {"loss": 0.1 * step}, {"count": [1, 2, 3]})
    rc = gdro(["eval", "--model", "fake", "--benchmarks", "aime24", "--limit", "5", "--k", "1",
               "--n", "2", "--run", str(run_dir), "--num-boot", "50"])
    assert rc == 0
    writer.log_step(4, {"loss": 0.4}, {"count": [1, 2, 3]})
    writer.log_eval(4, {"aime24/mean@1": 0.5})
    writer.close()
    run = read_run(run_dir)
    assert [e["step"] for e in run.evals] == [3, 4]
    assert run.evals[0]["metrics"]["aime24/num_prompts"] == 5
    assert run.steps.tolist() == [0, 1, 2, 3, 4] and run.meta["status"] == "finished"
    assert run.meta["producer"] == "trainer" and run.config == {"lr": 1e-6}
    rc = gdro(["eval", "--model", "fake", "--benchmarks", "aime24", "--limit", "2", "--k", "1",
               "--run", str(run_dir), "--step", "7", "--num-boot", "10"])
    assert rc == 0 and [e["step"] for e in read_run(run_dir).evals] == [3, 4, 7]


def _one_line_error(capsys, argv: list[str], match: str) -> None:
    try:
        rc = gdro(argv)
    except SystemExit as exit_:  # argparse's own errors
        rc = exit_.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gdro eval: ") and "\n" not in err and "Traceback" not in err
    assert match in err, err


def test_bad_inputs_are_one_line_errors(tmp_path: Path, capsys, monkeypatch, data_dir) -> None:
    base = ["eval", "--model", "tiny", "--limit", "2"]
    _one_line_error(capsys, ["eval", "--k", "2"], "the following arguments are required: --model")
    _one_line_error(capsys, base + ["--k", "two"], "argument --k: invalid int value: 'two'")
    _one_line_error(capsys, base + ["--engine", "jax"], "argument --engine: invalid choice")
    _one_line_error(capsys, base + ["--benchmarks", "math500,math501"], "unknown benchmark 'math501'")
    _one_line_error(capsys, base + ["--k", "8", "--n", "4"], "--k 8 is larger than the 4 samples")
    _one_line_error(capsys, base + ["--k", "0"], "--k 0: use k >= 1")
    _one_line_error(capsys, base + ["--out", "a", "--run", "b"], "not both")
    _one_line_error(capsys, base + ["--run", str(tmp_path)], "not a gdro run directory")
    existing = tmp_path / "existing"
    RunWriter(existing, {}, num_bins=1, producer="x").close()
    _one_line_error(capsys, base + ["--out", str(existing)], "already holds a run")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    _one_line_error(capsys, base + ["--out", str(foreign)], "holds files gdro eval did not write")
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    (existing / "eval.jsonl").write_text('{"step": 0, "metrics": {}}\n{"step": 1, "metr')
    _one_line_error(capsys, base + ["--run", str(existing)], "ends with a half-written line")
    assert (existing / "eval.jsonl").read_text().endswith('"metr')  # nothing was changed
    folder = tmp_path / "noweights"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    _one_line_error(capsys, ["eval", "--model", str(folder), "--benchmarks", "aime24", "--limit", "1",
                             "--out", str(tmp_path / "o1")], "has no weights")
    assert not (tmp_path / "o1").exists()
    monkeypatch.setenv("GDRO_DATA", str(tmp_path / "nodata"))
    _one_line_error(capsys, base + ["--benchmarks", "aime24", "--out", str(tmp_path / "o2")],
                    "aime24/test.jsonl is missing")


def test_missing_dependency_hint_points_at_the_train_extra(monkeypatch, capsys) -> None:
    import importlib

    real = importlib.import_module

    def without_torch(name, *args):
        if name == "real_runs.eval_cli":
            raise ImportError("No module named 'torch'", name="torch")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_torch)
    assert gdro(["eval", "--model", "tiny"]) == 2
    err = capsys.readouterr().err
    assert err == "gdro eval: missing dependency (torch): install with pip install -e '.[train]'\n"


@pytest.mark.slow
def test_tiny_model_end_to_end(tmp_path: Path, capsys, data_dir) -> None:
    """Random weights: the tiny model writes token soup, so every metric is ~0 (the reward never
    sees the right \\boxed{} answer); what is checked is the pipeline and the run directory."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    out = tmp_path / "tiny"
    argv = ["eval", "--model", "tiny", "--benchmarks", "math500,aime24", "--limit", "16", "--k", "2",
            "--max-new-tokens", "24", "--num-boot", "200", "--save-samples", "--batch-prompts", "10",
            "--max-batch-tokens", "2000"]
    assert gdro(argv + ["--out", str(out)]) == 0
    # Same seed, same samples and metrics (the engine seeds each chunk from --seed).
    assert gdro(argv + ["--out", str(tmp_path / "again")]) == 0
    again = read_run(tmp_path / "again").evals[0]["metrics"]
    texts = [(out / "eval_samples_step0.jsonl").read_text(), (tmp_path / "again" / "eval_samples_step0.jsonl").read_text()]
    assert texts[0] == texts[1]
    assert gdro(argv + ["--out", str(tmp_path / "seed1"), "--seed", "1"]) == 0
    assert (tmp_path / "seed1" / "eval_samples_step0.jsonl").read_text() != texts[0]
    metrics = read_run(out).evals[0]["metrics"]
    assert metrics["math500/num_prompts"] == 16 and metrics["aime24/num_prompts"] == 16
    assert metrics["pooled/mean@2"] < 0.05 and metrics["worst_group/mean@2"] == 0.0
    assert 0 < metrics["eval/mean_response_tokens"] <= 24
    samples = [json.loads(line) for line in (out / "eval_samples_step0.jsonl").read_text().splitlines()]
    assert len(samples) == 64 and len({s["id"] for s in samples}) == 32
    assert sum(s["tokens"] for s in samples) / 64 == pytest.approx(metrics["eval/mean_response_tokens"])
    assert {k: v for k, v in again.items() if k != "time/eval"} == {
        k: v for k, v in metrics.items() if k != "time/eval"}
    assert "pooled" in capsys.readouterr().out


def test_gdro_eval_and_the_trainer_share_one_metric_vocabulary(tmp_path: Path, data_dir) -> None:
    """The trainer's evaluation and `gdro eval` on the same problems and samples give the same metric
    names and the same values (bootstrap bounds and time aside): `eval/truncated` is a share in both,
    `eval/mean_response_tokens` and `eval/reward/*` are named alike."""
    from real_runs import eval_scoring
    from real_runs.config import load_config
    from real_runs.rewards.math import MathReward
    problems = [p for b in ("math500", "aime24", "gpqa") for p in load_dataset_records(b, limit=6)]
    cfg = load_config("tiny-cpu", ["eval.k=2", "train.prompts_per_step=5"])
    with MathReward(timeout_s=5.0, num_workers=1) as reward:
        trainer = eval_scoring.evaluate(cfg, FakeEngine(problems), None, problems, reward, step=3)
    out = tmp_path / "cli"
    import real_runs.eval_cli as cli
    original = cli._load_engine
    cli._load_engine = lambda args: (FakeEngine(problems), None)
    try:
        assert gdro(["eval", "--model", "fake", "--benchmarks", "math500,aime24,gpqa", "--limit", "6", "--k", "2",
                     "--out", str(out), "--num-boot", "100", "--batch-prompts", "5"]) == 0
    finally:
        cli._load_engine = original
    cli_metrics = read_run(out).evals[0]["metrics"]
    assert set(trainer) == set(cli_metrics)
    for name in ("eval/samples", "eval/mean_response_tokens", "eval/truncated", "eval/reward/timeouts",
                 "eval/reward/errors", "time/eval"):
        assert name in trainer
    assert trainer["eval/samples"] == 36 and trainer["eval/truncated"] == 0.0 and trainer["eval/mean_response_tokens"] == 2
    for name, value in trainer.items():
        if not name.endswith(("_lo", "_hi")) and name != "time/eval":
            assert cli_metrics[name] == pytest.approx(value), name


def test_a_checkpoint_is_logged_at_its_own_step(fake_engine, tmp_path: Path, capsys) -> None:
    """`gdro eval --model RUN/checkpoints/step_00000006` logs its result at step 6 (it logged step 0);
    a run directory means its newest complete checkpoint; --step still wins; other models stay at 0."""
    run_dir = tmp_path / "train-run"
    writer = RunWriter(run_dir, {}, num_bins=1, producer="gdro train")
    for step in range(1, 9):
        writer.log_step(step, {"loss": 0.0}, {"count": [1]})
    writer.close()
    for step in (4, 6):
        folder = run_dir / "checkpoints" / f"step_{step:08d}"
        folder.mkdir(parents=True)
        (folder / "trainer.pt").write_bytes(b"")
    base = ["eval", "--benchmarks", "aime24", "--limit", "2", "--k", "1", "--num-boot", "10"]
    cases = [(["--model", str(run_dir / "checkpoints" / "step_00000006")], 6),
             (["--model", str(run_dir / "checkpoints" / "step_00000004")], 4),
             (["--model", str(run_dir)], 6),
             (["--model", str(run_dir / "checkpoints" / "step_00000004"), "--step", "9"], 9),
             (["--model", "fake"], 0)]
    for index, (model, step) in enumerate(cases):
        out = tmp_path / f"out{index}"
        assert gdro(base + model + ["--out", str(out)]) == 0
        assert [e["step"] for e in read_run(out).evals] == [step], model
        assert f"(step {step})" in capsys.readouterr().out
    # appended to the training run itself: at the checkpoint's step, not the run's last logged one
    assert gdro(base + ["--model", str(run_dir / "checkpoints" / "step_00000004"), "--run", str(run_dir)]) == 0
    assert gdro(base + ["--model", "fake", "--run", str(run_dir)]) == 0
    assert [e["step"] for e in read_run(run_dir).evals] == [4, 8]


def test_progress_names_the_run_first_then_each_benchmark_and_batch(monkeypatch, tmp_path: Path, capsys,
                                                                     data_dir) -> None:
    """The first line is the run directory; the model load is a phase with a heartbeat (the interval
    lowered, the load held until a beat came: no sleeping, no timing); each benchmark's 0/N and the
    overall 0/N come before the first batch generates; each batch's count, the time so far and an
    estimate of the time left after it; the count reaches N/N."""
    import threading

    from real_runs import progress
    problems = [p for b in ("math500", "aime24") for p in load_dataset_records(b, limit=6)]
    lines: list[str] = []
    beat = threading.Event()

    def record(line: str) -> None:
        lines.append(line)
        if "still running" in line:
            beat.set()

    class Engine(FakeEngine):
        def generate(self, prompts, counts_P, sampling):
            engine.before_first = engine.before_first if engine.before_first is not None else list(lines)
            return super().generate(prompts, counts_P, sampling)

    engine = Engine(problems)
    engine.before_first = None

    def load(args):
        assert beat.wait(600), lines  # the load lasts until its heartbeat has been printed
        return engine, None

    monkeypatch.setattr(progress, "EVERY_S", 0.01)
    monkeypatch.setattr(eval_cli, "_progress", record)
    monkeypatch.setattr(eval_cli, "_load_engine", load)
    out = tmp_path / "ev"
    assert gdro(["eval", "--model", "fake", "--benchmarks", "math500,aime24", "--limit", "6", "--k", "2",
                 "--out", str(out), "--num-boot", "50", "--batch-prompts", "4"]) == 0
    assert lines[0] == f"gdro eval: run directory {out} (a new run; results once every benchmark is scored)"
    assert lines[1] == "gdro eval: model load (fake on cpu, engine hf) started"
    assert any(line.startswith("gdro eval: model load (fake on cpu, engine hf) still running after ") for line in lines)
    assert "gdro eval: 12 prompts x 2 samples in 3 batches of up to 4: math500 6, aime24 6" in engine.before_first
    assert "gdro eval: 0/12 prompts (batch 1/3 generating)" in engine.before_first
    assert "gdro eval: benchmark math500: 0/6 prompts (batch 1/3)" in engine.before_first
    counts = [line for line in lines if re.match(r"gdro eval: \d+/12 prompts, ", line)]
    assert [c.split(",")[0] for c in counts] == ["gdro eval: 4/12 prompts", "gdro eval: 8/12 prompts",
                                                 "gdro eval: 12/12 prompts"]
    assert all(" so far, about " in c and " left (batch " in c for c in counts[:2]), counts
    assert counts[1].endswith("(batch 2/3; math500 6/6, aime24 2/6)"), counts
    assert lines.index("gdro eval: benchmark aime24: 0/6 prompts (batch 2/3)") < lines.index(counts[1])
    assert "gdro eval: benchmark aime24: 6/6 prompts done" in lines[-2:]
    assert "pooled" in capsys.readouterr().out
