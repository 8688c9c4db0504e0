"""The wiring of `gdro train`'s step loop (real_runs/train.py ``main`` / ``_loop`` / ``_step``, and
real_runs/train_setup.py ``build`` / ``open_run_dir``, which were ``_train`` before the split) that
end-to-end comparisons of two runs cannot see, because both runs share the fault: the learning rate
handed to the optimizer, the model and records handed to ``main``, the step's time record, the
checkpoint schedule, the status of a failed run, an exact resume, the allocator's prompt ids, the
selector's configured settings and screening, the evaluation record and its reward, the run's clock
across a resume, the metric sinks, the sampling settings and seed, weight sync to an engine that
holds a copy, the step record's controller values and snapshots, deterministic mode and a bf16
reference (docs/mutation-train-loop.md lists the mutants each test was written against).
Each number is checked against the configuration, the controllers or the wall clock (no
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

from gdro_lab import step as core_step  # noqa: E402
from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs import checkpoint as ckpt  # noqa: E402
from real_runs import ppo, preflight, train, train_setup  # noqa: E402
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


def jsonable(row: dict) -> dict:
    """A scalars dict as steps.jsonl stores it (NaN -> null)."""
    return {k: None if isinstance(v, float) and v != v else v for k, v in row.items()}


def record_planned_ids(monkeypatch) -> list:
    """Wraps core_step.build so every allocator records the prompt ids handed to its plan(); returns the list."""
    planned: list = []
    build = core_step.build

    def recording_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        if family == "allocator":
            plan = controller.plan
            controller.plan = lambda bins, ids=None: planned.append(ids) or plan(bins, ids)
        return controller

    monkeypatch.setattr(core_step, "build", recording_build)
    return planned


class RecordingEngine:
    """An engine (the hf one) recording every prompt it is asked to continue and every call's SamplingParams."""

    def __init__(self, inner):
        self.inner, self.prompts, self.settings = inner, [], []

    def generate(self, prompts, counts, sampling):
        self.prompts += list(prompts)
        self.settings.append(sampling)
        return self.inner.generate(prompts, counts, sampling)

    def __getattr__(self, name):
        return getattr(self.inner, name)


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
    assert 0 < timing["seconds/checkpoint"] <= wall and 0 <= timing["seconds/log"] <= wall and timing["steps"] == 3
    assert all(isinstance(row["perf/peak_memory_gb"], float) and row["perf/peak_memory_gb"] > 0 for row in rows)
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


def test_a_plan_off_the_budget_fails_the_run_with_the_method_steps_one_message(tmp_path: Path, monkeypatch):
    """An allocator that plans one rollout too many: the first step stops the run with
    gdro_lab.step.MethodStep's one-line budget message (the simulator's and the verl plugin's) at its
    first plan, before any update, and the run is marked failed."""
    build = core_step.build

    def overspending_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        if family == "allocator":
            plan = controller.plan
            controller.plan = lambda bins, ids=None: plan(bins, ids) + np.eye(len(bins), dtype=np.int64)[0]
        return controller

    monkeypatch.setattr(core_step, "build", overspending_build)
    updates: list = []
    monkeypatch.setattr(ppo, "ppo_update", lambda *args, **kwargs: updates.append(1))
    with pytest.raises(ValueError, match=r"^allocator 'gdro' planned 17 rollouts in \[4, 5\] for 4 prompts, not 16 "
                                         r"in \[2, 8\] .*every step must spend exactly the budget$"):
        train.main(tiny(tmp_path, "train.steps=2", "train.run_name=over", "method.name=rollout_gdro"),
                   train_records=RECORDS, reward=Mixed())
    assert read_run(tmp_path / "over").meta["status"] == "failed" and not updates


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

    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    tokenizer.chat_template = "{% for m in messages %}<u>{{ m['content'] }}</u>{% endfor %}<a>"
    engine = RecordingEngine(HFEngine(model, tokenizer))
    problems = [Problem(f"toy:eval:{i}", f"Count to {i}.", str(i), "toy", "toy") for i in range(2)]
    run_dir = train.main(tiny(tmp_path, "train.steps=3", "eval.every=2", "eval.k=2", "eval.max_new_tokens=4"),
                         model=model, tokenizer=tokenizer, engine=engine, train_records=RECORDS,
                         eval_records={"toy": problems}, reward=StartsWithDigit())
    evals = read_run(run_dir).evals
    assert [e["step"] for e in evals] == [2, 3]
    for e in evals:
        assert 0.0 <= e["metrics"]["toy/mean@2"] <= 1.0
    rows = scalars(run_dir)
    assert all(isinstance(row["time/eval"], float) and 0 < row["time/eval"] <= row["time/elapsed"] for row in rows[1:])
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
        return [sampling.seed for sampling in engine.settings]

    first, again, other = seeds("a", 7), seeds("b", 7), seeds("c", 8)
    assert len(first) == 3 and all(isinstance(s, int) for s in first) and len(set(first)) == 3
    assert again == first and not set(other) & set(first)


def test_a_step_that_trains_nothing_logs_zero_logprob_and_update_times(tmp_path: Path, monkeypatch):
    """A selector that drops every group: no update, yet every step logs time/logprobs and
    time/update as 0.0 (so the time shares stay comparable across steps) and the weights stay."""
    torch.set_num_threads(1)
    build = core_step.build

    def dropping_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        if family == "selector":
            controller.accept = lambda feedback: np.zeros(len(feedback.counts_P), bool)
        return controller

    monkeypatch.setattr(core_step, "build", dropping_build)
    model, tokenizer = load_policy("tiny", seed=1)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    run_dir = train.main(tiny(tmp_path, "train.steps=2", "method.selector=greso"), model=model, tokenizer=tokenizer,
                         train_records=RECORDS, reward=Mixed())
    rows = scalars(run_dir)
    assert len(rows) == 2
    assert [(row["time/logprobs"], row["time/update"]) for row in rows] == [(0.0, 0.0)] * 2
    assert [(row["actor/loss"], row["actor/grad_norm"]) for row in rows] == [(0.0, 0.0)] * 2
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
    build = core_step.build

    def recording_build(family, name, config=None, seed=None, **kwargs):
        built[family] = (config, seed)
        return build(family, name, config, seed=seed, **kwargs)

    made: list = []

    class RecordingAdamW(torch.optim.AdamW):
        def __init__(self, params, **kwargs):
            made.append(kwargs)
            super().__init__(params, **kwargs)

    monkeypatch.setattr(core_step, "build", recording_build)
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


# ----------------------------------------------------------------------------- the run's clock

def test_time_elapsed_counts_start_up_and_continues_across_a_resume(tmp_path: Path, monkeypatch):
    """A start-up that takes 1 s (model and data load): step 1's time/elapsed includes it (>= 1 s +
    the step's own time); after stop_after=1 and a resume whose start-up is quick, step 2's
    time/elapsed continues from step 1's (it grows by at least step 2's time/step and at most the
    resuming call's wall time), it does not restart from 0."""
    torch.set_num_threads(1)
    load_model = train_setup._load_model
    pause = {"seconds": 1.0}

    def slow_load_model(*args, **kwargs):
        time.sleep(pause["seconds"])
        return load_model(*args, **kwargs)

    monkeypatch.setattr(train_setup, "_load_model", slow_load_model)
    run_dir = train.main(tiny(tmp_path, "train.steps=2", "train.run_name=clock"), train_records=RECORDS,
                         reward=Mixed(), stop_after=1)
    first = scalars(run_dir)
    assert len(first) == 1 and first[0]["time/elapsed"] >= 1.0 + first[0]["time/step"]
    pause["seconds"] = 0.0
    started = time.perf_counter()
    train.main(None, resume=str(run_dir), train_records=RECORDS, reward=Mixed())
    wall = time.perf_counter() - started
    rows = scalars(run_dir)
    assert len(rows) == 2 and rows[0] == first[0]
    grown = rows[1]["time/elapsed"] - rows[0]["time/elapsed"]
    assert rows[1]["time/step"] <= grown <= wall


# ----------------------------------------------------------------------------- sinks

def test_the_sinks_get_the_configured_switches_the_config_and_every_steps_scalars(tmp_path: Path, monkeypatch):
    """log.tensorboard / log.wandb / log.wandb_project reach the sinks with the run's config and the
    step a resume starts after (TensorBoard purges the events after it); each step's scalars and
    each evaluation go to the sinks at their own step (a recording stand-in: wandb is not installed here)."""
    from real_runs.config import config_to_dict

    torch.set_num_threads(1)
    made: list = []

    class RecordingSinks:
        def __init__(self, run_dir, **kwargs):
            self.kwargs, self.steps, self.evals, self.bins = kwargs, [], [], []
            made.append(self)

        def log(self, step, scalars, per_bin=None):
            self.steps.append((step, dict(scalars)))
            self.bins.append((step, dict(per_bin or {})))

        def log_eval(self, step, metrics):
            self.evals.append((step, dict(metrics)))

        def close(self):
            self.closed = True

    monkeypatch.setattr(train, "Sinks", RecordingSinks)
    monkeypatch.setattr(preflight, "check_sinks", lambda tensorboard, wandb: None)
    problems = [Problem(f"toy:eval:{i}", f"Count to {i}.", str(i), "toy", "toy") for i in range(2)]
    cfg = tiny(tmp_path, "train.steps=3", "train.run_name=sinks", "log.tensorboard=true", "log.wandb=true",
               "log.wandb_project=my-project", "eval.every=2", "eval.k=1", "eval.max_new_tokens=2")
    run_dir = train.main(cfg, train_records=RECORDS, eval_records={"toy": problems}, reward=Mixed(), stop_after=2)
    train.main(None, resume=str(run_dir), train_records=RECORDS, eval_records={"toy": problems}, reward=Mixed())
    assert len(made) == 2 and all(s.closed for s in made)
    for sinks, start in zip(made, (0, 2)):
        assert sinks.kwargs == {"tensorboard": True, "wandb": True, "project": "my-project",
                                "config": config_to_dict(cfg), "start_step": start}
    logged = [(step, row) for sinks in made for step, row in sinks.steps]
    assert [step for step, _ in logged] == [1, 2, 3]
    run = read_run(run_dir)  # each step's per-bin arrays reach the sinks too (TensorBoard histograms)
    sent = [(step, bins) for sinks in made for step, bins in sinks.bins]
    assert [step for step, _ in sent] == [1, 2, 3] and all("share" in bins for _, bins in sent)
    for (step, bins), i in zip(sent, range(3)):
        np.testing.assert_allclose(np.asarray(bins["share"], float), run.bins["share"][i], equal_nan=True)
    for (step, row), written in zip(logged, scalars(run_dir)):
        assert jsonable(row) == written, step
    evals = read_run(run_dir).evals
    assert [(step, jsonable(metrics)) for sinks in made for step, metrics in sinks.evals] == [
        (e["step"], e["metrics"]) for e in evals]
    assert [e["step"] for e in evals] == [2, 3]


# ----------------------------------------------------------------------------- sampling, screening, sync

def test_rollouts_are_sampled_with_the_configured_temperature_top_p_top_k_and_documented_seed(tmp_path: Path):
    """rollout.temperature / top_p / top_k / max_new_tokens reach the engine's SamplingParams unchanged,
    and step s samples with seed train.seed * 1_000_003 + s (README, "Checkpoints and resume": a step's
    sampling depends on the run's seed and the step alone)."""
    from real_runs.engines.hf import HFEngine

    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    engine = RecordingEngine(HFEngine(model, tokenizer))
    train.main(tiny(tmp_path, "train.steps=2", "train.seed=5", "rollout.temperature=0.7", "rollout.top_p=0.9",
                    "rollout.top_k=7", "rollout.max_new_tokens=3"),
               model=model, tokenizer=tokenizer, engine=engine, train_records=RECORDS, reward=Mixed())
    assert [(s.temperature, s.top_p, s.top_k, s.max_new_tokens, s.seed) for s in engine.settings] == [
        (0.7, 0.9, 7, 3, 5 * 1_000_003 + step) for step in (1, 2)]


def test_prompts_the_selector_screens_out_are_never_generated(tmp_path: Path, monkeypatch):
    """GRESO whose screen rejects prompt id 0: over 3 steps (12 draws of 6 records, so id 0 would
    come up) no plan holds id 0 and every plan still has prompts_per_step prompts."""
    torch.set_num_threads(1)
    planned = record_planned_ids(monkeypatch)
    build = core_step.build
    screened: list = []

    def screening_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        if family == "selector":
            def screen(ids):
                screened.append(np.asarray(ids).copy())
                return np.asarray(ids) != 0
            controller.screen = screen
        return controller

    monkeypatch.setattr(core_step, "build", screening_build)
    train.main(tiny(tmp_path, "train.steps=3", "method.selector=greso", "data.shuffle=false"), train_records=RECORDS,
               reward=Mixed())
    assert len(planned) == 3 and all(len(ids) == 4 for ids in planned)
    assert any(0 in ids for ids in screened)             # id 0 was a candidate ...
    assert not any(0 in np.asarray(ids) for ids in planned)   # ... and never planned


def test_an_engine_around_a_copy_of_the_policy_gets_the_trained_weights_every_step(tmp_path: Path):
    """main(engine=...) wrapping a copy of the model (as vLLM holds its own): when the run opens and
    after every step the engine's weights equal the trained policy's; an engine sharing the module is
    never sent weights."""
    import copy

    from real_runs.engines.hf import HFEngine

    torch.set_num_threads(1)

    class Syncing(RecordingEngine):
        def __init__(self, inner, policy):
            super().__init__(inner)
            self.policy, self.synced, self.differed = policy, 0, []

        def generate(self, prompts, counts, sampling):
            theirs, ours = self.inner.model.state_dict(), self.policy.state_dict()
            self.differed.append(any(not torch.equal(theirs[k], ours[k]) for k in ours))
            return super().generate(prompts, counts, sampling)

        def load_weights(self, state):
            self.synced += 1
            self.inner.load_weights(state)

    model, tokenizer = load_policy("tiny", seed=2)
    engine = Syncing(HFEngine(copy.deepcopy(model), tokenizer), model)
    train.main(tiny(tmp_path, "train.steps=3", "train.run_name=copy", "optim.lr=1e-2"), model=model,
               tokenizer=tokenizer, engine=engine, train_records=RECORDS, reward=Mixed())
    assert engine.synced == 1 + 3 and engine.differed == [False, False, False]  # when the run opens, then per step
    theirs = engine.model.state_dict()
    assert all(torch.equal(theirs[k], v) for k, v in model.state_dict().items())

    shared = Syncing(HFEngine(model, tokenizer), model)
    train.main(tiny(tmp_path, "train.steps=1", "train.run_name=shared"), model=model, tokenizer=tokenizer,
               engine=shared, train_records=RECORDS, reward=Mixed())
    assert shared.synced == 0


# ----------------------------------------------------------------------------- rewards for evaluation

def test_a_reward_passed_in_scores_the_evaluation_and_the_math_reward_gets_the_configured_timeout(
        tmp_path: Path, monkeypatch):
    """A reward passed to main scores the evaluation's responses too (it sees the evaluation's
    answers); with rollout.reward=toy (training only) the evaluation's math reward is built with
    rollout.reward_timeout_s and rollout.reward_workers and closed at the end."""
    import real_runs.rewards.math

    torch.set_num_threads(1)
    problems = [Problem(f"toy:eval:{i}", f"Count to {i}.", f"4{i}", "toy", "toy") for i in range(2)]

    class AnswerRecording(Mixed):
        def __init__(self):
            self.answers: list = []

        def score(self, responses, answers):
            self.answers += list(answers)
            return super().score(responses, answers)

        def close(self):
            self.closed = True

    passed = AnswerRecording()
    train.main(tiny(tmp_path, "train.steps=1", "train.run_name=passed", "eval.every=1", "eval.k=2",
                    "eval.max_new_tokens=2"), train_records=RECORDS, eval_records={"toy": problems}, reward=passed)
    assert passed.answers.count("40") == 2 and passed.answers.count("41") == 2

    built: list = []

    class FakeMath(AnswerRecording):
        def __init__(self, **kwargs):
            super().__init__()
            self.kwargs = kwargs
            built.append(self)

    monkeypatch.setattr(real_runs.rewards.math, "MathReward", FakeMath)
    train.main(tiny(tmp_path, "train.steps=1", "train.run_name=toy", "rollout.reward=toy", "eval.every=1", "eval.k=1",
                    "eval.max_new_tokens=2", "rollout.reward_timeout_s=2.5", "rollout.reward_workers=1"),
               train_records=RECORDS, eval_records={"toy": problems})
    assert [(b.kwargs, b.answers, getattr(b, "closed", False)) for b in built] == [
        ({"timeout_s": 2.5, "num_workers": 1}, ["40", "41"], True)]


# ----------------------------------------------------------------------------- the step record and snapshots

class ByAnswer:
    """Prompt with answer a: its k-th rollout succeeds when k % (a + 2) == 0 (pass rates differ by prompt)."""

    def score(self, responses, answers):
        seen: dict = {}
        ok = []
        for answer in answers:
            k = seen.get(answer, 0)
            seen[answer] = k + 1
            ok.append(k % (int(answer) + 2) == 0)
        ok = np.array(ok)
        return RewardResult(np.where(ok, 1.0, -1.0), ok, {})


def test_the_step_record_logs_the_controllers_own_weights_multipliers_sigma_and_mu(tmp_path: Path, monkeypatch):
    """Joint Prompt-GDRO + Rollout-GDRO, prompts of different pass rates: each step's per-bin
    weight is Prompt-GDRO's (normalised) bin weights, sigma the allocator's sqrt(variance EMA),
    multiplier_mean the mean of the multipliers the advantages were scaled by, mu the allocator's
    shadow price, score Prompt-GDRO's EMA score per bin and signal its failure-rate signal per bin
    (1 - the bin's mean success; the simulator and the verl plugin logged both, the trainer did not),
    all read at the step's end; the last step's snapshot holds every controller's state."""
    from gdro_lab.runformat.runlog import encode_state, load_snapshot

    torch.set_num_threads(1)
    build = core_step.build
    seen: dict = {"weights": [], "sigma": [], "mu": [], "multipliers": [], "score": []}
    parts: dict = {}

    def recording_build(family, name, *args, **kwargs):
        controller = build(family, name, *args, **kwargs)
        parts[family] = controller
        if family == "weighter":
            multipliers = controller.multipliers

            def recorded(bins):
                out = multipliers(bins)
                seen["multipliers"].append(np.asarray(out, float).copy())
                seen["weights"].append(np.asarray(controller.bin_weights(), float).copy())
                seen["score"].append(np.asarray(controller.score_G, float).copy())
                return out

            controller.multipliers = recorded
        if family == "allocator":  # its update is the allocator's last change in a step
            update = controller.update

            def updated(feedback):
                out = update(feedback)
                seen["sigma"].append(np.sqrt(controller.variance_G).copy())
                seen["mu"].append(float(controller.mu))
                return out

            controller.update = updated
        return controller

    monkeypatch.setattr(core_step, "build", recording_build)
    records = [Problem(f"toy:train:{i}", f"Say something {i}.", str(i % 3), "toy", "toy") for i in range(6)]
    run_dir = train.main(tiny(tmp_path, "train.steps=3", "method.name=joint", "train.prompts_per_step=6"),
                         train_records=records, reward=ByAnswer())
    run = read_run(run_dir)
    assert len(run.steps) == 3 and len(seen["weights"]) == 3
    weights = np.array(seen["weights"])
    assert np.ptp(weights[-1]) > 1e-6                            # not uniform: the check below can fail
    np.testing.assert_allclose(run.bins["weight"], weights / weights.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(run.bins["sigma"], np.array(seen["sigma"]), rtol=1e-12)
    assert np.isfinite(run.bins["sigma"][-1]).sum() >= 2
    np.testing.assert_allclose(run.scalars["mu"], seen["mu"], rtol=1e-12)
    assert np.isfinite(run.scalars["mu"]).all()
    np.testing.assert_allclose(run.scalars["multiplier_mean"], [m.mean() for m in seen["multipliers"]], rtol=1e-12)
    assert "multiplier" in run.bins and np.isfinite(run.scalars["multiplier_sq_mean"]).all()
    np.testing.assert_allclose(run.bins["score"], np.array(seen["score"]), rtol=1e-12)
    assert np.ptp(run.bins["score"][-1]) > 1e-6                 # the scores differ by bin
    np.testing.assert_allclose(run.bins["signal"], 1.0 - run.bins["success"], rtol=1e-12, atol=1e-15)
    assert np.isfinite(run.bins["signal"][-1]).sum() >= 2
    step, state = load_snapshot(run_dir)
    assert step == 3 and set(state) == {"classifier", "weighter", "allocator"}
    for name, controller in parts.items():
        if name in state:
            assert json.dumps(encode_state(state[name]), sort_keys=True) == json.dumps(
                encode_state(controller.state_dict()), sort_keys=True), name


def test_deterministic_mode_the_dropped_prompt_count_and_a_bf16_reference(tmp_path: Path, monkeypatch):
    """train.deterministic=true turns on torch's deterministic algorithms; data.json counts the
    prompts dropped as longer than rollout.max_prompt_tokens under ``dropped_too_long``; with
    model.autocast=bf16 and a KL term the frozen reference is held in bf16 (the policy stays fp32)."""
    torch.set_num_threads(1)
    dtypes: list = []
    recompute = ppo.recompute_logprobs

    def recording(batch, policy, reference, *args, **kwargs):
        dtypes.append((next(policy.parameters()).dtype, next(reference.parameters()).dtype))
        return recompute(batch, policy, reference, *args, **kwargs)

    monkeypatch.setattr(ppo, "recompute_logprobs", recording)
    records = RECORDS + [Problem(f"toy:train:long{i}", "word " * 200, "0", "toy", "toy") for i in range(2)]
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(False)
        run_dir = train.main(tiny(tmp_path, "train.steps=1", "train.deterministic=true", "rollout.max_prompt_tokens=64",
                                  "model.autocast=bf16", "loss.kl_coef=0.01"), train_records=records, reward=Mixed())
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(was)
    summary = json.loads((run_dir / "data.json").read_text())
    assert (summary["dropped_too_long"], summary["prompts"]) == (2, len(RECORDS))
    assert dtypes == [(torch.float32, torch.bfloat16)]


def test_the_best_evaluations_checkpoint_is_kept_across_pruning_and_a_resume(tmp_path: Path, monkeypatch):
    """Evaluations every step score 0.1, 0.5, 0.2, 0.3, 0.1, 0.0 (pooled mean@k); checkpoints every 2
    steps, keep_last 1: step 2's checkpoint (the peak) is saved although 2 is a save step anyway, and
    kept to the end beside the last; a run stopped after step 3 and resumed keeps it too (the best is
    read back from eval.jsonl). With keep_best off only the last survives."""
    scores = {1: 0.1, 2: 0.5, 3: 0.2, 4: 0.3, 5: 0.1, 6: 0.0}
    real_evaluate = train.evaluate

    def scripted(cfg, engine, tokenizer, problems, reward, step):  # the real evaluation, its pooled score set
        return {**real_evaluate(cfg, engine, tokenizer, problems, reward, step), f"pooled/mean@{cfg.eval.k}": scores[step]}

    monkeypatch.setattr(train, "evaluate", scripted)
    settings = ("train.steps=6", "eval.every=1", "eval.k=1", "eval.max_new_tokens=2", "train.save_every=3",
                "train.keep_last=1")

    def run(name: str, *more: str, stop_after=None, resume=False):
        cfg = tiny(tmp_path, *settings, f"train.run_name={name}", *more)
        given = dict(train_records=RECORDS, reward=Mixed(), eval_records={"toy": RECORDS[:2]})
        run_dir = train.main(cfg, stop_after=stop_after, **given)
        if resume:
            run_dir = train.main(None, resume=str(run_dir), **given)
        return ckpt.checkpoint_steps(run_dir)

    torch.set_num_threads(1)
    assert run("best") == [2, 6]  # 2 saved as a new best (off save_every=3), 3 pruned, 6 the last
    assert run("resumed", stop_after=3, resume=True) == [2, 6]
    assert run("off", "train.keep_best=false") == [6]
