"""verl 0.9.1's real ``fit()`` with GDRORayPPOTrainer on CPU, killed and resumed (issue 20.1).

One module fixture runs the CPU launcher (:mod:`real_runs.verl.cpu`) twice, each a fresh local Ray
with 2 FSDP2 ranks over gloo and the ``hf_cpu`` rollout, on the smoke's setup
(:mod:`real_runs.verl.smoke`: 12 recurring toy prompts, batch 6 x rollout.n 4, the known-odds
reward):

- job 1: 6 steps planned, checkpoints every 3; the trainer SIGKILLs itself right after step 4 is
  logged (so the last checkpoint is step 3 and the run directory holds a dead step 4);
- job 2: the same launch, which resumes from ``global_step_3`` and runs steps 4..6.

The checkpoint is mid-epoch (2 steps per epoch) on purpose: verl 0.9.1 skips restoring the
dataloader at an epoch boundary, so a resume there draws the next epoch in another order than an
uninterrupted run would (the controllers are unaffected; the prompts differ).

Every step's audit file (plan, rows, scores, verl's advantages, the scaled ones) is checked against
independent references: verl's own ``compute_grpo_outcome_advantage`` on the step's scores, and a
fresh controller fed the five steps' feedback in one go (so the killed-and-resumed controllers must
have continued exactly as an uninterrupted one). Runtime: two launches, about 2 x 60 s of CPU each
(measured with ``pytest --durations``; see docs/benchmarks.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage  # noqa: E402

from gdro_lab.runformat.runlog import encode_state, load_snapshot, read_run  # noqa: E402
from real_runs.verl import smoke  # noqa: E402
from real_runs.verl.state import load_controller_state  # noqa: E402
from verl_helpers import launch  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
STEPS, KILL_AFTER, SAVE_FREQ = 6, 4, 3
ROWS = smoke.BATCH * smoke.N_BAR


def _launch(out: Path, tag: str, extra: list[str], kill_after: int = 0, timeout_s: int = 900) -> dict:
    """Run ``python -m real_runs.verl.cpu`` in its own session (niced); returns rc and log text."""
    args = ["-m", "real_runs.verl.cpu", "--audit", str(out / f"audit_{tag}"),
            "--kill-after-step", str(kill_after), *smoke.overrides(out, STEPS, save_freq=SAVE_FREQ, ranks=2), *extra]
    rc, text = launch(args, out / f"log_{tag}.txt", timeout_s, VERL_FILE_LOGGER_PATH=str(out / f"tracker_{tag}.jsonl"))
    return {"rc": rc, "log": text}


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_fit")
    smoke.prepare(out)
    extra = ["trainer.logger=[console,file]", "actor_rollout_ref.rollout.full_determinism=true"]
    first = _launch(out, "job1", extra, kill_after=KILL_AFTER)
    assert first["rc"] not in (0, None), f"job 1 should have died after step {KILL_AFTER}:\n{first['log'][-3000:]}"
    shutil.copy(out / "run" / "steps.jsonl", out / "steps_job1.jsonl")
    second = _launch(out, "job2", extra)
    assert second["rc"] == 0, f"the resumed job failed:\n{second['log'][-3000:]}"
    return {"out": out, "logs": (first["log"], second["log"]), "extra": extra}


def _audits(out: Path, tag: str) -> dict[int, dict]:
    files = sorted((out / f"audit_{tag}").glob("step_*.npz"), key=lambda p: int(p.stem.split("_")[1]))
    return {int(f.stem.split("_")[1]): dict(np.load(f)) for f in files}


def _steps(fit) -> dict[int, dict]:
    """Steps 1..KILL_AFTER-1 of job 1 and KILL_AFTER..STEPS of job 2: the run as it continued."""
    first, second = _audits(fit["out"], "job1"), _audits(fit["out"], "job2")
    return {**{s: a for s, a in first.items() if s < KILL_AFTER}, **second}


def _tracker(out: Path, tag: str) -> dict[int, dict]:
    lines = (out / f"tracker_{tag}.jsonl").read_text().splitlines()
    return {int(r["step"]): r["data"] for r in map(json.loads, lines)}


def test_the_job_died_after_step_4_and_resumed_from_step_3(fit):
    first, second = _audits(fit["out"], "job1"), _audits(fit["out"], "job2")
    assert sorted(first) == [1, 2, 3, 4] and sorted(second) == [4, 5, 6]
    assert f"audit: killing the trainer after step {KILL_AFTER}" in fit["logs"][0]
    assert "Resuming from" in fit["logs"][1] and "global_step_3" in fit["logs"][1]
    logged = [json.loads(line)["step"] for line in (fit["out"] / "steps_job1.jsonl").read_text().splitlines()]
    assert logged == [1, 2, 3, 4]  # the dead step 4 was in the run directory when the job died


def test_every_step_executes_the_plan_exactly(fit):
    for step, audit in _steps(fit).items():
        plan = dict(zip(audit["plan_ids"].tolist(), audit["plan_counts"].tolist()))
        ids, uids = audit["ids"].tolist(), audit["uids"].tolist()
        executed: dict[str, int] = {}
        for pid in ids:
            executed[pid] = executed.get(pid, 0) + 1
        assert executed == plan, f"step {step}: executed {executed} != plan {plan}"
        assert len(ids) == sum(plan.values()) == ROWS and min(plan.values()) >= 2
        assert len(set(uids)) == len(plan) and all(len({p for p, u in zip(ids, uids) if u == x}) == 1 for x in set(uids))


def test_rollout_gdro_plans_ragged_counts_at_a_fixed_total(fit):
    ragged = [s for s, a in _steps(fit).items() if np.ptp(a["plan_counts"]) > 0]
    assert ragged, "no step planned non-uniform counts: the prompts did not recur or Rollout-GDRO did not act"


def _verl_grpo(audit) -> torch.Tensor:
    mask = torch.as_tensor(audit["response_mask"], dtype=torch.float32)
    rewards = torch.zeros_like(mask)
    last = (mask.sum(-1).long() - 1).clamp(min=0)
    rewards[torch.arange(len(mask)), last] = torch.as_tensor(audit["scores"], dtype=torch.float32)
    advantages, _ = compute_grpo_outcome_advantage(rewards, mask, np.asarray(audit["uids"], dtype=object))
    return advantages


def _replayed(fit) -> dict[int, dict]:
    """A fresh controller fed every step's batch in order: its plans, multipliers and state per step."""
    from real_runs.verl.cpu import compose
    from real_runs.verl.trainer import controller_from_config

    config = compose([*smoke.overrides(fit["out"], STEPS, save_freq=SAVE_FREQ, ranks=2), *fit["extra"],
                      "gdro.run_dir=null"])
    controller = controller_from_config(config)
    replay = {}
    for step, audit in sorted(_steps(fit).items()):
        plan = controller.plan(audit["plan_ids"].tolist())
        ids = audit["ids"].tolist()
        mask = torch.as_tensor(audit["response_mask"], dtype=torch.float32)
        scores = torch.zeros_like(mask)
        scores[:, 0] = torch.as_tensor(audit["scores"], dtype=torch.float32)
        data = DataProto.from_single_dict({
            "response_mask": mask, "token_level_scores": scores,
            "advantages": torch.as_tensor(audit["verl_advantages"]),
            "uid": np.asarray(audit["uids"], dtype=object),
            "extra_info": np.array([{"index": i} for i in ids], dtype=object)})
        controller.observe(data, step)
        replay[step] = {"plan": plan, "advantages": data.batch["advantages"].numpy(), "state": controller.state_dict()}
    return replay


def test_advantages_are_verls_grpo_advantages_times_the_multiplier(fit):
    replay = _replayed(fit)
    scaled_somewhere = False
    for step, audit in _steps(fit).items():
        verl_advantages = _verl_grpo(audit).numpy()
        np.testing.assert_allclose(audit["verl_advantages"], verl_advantages, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(replay[step]["plan"], audit["plan_counts"])  # the state continued exactly
        np.testing.assert_allclose(audit["advantages"], replay[step]["advantages"], rtol=1e-6, atol=1e-7)
        for uid in set(audit["uids"].tolist()):  # one positive multiplier per prompt, applied to all its rows
            rows = audit["uids"] == uid
            base, scaled = audit["verl_advantages"][rows], audit["advantages"][rows]
            if np.abs(base).max() > 1e-6:
                ratio = scaled[np.abs(base) > 1e-6] / base[np.abs(base) > 1e-6]
                assert ratio.min() > 0 and np.ptp(ratio) < 1e-5 * ratio.max()
                scaled_somewhere |= abs(float(ratio.mean()) - 1.0) > 1e-3
    assert scaled_somewhere, "every multiplier was 1: the advantages equal verl's unscaled ones"


def test_controller_state_continues_exactly_through_the_checkpoint(fit):
    out, replay = fit["out"], _replayed(fit)
    saved_step, saved = load_controller_state(out / "ckpt" / f"global_step_{SAVE_FREQ}")
    snap_step, snapshot = load_snapshot(out / "run", SAVE_FREQ)
    assert saved_step == snap_step == SAVE_FREQ
    expected = encode_state(replay[SAVE_FREQ]["state"])
    assert encode_state(saved) == expected and encode_state(snapshot) == expected
    dead, redone = _audits(out, "job1")[KILL_AFTER], _audits(out, "job2")[KILL_AFTER]
    # the resumed job repeats the dead step bit for bit: the same prompts (dataloader restored), plan
    # (controllers), responses (actor weights synced into the rollout, seeded sampling), scores and
    # advantages; only verl's per-step uuids differ
    for key in sorted(set(dead) - {"uids"}):
        np.testing.assert_array_equal(dead[key], redone[key], err_msg=key)


def test_metrics_reach_the_tracker_and_the_run_directory(fit):
    out = fit["out"]
    run = read_run(out / "run")
    assert run.steps.tolist() == list(range(1, STEPS + 1)) and run.meta["status"] == "finished"
    assert np.all(run.scalars["total_rollouts"] == ROWS)
    tracked = {**{s: d for s, d in _tracker(out, "job1").items() if s < KILL_AFTER}, **_tracker(out, "job2")}
    assert sorted(tracked) == list(range(1, STEPS + 1))
    for index, step in enumerate(run.steps.tolist()):
        data = tracked[step]
        assert data["gdro/total_rollouts"] == ROWS and data["rollout_alloc/mean_n"] == smoke.N_BAR
        for name in ("mean_success", "num_unassigned", "zero_variance_frac"):
            assert data[f"gdro/{name}"] == pytest.approx(float(run.scalars[name][index]))
        assert "actor/pg_loss" in data and "critic/advantages/max" in data
    assert any(k.startswith("gdro/weight/bin_") for k in tracked[STEPS])


def test_the_rollout_receives_the_actors_weights_every_step(fit):
    loads = [line for log in fit["logs"] for line in log.splitlines() if "hf_cpu: weights of step" in line]
    steps = sorted({int(line.split("hf_cpu: weights of step ")[1].split()[0]) for line in loads})
    assert steps == list(range(0, STEPS + 1))  # the initial sync (0), the resumed one (3), after each update
    tracked = {**_tracker(fit["out"], "job1"), **_tracker(fit["out"], "job2")}
    for step, data in tracked.items():  # rollout log-probs = the updated actor's log-probs
        assert data["training/rollout_probs_diff_max"] < 1e-5, step
        assert data["actor/grad_norm"] > 0
