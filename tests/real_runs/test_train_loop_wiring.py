"""The wiring of `gdro train`'s step loop (real_runs/train.py ``main`` / ``_train`` / ``_loop``) that
end-to-end comparisons of two runs cannot see, because both runs share the fault: the learning rate
handed to the optimizer, the model and records handed to ``main``, the step's time record, the
checkpoint schedule, the status of a failed run, an exact resume, the allocator's prompt ids, the
selector's configured settings and the evaluation record. Each number is checked against the configuration or the wall clock (no
data files, no reward pool: these runs also serve mutation testing, whose forked workers cannot
start the reward's process pool; docs/benchmarks.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_lab.runlog import read_run  # noqa: E402
from real_runs import train  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import Problem, RewardResult  # noqa: E402

RECORDS = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(6)]
PHASES = ("plan", "generate", "reward", "controllers", "record", "logprobs", "update", "sync")


class StartsWithDigit:
    """+1 when the response starts with a digit (depends on the sampled text)."""

    def score(self, responses, answers):
        rewards = np.array([1.0 if r[:1].isdigit() else -1.0 for r in responses])
        return RewardResult(rewards, rewards > 0, {})


class Mixed:
    """+1 / -1 by position: every group is mixed, whatever the model writes."""

    def score(self, responses, answers):
        rewards = np.resize(np.array([1.0, -1.0, -1.0, 1.0, 1.0]), len(responses))
        return RewardResult(rewards, rewards > 0, {})


def tiny(out: Path, *overrides: str):
    return load_config("tiny-cpu", [f"train.out={json.dumps(str(out))}", "train.progress=false", "eval.every=0",
                                    "rollout.max_new_tokens=4", "train.prompts_per_step=4", "train.mini_batches=1",
                                    *overrides])


def scalars(run_dir: Path) -> list[dict]:
    return [json.loads(line)["scalars"] for line in (run_dir / "steps.jsonl").read_text().splitlines()]


def record_planned_ids(monkeypatch) -> list:
    """Wraps train.build so every allocator records the prompt ids handed to its plan(); returns the list."""
    planned: list = []
    build = train.build

    def recording_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        if family == "allocator":
            plan = controller.plan
            controller.plan = lambda bins, ids=None: planned.append(ids) or plan(bins, ids)
        return controller

    monkeypatch.setattr(train, "build", recording_build)
    return planned


def test_a_run_uses_the_given_model_records_and_learning_rate_and_logs_its_phase_times(tmp_path: Path,
                                                                                       monkeypatch):
    """3 steps, lr 1e-2 x lr_scale 0.5 with 4 warm-up steps, one optimizer step per step:
    actor/lr after step s is 5e-3 x min(1, (s + 1) / 4); the module passed in is the one trained;
    data.json counts the 6 records passed in; every phase time is >= 0, they add up to at most
    time/step, which is within the call's wall time, as is time/elapsed (increasing); a checkpoint
    at step 2 (save_every) and 3 (the last); the allocator is given every prompt's id."""
    torch.set_num_threads(1)
    planned = record_planned_ids(monkeypatch)
    model, tokenizer = load_policy("tiny", seed=3)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = tiny(tmp_path, "train.steps=3", "train.save_every=2", "optim.lr=1e-2", "optim.lr_scale=0.5",
               "optim.warmup_steps=4", "train.ppo_epochs=1", "method.name=rollout_gdro")
    started = time.perf_counter()
    run_dir = train.main(cfg, model=model, tokenizer=tokenizer, train_records=RECORDS, reward=Mixed())
    wall = time.perf_counter() - started
    rows = scalars(run_dir)
    assert [row["actor/lr"] for row in rows] == pytest.approx([5e-3 * min(1.0, (s + 1) / 4) for s in (1, 2, 3)],
                                                              rel=1e-9)
    assert any(not torch.equal(v, initial[k]) for k, v in model.state_dict().items())     # trained in place
    assert json.loads((run_dir / "data.json").read_text())["prompts"] == len(RECORDS)
    for row in rows:
        times = {k: v for k, v in row.items() if k.startswith("time/")}
        assert set(times) == {f"time/{p}" for p in PHASES} | {"time/step", "time/elapsed", "time/controllers_share"}
        assert all(isinstance(times[f"time/{p}"], float) and times[f"time/{p}"] >= 0 for p in PHASES)
        assert sum(times[f"time/{p}"] for p in PHASES) <= times["time/step"] + 1e-6 and times["time/step"] <= wall
    elapsed = [row["time/elapsed"] for row in rows]
    assert all(isinstance(e, float) for e in elapsed) and elapsed == sorted(elapsed) and 0 < elapsed[-1] <= wall
    timing = json.loads((run_dir / "timing.json").read_text())
    assert 0 < timing["seconds/checkpoint"] <= wall and timing["steps"] == 3
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step_*")) == ["step_00000002", "step_00000003"]
    assert len(planned) == 3 and all(ids is not None and len(ids) == 4 for ids in planned)


def test_a_run_that_raises_is_marked_failed(tmp_path: Path):
    class DiesAtStep2(Mixed):
        calls = 0

        def score(self, responses, answers):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("reward died")
            return super().score(responses, answers)

    with pytest.raises(RuntimeError, match="reward died"):
        train.main(tiny(tmp_path, "train.steps=3", "train.run_name=dies"), train_records=RECORDS, reward=DiesAtStep2())
    assert read_run(tmp_path / "dies").meta["status"] == "failed"


def test_a_stopped_and_resumed_run_continues_as_the_uninterrupted_one(tmp_path: Path):
    """stop_after=2 then resume: step 3's record (sampled texts -> rewards, losses) equals that of
    3 steps in one go: each step's sampling seed is the run's, not the process's RNG state."""
    torch.set_num_threads(1)

    def run(name: str, stop_after=None):
        return train.main(tiny(tmp_path, "train.steps=3", f"train.run_name={name}", "optim.lr=1e-2"),
                          train_records=RECORDS, reward=StartsWithDigit(), stop_after=stop_after)

    straight = scalars(run("straight"))
    cut = run("cut", stop_after=2)
    assert read_run(cut).meta["status"] == "stopped" and len(scalars(cut)) == 2
    train.main(None, resume=str(cut), train_records=RECORDS, reward=StartsWithDigit())
    resumed = scalars(cut)
    assert len(resumed) == 3
    for a, b in zip(straight, resumed):
        for key in a:
            if not key.startswith(("time/", "perf/")):
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key


def test_evaluation_records_are_logged_at_their_steps_from_chat_template_prompts(tmp_path: Path):
    """eval.every=2 over 3 steps with a reward passed in (it scores the evaluation too): evals at
    steps 2 and 3 (the last), each with the benchmark's mean@k in [0, 1]; the tokenizer has a chat
    template, and every prompt the engine is asked to continue, training and evaluation, is in it."""
    from real_runs.engines.hf import HFEngine

    class Recording:
        def __init__(self, inner):
            self.inner, self.prompts = inner, []

        def generate(self, prompts, counts, sampling):
            self.prompts += list(prompts)
            return self.inner.generate(prompts, counts, sampling)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    tokenizer.chat_template = "{% for m in messages %}<u>{{ m['content'] }}</u>{% endfor %}<a>"
    engine = Recording(HFEngine(model, tokenizer))
    problems = [Problem(f"toy:eval:{i}", f"Count to {i}.", str(i), "toy", "toy") for i in range(2)]
    run_dir = train.main(tiny(tmp_path, "train.steps=3", "eval.every=2", "eval.k=2", "eval.max_new_tokens=4"),
                         model=model, tokenizer=tokenizer, engine=engine, train_records=RECORDS,
                         eval_records={"toy": problems}, reward=StartsWithDigit())
    evals = read_run(run_dir).evals
    assert [e["step"] for e in evals] == [2, 3]
    for e in evals:
        assert 0.0 <= e["metrics"]["toy/mean@2"] <= 1.0
    assert all("time/eval" in row for row in scalars(run_dir)[1:])
    asked = [p for p in engine.prompts if "Count to" in p]
    assert len(asked) == 2 * 2 and len(engine.prompts) > len(asked)
    assert all(p.startswith("<u>") and p.endswith("</u><a>") for p in engine.prompts), engine.prompts[:2]


def test_the_selector_is_built_with_the_configured_settings(tmp_path: Path):
    """GRESO with p_easy 0.3, p_hard 0.7 and no adaptation (adapt_step 0): the logged keep-probability
    bases stay the configured ones every step (its defaults would log 0.5 +- 0.01 per step)."""
    torch.set_num_threads(1)
    run_dir = train.main(tiny(tmp_path, "train.steps=2", "method.selector=greso", "method.selector_config.p_easy=0.3",
                              "method.selector_config.p_hard=0.7", "method.selector_config.adapt_step=0"),
                         train_records=RECORDS, reward=Mixed())
    rows = scalars(run_dir)
    assert len(rows) == 2
    assert [(row["select/p_easy"], row["select/p_hard"]) for row in rows] == [(0.3, 0.7)] * 2


class RecordingEngine:
    """The hf engine, recording every call's sampling settings."""

    def __init__(self, inner):
        self.inner, self.seeds = inner, []

    def generate(self, prompts, counts, sampling):
        self.seeds.append(sampling.seed)
        return self.inner.generate(prompts, counts, sampling)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_every_step_samples_with_its_own_seed_drawn_from_the_runs_seed(tmp_path: Path):
    """The engine gets a sampling seed each step (vLLM samples unseeded without one), distinct per
    step, the same for the same train.seed and another for another train.seed."""
    from real_runs.engines.hf import HFEngine

    torch.set_num_threads(1)

    def seeds(name: str, seed: int) -> list:
        model, tokenizer = load_policy("tiny", seed=0)
        engine = RecordingEngine(HFEngine(model, tokenizer))
        train.main(tiny(tmp_path, "train.steps=3", f"train.run_name={name}", f"train.seed={seed}"), model=model,
                   tokenizer=tokenizer, engine=engine, train_records=RECORDS, reward=Mixed())
        return engine.seeds

    first, again, other = seeds("a", 7), seeds("b", 7), seeds("c", 8)
    assert len(first) == 3 and all(isinstance(s, int) for s in first) and len(set(first)) == 3
    assert again == first and not set(other) & set(first)


def test_a_step_that_trains_nothing_logs_zero_logprob_and_update_times(tmp_path: Path, monkeypatch):
    """A selector that drops every group: no update, yet every step logs time/logprobs and
    time/update as 0.0 (so the time shares stay comparable across steps) and the weights stay."""
    torch.set_num_threads(1)
    build = train.build

    def dropping_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        if family == "selector":
            controller.accept = lambda feedback: np.zeros(len(feedback.counts_P), bool)
        return controller

    monkeypatch.setattr(train, "build", dropping_build)
    model, tokenizer = load_policy("tiny", seed=1)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    run_dir = train.main(tiny(tmp_path, "train.steps=2", "method.selector=greso"), model=model, tokenizer=tokenizer,
                         train_records=RECORDS, reward=Mixed())
    rows = scalars(run_dir)
    assert len(rows) == 2
    assert [(row["time/logprobs"], row["time/update"]) for row in rows] == [(0.0, 0.0)] * 2
    assert all(torch.equal(v, initial[k]) for k, v in model.state_dict().items())


def test_evaluation_sets_from_the_config_are_cut_at_eval_limit(tmp_path: Path, monkeypatch):
    """eval.benchmarks loaded by name (no eval_records passed): each is asked for its first
    eval.limit problems, or all of them for limit 0."""
    import real_runs.data

    torch.set_num_threads(1)
    asked: list = []

    def fake_load(name, split=None, limit=None, **kwargs):
        asked.append((name, limit))
        return [Problem(f"{name}:test:{i}", f"Count to {i}.", str(i), name, name) for i in range(2)]

    monkeypatch.setattr(real_runs.data, "load_dataset_records", fake_load)
    for limit, expected in ((5, 5), (0, None)):
        asked.clear()
        train.main(tiny(tmp_path, "train.steps=1", f"train.run_name=limit{limit}", "eval.every=1", "eval.k=1",
                        "eval.max_new_tokens=2", 'eval.benchmarks=["math500", "amc23"]', f"eval.limit={limit}"),
                   train_records=RECORDS, reward=Mixed())
        assert asked == [("math500", expected), ("amc23", expected)]


def test_controllers_optimizer_and_schedule_get_the_configured_settings_and_seeds(tmp_path: Path, monkeypatch):
    """Prompt-GDRO + Rollout-GDRO + GRESO with 6 bins: each controller is built with the run's
    validated config (method.controller_configs) and seed train.seed + 0..3; AdamW gets the
    configured betas, eps and weight decay; with warm-up 1 the logged lr is lr x lr_scale from the
    first step on, never above it."""
    from real_runs.config import load_config as load

    torch.set_num_threads(1)
    built: dict = {}
    build = train.build

    def recording_build(family, name, config=None, seed=None, **kwargs):
        built[family] = (config, seed)
        return build(family, name, config, seed=seed, **kwargs)

    made: list = []

    class RecordingAdamW(torch.optim.AdamW):
        def __init__(self, params, **kwargs):
            made.append(kwargs)
            super().__init__(params, **kwargs)

    monkeypatch.setattr(train, "build", recording_build)
    monkeypatch.setattr(torch.optim, "AdamW", RecordingAdamW)
    settings = ("train.steps=2", "train.seed=11", "method.name=joint", "method.num_bins=6",
                "method.classifier_config.edges=[0.2, 0.4, 0.5, 0.6, 0.8]", "method.selector=greso",
                "optim.lr=1e-2", "optim.lr_scale=0.5", "optim.warmup_steps=1", "optim.beta1=0.8", "optim.beta2=0.95",
                "optim.eps=1e-6", "optim.weight_decay=0.05")
    cfg = tiny(tmp_path, *settings)
    run_dir = train.main(cfg, train_records=RECORDS, reward=Mixed())
    expected = load("tiny-cpu", [f"train.out={json.dumps(str(tmp_path))}", *settings]).method.controller_configs()
    for offset, (family, config) in enumerate(zip(("classifier", "weighter", "allocator"), expected)):
        assert built[family] == (config, 11 + offset), family
    assert built["selector"][1] == 14
    assert [(kw["betas"], kw["eps"], kw["weight_decay"]) for kw in made] == [((0.8, 0.95), 1e-6, 0.05)]
    assert [row["actor/lr"] for row in scalars(run_dir)] == pytest.approx([5e-3, 5e-3], rel=1e-12)


def test_data_shuffle_changes_the_order_prompts_are_drawn_in(tmp_path: Path, monkeypatch):
    """data.shuffle=false draws the records in file order; true in the run's seeded shuffled order; without
    warm-up (the default) the logged lr is lr x lr_scale from the first step."""
    torch.set_num_threads(1)
    planned = record_planned_ids(monkeypatch)
    orders = {}
    for shuffle in ("false", "true"):
        planned.clear()
        cfg = tiny(tmp_path, "train.steps=1", f"train.run_name=shuffle_{shuffle}", f"data.shuffle={shuffle}")
        run_dir = train.main(cfg, train_records=RECORDS, reward=Mixed())
        orders[shuffle] = list(planned[0])
        assert cfg.optim.warmup_steps == 0
        assert scalars(run_dir)[0]["actor/lr"] == pytest.approx(cfg.optim.lr * cfg.optim.lr_scale, rel=1e-12)
    assert orders["false"] == sorted(orders["false"])
    assert orders["true"] != orders["false"]
