"""The setup helpers of `gdro train` (real_runs/train_setup.py): which model, tokenizer and records a
run trains on and how they are loaded (``_load_model``, ``_load_data``), the run folder it writes
(``_new_run``), which runs can be resumed and with which config (``check_resumable``,
``load_run_config``), the rewards (``make_rewards``), mixed precision (``_autocast``) and the
evaluation call (``real_runs.eval_scoring.evaluate``).

End-to-end runs pass the model, records and reward in, so they never see these arguments go
wrong: each is checked here against the configuration, with stand-ins recording what they are
given (no data files, no model downloads, no reward pool: these tests also serve mutation
testing, whose forked workers cannot start the math reward's process pool; docs/benchmarks.md).
"""

from __future__ import annotations

import json
import re
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_lab.runformat.runlog import RunLock, RunWriter, read_run  # noqa: E402
from real_runs import eval_scoring, preflight, train_setup  # noqa: E402
from real_runs.config import config_to_dict, load_config  # noqa: E402
from real_runs.preflight import TrainError  # noqa: E402
from real_runs.types import Problem, RewardResult, Rollouts  # noqa: E402

RECORDS = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(3)]


def tiny(*overrides: str):
    return load_config("tiny-cpu", ["train.progress=false", "eval.every=0", *overrides])


# ----------------------------------------------------------------------------- _load_model, _load_data

class FakeModel:
    def __init__(self, name: str):
        self.name, self.moved_to = name, []

    def to(self, device):
        self.moved_to.append(device)
        return self


class WordTokenizer:
    """A tokenizer without a chat template: one token per word."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": text.split()}


@pytest.fixture
def loads(monkeypatch):
    """Replaces the model loader and the data loaders; returns the list of calls they got."""
    import real_runs.data
    import real_runs.models

    calls: list = []

    def load_policy(*args, **kwargs):
        calls.append(("load_policy", args, kwargs))
        return FakeModel("loaded"), "loaded tokenizer"

    def load_train_records(*args, **kwargs):
        calls.append(("load_train_records", args, kwargs))
        return RECORDS[:2], {"skipped": 5}

    def load_dataset_records(*args, **kwargs):
        calls.append(("load_dataset_records", args, kwargs))
        return [Problem(f"{args[0]}:test:0", "Solve.", "1", args[0], args[0])]

    monkeypatch.setattr(real_runs.models, "load_policy", load_policy)
    monkeypatch.setattr(real_runs.data, "load_train_records", load_train_records)
    monkeypatch.setattr(real_runs.data, "load_dataset_records", load_dataset_records)
    return calls


@pytest.mark.parametrize("dtype,attn,expect_dtype,expect_attn", [
    ("auto", "auto", "float32", None),           # auto: fp32 master weights, the loader's attention default
    ("bfloat16", "sdpa", "bfloat16", "sdpa"),
    ("float16", "eager", "float16", "eager"),
])
def test_load_model_loads_the_configured_model(loads, dtype, attn, expect_dtype, expect_attn):
    cfg = tiny("model.name=tiny-qwen", f"model.dtype={dtype}", f"model.attn_implementation={attn}", "train.seed=11")
    model, tokenizer = train_setup._load_model(cfg, None, None, torch.device("cpu"))
    assert loads == [("load_policy", ("tiny-qwen",), {"device": "cpu", "dtype": expect_dtype,
                                                      "attn_implementation": expect_attn, "seed": 11})]
    assert model.name == "loaded" and model.moved_to == [torch.device("cpu")] and tokenizer == "loaded tokenizer"


def test_load_model_keeps_what_is_passed_in_and_loads_only_the_rest(loads):
    cfg = tiny()
    device = torch.device("cpu")
    given = FakeModel("given")
    model, tokenizer = train_setup._load_model(cfg, given, "given tokenizer", device)
    assert loads == [] and model is given and tokenizer == "given tokenizer" and given.moved_to == [device]
    model, tokenizer = train_setup._load_model(cfg, given, None, device)      # the tokenizer only
    assert [c[0] for c in loads] == ["load_policy"] and model is given and tokenizer == "loaded tokenizer"
    model, tokenizer = train_setup._load_model(cfg, None, "given tokenizer", device)  # the model only
    assert [c[0] for c in loads] == ["load_policy"] * 2
    assert model.name == "loaded" and tokenizer == "given tokenizer"


def test_load_data_loads_the_configured_records_and_evaluation_sets(loads):
    cfg = tiny("eval.every=2", 'eval.benchmarks=["aime24","amc23"]', "eval.limit=3")
    records, texts, problems, summary = train_setup._load_data(cfg, None, None, WordTokenizer())
    assert loads == [("load_train_records", (cfg,), {}), ("load_dataset_records", ("aime24",), {"limit": 3}),
                     ("load_dataset_records", ("amc23",), {"limit": 3})]
    assert records == RECORDS[:2] and texts == [data_format(p) for p in RECORDS[:2]]
    assert [p.source for p in problems] == ["aime24", "amc23"]
    assert summary == {"skipped": 5, "dropped_too_long": 0, "prompts": 2}


def test_load_data_keeps_the_records_given_and_drops_long_prompts(loads, capsys):
    short, long = (Problem("toy:train:short", "Hi.", "0", "toy", "toy"),
                   Problem("toy:train:long", "Say something long.", "0", "toy", "toy"))
    given = {"toy": [short]}
    limit = len(data_format(short).split())
    cfg = tiny("eval.every=1", f"rollout.max_prompt_tokens={limit}")
    records, texts, problems, summary = train_setup._load_data(cfg, (short, long), given, WordTokenizer())
    assert loads == [] and records == [short] and texts == [data_format(short)] and problems == [short]
    assert summary == {"dropped_too_long": 1, "prompts": 1}
    assert f"dropped 1 of 2 training prompts longer than rollout.max_prompt_tokens={limit}" in capsys.readouterr().err
    assert train_setup._load_data(tiny(), [short], None, WordTokenizer())[2] == []   # eval.every=0: no evaluation


def test_load_data_refuses_a_data_set_without_records_or_evaluation_problems(loads):
    cfg = tiny("data.train=/some/answers.jsonl")
    with pytest.raises(TrainError) as err:
        train_setup._load_data(cfg, [], None, WordTokenizer())
    message = str(err.value)
    assert message.startswith("data.train='/some/answers.jsonl' has no usable records (every row lacked a problem")
    assert message.endswith("or an answer): pass a data set with answers")
    with pytest.raises(TrainError, match="eval.every > 0 but the evaluation sets hold no problem"):
        train_setup._load_data(tiny("eval.every=1"), RECORDS, {"toy": []}, WordTokenizer())


def data_format(problem: Problem) -> str:
    from real_runs.data import format_prompt
    return format_prompt(problem)


# ----------------------------------------------------------------------------- _new_run, resumes

def test_new_run_writes_the_config_the_producer_and_one_accuracy_bin_label_per_bin(tmp_path: Path):
    cfg = tiny("method.num_bins=3", "method.classifier_config.edges=[0.3, 0.6]")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = RunLock(run_dir).acquire()
    try:
        # under the caller's lock: a second one would be refused
        writer = train_setup._new_run(config_to_dict(cfg), run_dir, lock)
        writer.close("stopped")
    finally:
        lock.release()
    run = read_run(run_dir)
    assert run.meta["producer"] == "gdro train" and run.meta["num_bins"] == 3
    assert run.meta["bin_labels"] == ["accbin_0", "accbin_1", "accbin_2"]
    assert run.config == json.loads(json.dumps(config_to_dict(cfg)))


def write_run(run_dir: Path, producer: str = "gdro train", status: str = "stopped", checkpoint: str = "full",
              config: dict | None = None) -> Path:
    """A run folder as the trainer leaves it; ``checkpoint``: "full" (resumable), "model" (no
    optimizer state) or "none"."""
    writer = RunWriter(run_dir, config if config is not None else config_to_dict(tiny()), 2, producer)
    writer.close(status)
    if checkpoint != "none":
        step = run_dir / "checkpoints" / "step_00000002"
        step.mkdir(parents=True)
        (step / "trainer.pt").write_bytes(b"")
        if checkpoint == "full":
            (step / "optimizer.pt").write_bytes(b"")
    return run_dir


def test_check_resumable_accepts_a_stopped_train_run_with_a_checkpoint(tmp_path: Path):
    run_dir = write_run(tmp_path / "run")
    assert train_setup.check_resumable(str(run_dir)) == run_dir
    assert train_setup.check_resumable(run_dir) == run_dir


@pytest.mark.parametrize("kind,start,end", [
    ("foreign folder", "not a gdro run directory", "pass a folder written by gdro train"),
    ("simulator run", "written by 'gdro simulate', not gdro train", "only gdro train runs can be resumed"),
    ("finished", "the run already finished", "start a new run to train more"),
    ("finished, no checkpoint", "the run already finished", "start a new run to train more"),
    ("no checkpoint", "no complete checkpoint yet", "(or use another train.run_name)"),
    ("model-only checkpoint", "no complete checkpoint yet", "(or use another train.run_name)"),
])
def test_check_resumable_refuses_each_kind_of_folder_with_its_reason(tmp_path: Path, kind, start, end):
    run_dir = tmp_path / "run"
    if kind == "foreign folder":
        run_dir.mkdir()
        (run_dir / "meta.json").write_text('{"format": "something else"}')
    else:
        write_run(run_dir, producer="gdro simulate" if kind == "simulator run" else "gdro train",
                  status="finished" if kind.startswith("finished") else "stopped",
                  checkpoint={"no checkpoint": "none", "finished, no checkpoint": "none",
                              "model-only checkpoint": "model"}.get(kind, "full"))
    with pytest.raises(TrainError) as err:
        train_setup.check_resumable(str(run_dir))
    message = str(err.value)
    assert message.startswith(f"--resume {run_dir}: {start}") and message.endswith(end), message


def test_load_run_config_is_the_saved_config_without_the_studys_labels(tmp_path: Path):
    cfg = tiny("train.seed=5", "optim.lr=3e-3", "method.name=prompt_gdro", "train.steps=7")
    saved = config_to_dict(cfg)
    labelled = write_run(tmp_path / "labelled", config={**saved, "matched_to": "joint-s5", "match": {"steps": 7}})
    plain = write_run(tmp_path / "plain", config=saved)
    for run_dir in (labelled, plain):
        assert config_to_dict(train_setup.load_run_config(str(run_dir))) == json.loads(json.dumps(saved))


# ----------------------------------------------------------------------------- _rewards, _autocast

def test_rewards_passed_in_score_training_and_evaluation():
    mine = object()
    assert train_setup.make_rewards(tiny("rollout.reward=toy"), mine) == (mine, mine, [])
    assert train_setup.make_rewards(tiny("rollout.reward=math"), mine) == (mine, mine, [])


def test_the_toy_reward_trains_says_so_on_stderr_and_leaves_evaluation_to_the_math_reward(capsys):
    from real_runs.rewards.toy import ToyOddsReward

    training, evaluation, owned = train_setup.make_rewards(tiny("rollout.reward=toy"), None)
    assert isinstance(training, ToyOddsReward) and evaluation is None and owned == []
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("gdro train: rollout.reward=toy: a toy reward with known per-prompt odds, NOT the math reward "
                   "(real_runs/rewards/toy.py); evaluation uses the math reward\n")


def test_the_math_reward_gets_the_configured_timeout_and_workers_and_is_owned_by_the_trainer(monkeypatch):
    import real_runs.rewards.math

    made: list = []

    class RecordingMathReward:
        def __init__(self, *args, **kwargs):
            made.append((args, kwargs))

    monkeypatch.setattr(real_runs.rewards.math, "MathReward", RecordingMathReward)   # no worker pool starts
    training, evaluation, owned = train_setup.make_rewards(tiny("rollout.reward=math", "rollout.reward_timeout_s=7.5",
                                                      "rollout.reward_workers=3"), None)
    assert made == [((), {"timeout_s": 7.5, "num_workers": 3})]
    assert isinstance(training, RecordingMathReward) and evaluation is training and owned == [training]


@pytest.mark.parametrize("mode,device,expected", [
    ("auto", "cpu", None), ("auto", "cuda", "cuda"), ("bf16", "cpu", "cpu"), ("bf16", "cuda", "cuda"),
    ("off", "cpu", None), ("off", "cuda", None),
])
def test_autocast_is_bf16_on_cuda_by_default_on_any_device_with_bf16_and_never_when_off(mode, device, expected):
    factory = train_setup._autocast(tiny(f"model.autocast={mode}"), torch.device(device))
    if expected is None:
        assert factory is nullcontext
        return
    with pytest.warns(UserWarning) if device == "cuda" and not torch.cuda.is_available() else nullcontext():
        context = factory()   # torch warns that CUDA is missing (and disables it) when there is no GPU
    assert isinstance(context, torch.autocast)
    assert context.device == expected and context.fast_dtype == torch.bfloat16


# ----------------------------------------------------------------------------- evaluate

class TemplateTokenizer:
    chat_template = "<u>{{ text }}</u><a>"

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and not tokenize
        return "<u>" + messages[0]["content"] + "</u><a>"


class ScriptedEngine:
    """Answers by the prompt: "Question s a" gets s right math answers ("\\boxed{a}") of its k, the
    others "\\boxed{x}"; a multiple-choice prompt "Pick s" gets "ANSWER: A" for its first s samples,
    else "ANSWER: B". Sample r of a prompt has r + 1 tokens; the odd ones are cut at the length.
    Records each call's prompts, counts and sampling."""

    def __init__(self):
        self.calls: list = []

    def generate(self, prompts, counts, sampling):
        self.calls.append((list(prompts), np.asarray(counts).tolist(), sampling))
        texts, tokens, reasons = [], [], []
        for prompt, count in zip(prompts, counts):
            kind, right, answer = prompt.removeprefix("<u>").split()[:3]
            for r in range(int(count)):
                if kind == "Question":
                    texts.append(f"so \\boxed{{{answer}}}" if r < int(right) else "\\boxed{x}")
                else:
                    texts.append("ANSWER: A" if r < int(right) else "ANSWER: B")
                tokens.append(list(range(r + 1)))
                reasons.append("length" if r % 2 else "stop")
        return Rollouts(np.asarray(counts), [[0] for _ in prompts], tokens,
                        [np.zeros(len(t), np.float32) for t in tokens], texts, reasons)


class BoxedEquals:
    """The math reward's verdict by string equality of the last \\boxed{} with the answer; one
    timeout counted per call."""

    def score(self, responses, answers):
        ok = np.array([r.endswith(f"\\boxed{{{a}}}") for r, a in zip(responses, answers)])
        return RewardResult(np.where(ok, 1.0, -1.0), ok, {"reward/timeouts": 1.0, "reward/errors": 0.0})


SAMPLE_METRICS = {"eval/samples", "eval/mean_response_tokens", "eval/truncated", "eval/reward/timeouts",
                  "eval/reward/errors", "time/eval"}


def test_the_trainers_evaluation_counts_its_batches_with_train_progress(capsys):
    """A paper evaluation (1,745 prompts x 8 samples) takes minutes: with train.progress its batches print
    as gdro eval's do (0/N before the first, then each count), on stderr; without it, nothing."""
    problems = [Problem(f"m:{i}", f"Question 1 {i}", str(i), "math500", "algebra") for i in range(5)]
    cfg = load_config("tiny-cpu", ["eval.k=2", "train.prompts_per_step=2", "train.progress=true"])
    eval_scoring.evaluate(cfg, ScriptedEngine(), TemplateTokenizer(), problems, BoxedEquals(), step=3)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and lines[0] == ("gdro train: evaluation at step 3: 5 prompts x 2 samples in 3 batches "
                                               "of up to 2: math500 5")
    assert "gdro train: evaluation at step 3: 0/5 prompts (batch 1/3 generating)" in lines
    assert [line.split(",")[0] for line in lines if re.match(r"gdro train: evaluation at step 3: \d/5 prompts,", line)
            ] == [f"gdro train: evaluation at step 3: {n}/5 prompts" for n in (2, 4, 5)]
    eval_scoring.evaluate(tiny("eval.k=2", "train.prompts_per_step=2"), ScriptedEngine(), TemplateTokenizer(),
                          problems, BoxedEquals(), step=3)
    assert capsys.readouterr() == ("", "")


def test_evaluate_samples_each_problem_k_times_with_the_eval_settings_and_logs_the_eval_metrics(capsys):
    """15 problems (13 math in two benchmarks, 2 multiple choice), k = 3, 2 prompts per chunk: the
    engine is asked 8 times with the eval sampling, prompts in the chat template, k samples each,
    a distinct seed per chunk and per step, the same for the same step; the metrics are those of
    the successes written out by hand (mean@3, pass@3, with bootstrap bounds seeded by
    train.seed + step: enough prompts that another seed moves some bounds), the sample counts and
    the time; nothing is printed."""
    from real_runs.data import INSTRUCTION
    from real_runs.eval_metrics import evaluation_metrics

    cfg = tiny("eval.k=3", "eval.temperature=0.7", "eval.top_p=0.9", "eval.top_k=5", "eval.max_new_tokens=7",
               "train.prompts_per_step=2", "train.seed=4")
    problems = [Problem("m:0", "Question 2 12", "12", "math500", "algebra"),
                Problem("m:1", "Question 0 7", "7", "math500", "geometry"),
                Problem("g:0", "Pick 1 .", "A) yes", "gpqa", "physics"),
                Problem("m:2", "Question 3 5", "5", "amc23", "amc23"),
                Problem("g:1", "Pick 3 .", "A) no", "gpqa", "physics")]
    problems += [Problem(f"m:{3 + i}", f"Question {s} {i}", str(i), "math500", ("geometry", "algebra")[i % 2])
                 for i, s in enumerate([1, 3, 2, 1, 0, 3, 2, 1, 2, 0])]
    right = [int(p.problem.split()[1]) for p in problems]        # the script: the first s samples are right
    successes = np.array([r < s for s in right for r in range(3)])
    assert successes[:15].tolist() == [1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1]
    engine = ScriptedEngine()
    started = time.perf_counter()
    metrics = eval_scoring.evaluate(cfg, engine, TemplateTokenizer(), problems, BoxedEquals(), step=6)
    wall = time.perf_counter() - started
    assert capsys.readouterr().out == ""
    assert [len(prompts) for prompts, _, _ in engine.calls] == [2] * 7 + [1]
    assert [p for prompts, _, _ in engine.calls for p in prompts] == [f"<u>{p.problem} {INSTRUCTION}</u><a>"
                                                                      for p in problems]
    assert all(counts == [3] * len(prompts) for prompts, counts, _ in engine.calls)
    for _, _, sampling in engine.calls:
        assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_new_tokens) == (0.7, 0.9, 5, 7)
    seeds = [sampling.seed for _, _, sampling in engine.calls]
    assert all(isinstance(s, int) for s in seeds) and len(set(seeds)) == 8

    expected = evaluation_metrics(successes, np.full(15, 3), [p.source for p in problems],
                                  [p.group for p in problems], 3, seed=4 + 6)
    assert set(metrics) == set(expected) | SAMPLE_METRICS
    np.testing.assert_equal({k: metrics[k] for k in expected}, expected)   # NaN bounds of 1-prompt benchmarks
    math500 = [s / 3 for p, s in zip(problems, right) if p.source == "math500"]
    assert metrics["math500/mean@3"] == pytest.approx(np.mean(math500))
    assert metrics["math500/pass@3"] == pytest.approx(np.mean([m > 0 for m in math500]))
    assert metrics["gpqa/mean@3"] == pytest.approx((1 / 3 + 1) / 2) and metrics["amc23/num_prompts"] == 1.0
    assert metrics["pooled/mean@3"] == pytest.approx(successes.mean())
    assert metrics["eval/samples"] == 45.0
    assert metrics["eval/mean_response_tokens"] == pytest.approx(15 * (1 + 2 + 3) / 45)   # r + 1 tokens, r < 3
    assert metrics["eval/truncated"] == pytest.approx(15 / 45)        # r = 1 of each prompt
    assert metrics["eval/reward/timeouts"] == 8.0 and metrics["eval/reward/errors"] == 0.0  # every chunk holds math
    assert 0.0 < metrics["time/eval"] <= wall

    again = ScriptedEngine()
    repeat = eval_scoring.evaluate(cfg, again, TemplateTokenizer(), problems, BoxedEquals(), step=6)
    np.testing.assert_equal({k: v for k, v in repeat.items() if k != "time/eval"},
                            {k: v for k, v in metrics.items() if k != "time/eval"})
    assert [s.seed for _, _, s in again.calls] == seeds
    later = ScriptedEngine()
    eval_scoring.evaluate(cfg, later, TemplateTokenizer(), problems, BoxedEquals(), step=7)
    assert not {s.seed for _, _, s in later.calls} & set(seeds)
    seed0 = ScriptedEngine()          # train.seed 0 at step 1: a valid seed too (numpy refuses negative ones)
    eval_scoring.evaluate(tiny("eval.k=1", "train.seed=0"), seed0, TemplateTokenizer(), problems[:1], BoxedEquals(), step=1)
    assert isinstance(seed0.calls[0][2].seed, int)
