"""`gdro train` end to end on CPU: the tiny Qwen3 on real DAPO-Math-17k rows, every method.

Checks that parameters change, the rollout budget is exact every step, the run directory is
complete and opens in the app's data layer, the app (AppTest) and `gdro report`; that the
gradient has the right sign (a learnable reward goes from < 0.2 to > 0.8); the loop's pieces.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs import batching, ppo, train  # noqa: E402
from real_runs import checkpoint as ckpt  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import Problem, RewardResult  # noqa: E402

METHODS = ("grpo", "prompt_gdro", "rollout_gdro", "joint")
TIME_KEYS = ("time/plan", "time/generate", "time/reward", "time/controllers", "time/logprobs",
             "time/update", "time/sync", "time/step", "perf/tokens_per_s")
STEPS = 4


def tiny_config(out: Path, *overrides: str):
    return load_config("tiny-cpu", [f"train.out={json.dumps(str(out))}", "train.progress=false",
                                    f"train.steps={STEPS}", "data.limit=8", "eval.every=0", *overrides])


@pytest.fixture(scope="module")
def method_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("runs")
    return {m: train.main(tiny_config(out, f"method.name={m}", f"train.run_name={m}", "eval.every=2", "eval.limit=2"))
            for m in METHODS}


@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_with_an_exact_budget_and_a_complete_run(method: str, method_runs: dict[str, Path]):
    run_dir = method_runs[method]
    run = read_run(run_dir)
    assert run.meta["status"] == "finished" and run.meta["producer"] == "gdro train"
    assert run.steps.tolist() == list(range(1, STEPS + 1))
    assert run.config["method"]["name"] == method
    np.testing.assert_array_equal(run.scalars["total_rollouts"], 4 * 4)     # P * n_bar, every step
    np.testing.assert_array_equal(run.scalars["mean_rollouts"], 4.0)
    rollouts = run.bins["rollouts"][np.isfinite(run.bins["rollouts"])]
    assert rollouts.min() >= 2 and rollouts.max() <= 8
    for key in TIME_KEYS + ("actor/kl", "actor/entropy", "actor/clip_frac", "actor/grad_norm",
                            "response/length_mean", "perf/peak_memory_gb", "mean_reward"):
        assert np.all(np.isfinite(run.scalars[key])), key
    assert np.all(run.scalars["actor/engine_logprob_gap_max"] < 1e-3)   # trainer's recomputation = engine's
    assert run.snapshot_steps == [2, 4]
    assert [e["step"] for e in run.evals] == [2, 4]
    for name in ("math500/mean@2", "math500/pass@2", "pooled/mean@2_lo", "worst_group/mean@2"):
        assert 0.0 <= run.evals[-1]["metrics"][name] <= 1.0, name
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_00000002", "step_00000004"]
    # parameters changed: the final checkpoint differs from the seeded initial model
    initial, _ = load_policy("tiny", seed=0)
    trained = ckpt.read_model_state(run_dir / "checkpoints" / "step_00000004")
    changed = [name for name, value in initial.state_dict().items() if name in trained and not torch.equal(value, trained[name])]
    assert len(changed) >= len(trained) // 2
    # the trainer's own overhead, measured and kept (issue 23.3)
    timing = json.loads((run_dir / "timing.json").read_text())
    assert timing["steps"] == STEPS and timing["share/compute"] + timing["share/overhead"] == pytest.approx(1.0)
    assert timing["seconds/checkpoint"] > 0 and timing["seconds/eval"] > 0


def test_tiny_cpu_controllers_act_on_the_toy_reward(method_runs: dict[str, Path]):
    """tiny-cpu's toy reward (known per-prompt odds) spreads the prompts over the bins, and within the
    fixture's 4 steps Rollout-GDRO's plan is ragged (some bin above n_bar, some below) at the exact
    budget; GRPO's stays at n_bar. (Under the math reward the random model scored -1 everywhere:
    one bin, 4 rollouts each, controllers idle.)"""
    for method in ("rollout_gdro", "joint"):
        run = read_run(method_runs[method])
        assert run.config["rollout"]["reward"] == "toy"
        occupied = np.isfinite(run.bins["rollouts"])
        assert occupied.sum(axis=1).max() >= 3, "the prompts should spread over several bins"
        ragged = [int(s) for s, row in zip(run.steps, run.bins["rollouts"])
                  if np.nanmax(row, initial=0) > 4 and np.nanmin(np.where(np.isfinite(row), row, 99)) < 4]
        assert ragged, (method, run.bins["rollouts"].tolist())
        assert np.all(run.scalars["total_rollouts"] == 16)
        assert 0.2 < np.mean(run.scalars["mean_success"]) < 0.8
    grpo = read_run(method_runs["grpo"])
    assert np.all(grpo.bins["rollouts"][np.isfinite(grpo.bins["rollouts"])] == 4)


def test_weighted_methods_log_multipliers_and_gdro_allocators_a_price(method_runs: dict[str, Path]):
    joint = read_run(method_runs["joint"])
    grpo = read_run(method_runs["grpo"])
    assert np.all(np.isfinite(joint.scalars["mu"])) and not np.any(np.isfinite(grpo.scalars["mu"]))
    assert np.nanmax(np.abs(grpo.bins["multiplier"] - 1.0)) == 0.0


def test_runs_open_in_the_app_data_layer_and_report(method_runs: dict[str, Path], tmp_path: Path):
    pytest.importorskip("pandas")
    from apps.data import budget, curriculum, loading
    from apps.report import cli
    for run_dir in method_runs.values():
        run = loading.load_run(run_dir)
        check = budget.budget_check(run)
        assert check is not None and check.held and check.target == 4
        assert not budget.se_frame(run).empty and not curriculum.heatmap_frame(run, "rollouts").empty
    assert cli.main([str(method_runs["joint"]), "--out", str(tmp_path / "report")]) == 0
    assert len(list((tmp_path / "report").rglob("*.png"))) >= 5


def test_runs_open_in_the_app(method_runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest
    script = Path(__file__).resolve().parents[2] / "apps" / "streamlit_app.py"
    monkeypatch.setenv("GDRO_APP_ROOT", str(method_runs["joint"].parent))
    monkeypatch.delenv("GDRO_APP_RUNS", raising=False)
    app = AppTest.from_file(str(script), default_timeout=300).run()  # a hang guard, not a speed check
    for page in ("rollout_budget", "outcomes", "se_proxy"):
        app = app.switch_page(f"views/{page}.py").run()
        assert not app.exception, [e.value for e in app.exception]
        assert not app.error, [e.value for e in app.error]


class StartsWithDigit:
    """+1 when the response starts with a digit: about 10% of the tiny model's first tokens."""

    def score(self, responses, answers):
        rewards = np.array([1.0 if text[:1].isdigit() else -1.0 for text in responses])
        return RewardResult(rewards, rewards > 0, {})


def test_grpo_learns_a_trivially_learnable_reward(tmp_path: Path):
    """Gradient sign end to end: mean success from < 0.2 to > 0.8 within a few hundred CPU steps."""
    torch.set_num_threads(1)
    records = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(16)]
    cfg = tiny_config(tmp_path, "rollout.max_new_tokens=2", "train.prompts_per_step=8", "train.steps=90",
                      "optim.lr=5e-3", "loss.kl_coef=0.0", "train.save_every=0", "train.mini_batches=1")
    run = read_run(train.main(cfg, train_records=records, reward=StartsWithDigit()))
    success = run.scalars["mean_success"]
    assert success[:10].mean() < 0.2, success[:10]
    assert success[-10:].mean() > 0.8, success[-10:]


def test_data_order_is_seeded_and_resumable():
    order = batching.DataOrder(10, seed=3, shuffle=True)
    first = np.concatenate([order.take(4) for _ in range(5)])       # two epochs
    assert sorted(first[:10].tolist()) == list(range(10)) and sorted(first[10:].tolist()) == list(range(10))
    again = batching.DataOrder(10, seed=3, shuffle=True)
    again.take(7)
    resumed = batching.DataOrder(10, seed=3, shuffle=True)
    resumed.load_state_dict(again.state_dict())
    np.testing.assert_array_equal(resumed.take(13), first[7:])


def test_micro_batches_respect_the_token_budget_and_cover_every_sample():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 50, size=40)
    batches = batching.micro_batches(lengths, budget=100)
    assert sorted(np.concatenate(batches).tolist()) == list(range(40))
    for rows in batches:
        assert len(rows) == 1 or lengths[rows].max() * len(rows) <= 100


def test_response_logprobs_equal_a_full_forward_pass():
    torch.manual_seed(0)
    model, tokenizer = load_policy("tiny", seed=1)
    prompts = [[5, 6, 7, 8], [9, 10]]
    responses = [[11, 12], [13, 14, 15, 16]]
    logp, mask, entropy = batching.response_logprobs(model, prompts, responses, 0, torch.device("cpu"), True)
    for row, (p, r) in enumerate(zip(prompts, responses)):
        ids = torch.tensor([p + r])
        full = torch.log_softmax(model(ids).logits[0].double(), -1)
        want = [full[len(p) - 1 + t, tok].item() for t, tok in enumerate(r)]
        np.testing.assert_allclose(logp[row, :len(r)].detach().numpy(), want, atol=1e-5)
        assert mask[row].sum().item() == len(r)
    assert entropy is not None and torch.all(entropy[mask > 0] > 0)



def test_tensorboard_sink_mirrors_the_step_scalars(tmp_path: Path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    torch.set_num_threads(1)
    run_dir = train.main(tiny_config(tmp_path, "train.steps=2", "log.tensorboard=true", "train.save_every=0",
                                     "eval.every=2", "eval.limit=2"))
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    run = read_run(run_dir)
    logged = run.scalars
    for name in ("mean_reward", "time/generate", "actor/kl"):
        values = [event.value for event in events.Scalars(name)]
        assert [event.step for event in events.Scalars(name)] == [1, 2]
        np.testing.assert_allclose(values, logged[name], rtol=1e-6)
    # evaluation metrics are mirrored under eval/ at the step they were taken (finite ones only)
    evaluation = run.evals[-1]["metrics"]
    mirrored = set(events.Tags()["scalars"])
    for name in ("math500/mean@2", "pooled/pass@2_lo", "worst_group/mean@2", "eval/truncated", "eval/samples"):
        tag = name if name.startswith("eval/") else f"eval/{name}"
        assert tag in mirrored, tag
        assert [(e.step, e.value) for e in events.Scalars(tag)] == [(2, pytest.approx(evaluation[name]))]


def test_wandb_sink_offline(tmp_path: Path):
    pytest.importorskip("wandb", reason="wandb is not installed here (optional sink; pip install wandb)")
    from real_runs.sinks import Sinks
    sinks = Sinks(tmp_path, wandb=True, project="gdro-lab-test", config={"a": 1})
    sinks.log(1, {"x": 1.0, "nan": float("nan")})
    sinks.close()
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_gradient_checkpointing_and_micro_batching_do_not_change_the_run(tmp_path: Path):
    """Recomputing activations and splitting the update into 1-sample micro-batches give the same
    per-step metrics as one micro-batch without checkpointing (the denominators are the mini-batch's)."""
    torch.set_num_threads(1)

    def metrics(name: str, *extra: str) -> list[dict]:
        records = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(8)]
        run_dir = train.main(tiny_config(tmp_path, "train.steps=2", "train.save_every=0", f"train.run_name={name}",
                                         "loss.agg=seq-mean-token-mean", "train.prompts_per_step=8",
                                         "rollout.max_new_tokens=4", "optim.lr=1e-2", *extra),
                             train_records=records, reward=StartsWithDigit())
        rows = [json.loads(line)["scalars"] for line in (run_dir / "steps.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if not k.startswith(("time/", "perf/"))} for row in rows]

    plain = metrics("plain", "train.micro_batch_tokens=100000")
    other = metrics("other", "model.gradient_checkpointing=true", "train.micro_batch_tokens=1")
    assert plain[0].keys() == other[0].keys()
    assert 0 < plain[0]["mean_success"] < 1 and plain[0]["actor/grad_norm"] > 1e-2   # real gradients
    for a, b in zip(plain, other):
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key


def test_on_policy_update_only_with_one_optimizer_step_per_batch_and_no_dropout(tmp_path: Path):
    model, _ = load_policy("tiny", seed=0)
    one = tiny_config(tmp_path, "train.mini_batches=1")
    assert ppo.on_policy_update(one, model)
    assert not ppo.on_policy_update(tiny_config(tmp_path, "train.mini_batches=2"), model)
    assert not ppo.on_policy_update(tiny_config(tmp_path, "train.mini_batches=1", "train.ppo_epochs=2"), model)
    model.config.attention_dropout = 0.1       # the update's log-probs would be a dropped-out network's
    assert not ppo.on_policy_update(one, model)
    model.config.attention_dropout = 0.0
    model.extra = torch.nn.Dropout(0.5)
    assert not ppo.on_policy_update(one, model)


def _toy_batch(seed: int = 0):
    """A RolloutBatch of 6 ragged samples from the tiny model's vocabulary, advantages of both signs."""
    from real_runs.batching import RolloutBatch

    rng = np.random.default_rng(seed)
    prompts = [rng.integers(5, 200, size=rng.integers(2, 6)).tolist() for _ in range(6)]
    responses = [rng.integers(5, 200, size=rng.integers(1, 5)).tolist() for _ in range(6)]
    return RolloutBatch(prompts, responses, np.array([len(r) for r in responses]),
                        np.array([len(p) + len(r) for p, r in zip(prompts, responses)]),
                        np.array([1.5, -0.5, 0.7, -1.2, 0.3, -0.8]), pad_id=0)


def test_on_policy_update_equals_the_update_with_recomputed_old_logprobs(tmp_path: Path):
    """Skipping the old-log-prob pass (old = the update's own log-probs, detached) gives the same
    parameters, loss and KL as recomputing them first; the engine gap is still measured."""
    import copy

    from real_runs.batching import response_logprobs

    torch.manual_seed(0)
    cfg = tiny_config(tmp_path, "train.mini_batches=1", "optim.lr=1e-2", "loss.kl_coef=0.01")
    policy, _ = load_policy("tiny", seed=2)
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    with torch.no_grad():            # the reference must differ from the policy for the KL to matter
        for p in reference.parameters():
            p.add_(0.01 * torch.randn_like(p))
    initial = {k: v.clone() for k, v in policy.state_dict().items()}
    results = {}
    for old in (True, False):
        model = copy.deepcopy(policy)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        batch = _toy_batch()
        with torch.no_grad():        # the engine's log-probs: here the policy's own, shifted by 1e-3
            logp, _, _ = response_logprobs(model, batch.prompts, batch.responses, 0, torch.device("cpu"))
        engine = [logp[i, :len(r)].numpy() + 1e-3 for i, r in enumerate(batch.responses)]
        with torch.no_grad():
            gaps = ppo.recompute_logprobs(batch, model, reference, 4096, engine, old=old)
        assert (len(batch.old_logp) == 6) == old and len(batch.ref_logp) == 6
        sums, losses, norms, update_gaps = ppo.ppo_update(batch, model, optimizer, scheduler, cfg, 1, nullcontext,
                                                            engine)
        assert len(gaps + update_gaps) == 6 and np.allclose(gaps + update_gaps, 1e-3, atol=1e-5)
        assert (gaps == []) != old and (update_gaps == []) == old
        results[old] = (model.state_dict(), sums, losses, norms)
    (recomputed, s1, l1, n1), (reused, s2, l2, n2) = results[True], results[False]
    moved = max(float((recomputed[k] - initial[k]).abs().max()) for k in initial)
    assert moved > 1e-3                                                     # a real update
    for key in initial:
        torch.testing.assert_close(reused[key], recomputed[key], atol=1e-6, rtol=1e-5)
    assert l2 == pytest.approx(l1, rel=1e-5) and n2 == pytest.approx(n1, rel=1e-5)
    assert s1["kl"] > 0 and s2 == pytest.approx(s1, rel=1e-5, abs=1e-9)


def test_ppo_update_without_old_logprobs_refuses_several_optimizer_steps(tmp_path: Path):
    cfg = tiny_config(tmp_path, "train.mini_batches=2")
    model, _ = load_policy("tiny", seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = _toy_batch()
    batch.ref_logp = [torch.zeros(len(r)) for r in batch.responses]
    with pytest.raises(ValueError, match="old log-probs"):
        ppo.ppo_update(batch, model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
                         cfg, 1, nullcontext)


def test_trainer_skips_the_old_logprob_pass_only_on_policy_and_logs_the_same_run(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    """End to end: with one mini-batch the trainer asks for reference log-probs only, and its run
    equals (metrics to 1e-4) the run that recomputes the old log-probs first; with two mini-batches
    it recomputes them."""
    torch.set_num_threads(1)
    calls: list[bool] = []
    original = ppo.recompute_logprobs

    def recording(*args, old=True, **kwargs):
        calls.append(old)
        return original(*args, old=old, **kwargs)

    monkeypatch.setattr(ppo, "recompute_logprobs", recording)

    def metrics(name: str, *extra: str) -> list[dict]:
        records = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(8)]
        run_dir = train.main(tiny_config(tmp_path, "train.steps=2", "train.save_every=0", f"train.run_name={name}",
                                         "train.prompts_per_step=8", "rollout.max_new_tokens=4", "optim.lr=1e-2",
                                         *extra), train_records=records, reward=StartsWithDigit())
        rows = [json.loads(line)["scalars"] for line in (run_dir / "steps.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if not k.startswith(("time/", "perf/"))} for row in rows]

    reused = metrics("reused", "train.mini_batches=1")
    assert calls == [False, False]
    monkeypatch.setattr(ppo, "on_policy_update", lambda cfg, policy: False)
    recomputed = metrics("recomputed", "train.mini_batches=1")
    assert calls[2:] == [True, True]
    assert 0 < reused[0]["mean_success"] < 1 and reused[0]["actor/grad_norm"] > 1e-2 and reused[1]["actor/kl"] > 0
    for a, b in zip(reused, recomputed):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    monkeypatch.undo()
    monkeypatch.setattr(ppo, "recompute_logprobs", recording)
    metrics("two-mini-batches", "train.mini_batches=2")
    assert calls[4:] == [True, True]


def test_evaluations_reach_wandb_under_eval_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """W&B gets the evaluation record like TensorBoard (a stand-in module: wandb is optional)."""
    import sys
    import types

    from real_runs.sinks import Sinks
    logged: list[tuple[int, dict]] = []
    run = types.SimpleNamespace(log=lambda values, step: logged.append((step, values)), finish=lambda: None)
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **kwargs: run))
    sinks = Sinks(tmp_path, wandb=True)
    sinks.log(3, {"mean_reward": 0.5})
    sinks.log_eval(3, {"math500/mean@8": 0.25, "math500/mean@8_lo": float("nan"), "eval/truncated": 0.5})
    sinks.close()
    assert logged == [(3, {"mean_reward": 0.5}), (3, {"eval/math500/mean@8": 0.25, "eval/truncated": 0.5})]


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_ppo_update_micro_batches_sum_to_verls_loss_with_an_empty_response(tmp_path: Path, agg: str):
    """The update's micro-batch losses add up to agg_loss of the whole mini-batch, in which verl 0.9.1
    leaves an empty response out of the sequence mean (the verl stream's denominator, issue 21.2)."""
    from real_runs import loss as L
    from real_runs.batching import RolloutBatch

    cfg = tiny_config(tmp_path, "train.mini_batches=1", f"loss.agg={agg}", "loss.kl_coef=0",
                      "train.micro_batch_tokens=8")
    model, _ = load_policy("tiny", seed=0)
    toy = _toy_batch()
    real = toy.real_lengths.copy()
    real[2] = 0                                              # sample 2 generated nothing
    toy.responses[2] = [0]
    batch = RolloutBatch(toy.prompts, toy.responses, real, np.array([len(p) + len(r) for p, r in
                         zip(toy.prompts, toy.responses)]), toy.advantages, pad_id=0)
    with torch.no_grad():
        logp, mask, _ = batch.forward(model, np.arange(6))
    batch.old_logp = [logp[i, :len(r)].clone() for i, r in enumerate(batch.responses)]
    want = L.policy_loss(logp, logp, torch.as_tensor(batch.advantages), mask, clip_low=0.2, clip_high=0.28,
                         clip_ratio_c=3.0, agg=agg, norm_length=float(cfg.rollout.max_new_tokens))[0]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    _, losses, _, _ = ppo.ppo_update(batch, model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
                                       cfg, 1, nullcontext)
    assert len(losses) == 1 and losses[0] == pytest.approx(float(want), rel=1e-5)
    assert float(want) == pytest.approx(float(L.aggregate(-torch.as_tensor(batch.advantages)[:, None].expand_as(mask),
                                                            mask, agg, norm_length=float(cfg.rollout.max_new_tokens))),
                                        rel=1e-5)  # ratio 1: the loss is -A aggregated


def test_time_elapsed_counts_start_up_eval_and_continues_after_a_resume(tmp_path: Path):
    """``time/elapsed`` (the app's wall-clock axis): in every record, increasing, at least the sum of
    the step and evaluation times (start-up and checkpoints count too), and after a resume it
    continues from the resumed step's value instead of restarting at 0."""
    import time
    torch.set_num_threads(1)
    cfg = tiny_config(tmp_path, "train.run_name=r", "train.save_every=0", "eval.every=2", "eval.limit=1")
    first_start = time.perf_counter()
    run_dir = train.main(cfg, stop_after=2)
    first_wall = time.perf_counter() - first_start
    before = read_run(run_dir)
    assert before.meta["status"] == "stopped" and before.steps.tolist() == [1, 2]
    second_start = time.perf_counter()
    train.main(None, resume=str(run_dir))
    second_wall = time.perf_counter() - second_start
    run = read_run(run_dir)
    elapsed = run.scalars["time/elapsed"]
    assert run.steps.tolist() == [1, 2, 3, 4] and np.all(np.isfinite(elapsed))
    assert np.all(np.diff(elapsed) > 0), elapsed
    np.testing.assert_array_equal(elapsed[:2], before.scalars["time/elapsed"])  # the resume kept steps 1-2
    step_and_eval = run.scalars["time/step"] + np.nan_to_num(run.scalars.get("time/eval", np.zeros(4)))
    assert elapsed[0] >= step_and_eval[0] and elapsed[1] >= step_and_eval[:2].sum()
    assert elapsed[1] <= first_wall
    # the resumed process adds its own time to step 2's value (not a restart at 0, not a double count)
    assert elapsed[2] >= elapsed[1] + step_and_eval[2]
    assert elapsed[3] - elapsed[1] <= second_wall
    assert elapsed[3] >= elapsed[1] + step_and_eval[2:].sum()


def test_logged_elapsed_of_a_run_without_it_sums_step_and_eval_times(tmp_path: Path):
    from gdro_lab.runformat.runlog import RunWriter
    from real_runs.overhead import RunClock, logged_elapsed
    with RunWriter(tmp_path / "old", {}, 1, "gdro train") as writer:
        for step, (seconds, evals) in enumerate([(1.0, None), (2.0, 0.5), (4.0, None)], start=1):
            scalars = {"time/step": seconds, **({"time/eval": evals} if evals else {})}
            writer.log_step(step, scalars, {})
    assert logged_elapsed(tmp_path / "old", 0) == 0.0
    assert logged_elapsed(tmp_path / "old", 2) == pytest.approx(3.5)
    assert logged_elapsed(tmp_path / "old", 3) == pytest.approx(7.5)
    with RunWriter(tmp_path / "new", {}, 1, "gdro train") as writer:
        for step, value in enumerate([5.0, 9.0, 12.0], start=1):
            writer.log_step(step, {"time/step": 1.0, "time/elapsed": value}, {})
    assert logged_elapsed(tmp_path / "new", 2) == 9.0
    import time
    low = time.perf_counter()
    value = RunClock(started=low - 2.0, before=9.0).elapsed()
    assert 11.0 <= value <= 11.0 + (time.perf_counter() - low)
