"""GDRORayPPOTrainer's overrides driven through verl's own data path of one fit step, and its
controller state through a checkpoint folder (no Ray workers: the worker calls are stubbed)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import ray_trainer  # noqa: E402
from verl_helpers import compose_config, prompt_batch, with_rewards  # noqa: E402

from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl import batch as vb  # noqa: E402
from real_runs.verl.runner import check_launch_config  # noqa: E402
from real_runs.verl.state import CTRL_FILE, check_unlocked, load_controller_state, save_controller_state  # noqa: E402
from real_runs.verl.trainer import GDRORayPPOTrainer, controller_from_config, restore_controllers  # noqa: E402

P, N = 8, 4
SUCCESS = np.repeat([0.02, 0.5, 0.98], 8)  # a fixed world: prompt k solves with probability SUCCESS[k]


def make_trainer(tmp_path, overrides=(), run_dir=True):
    cfg = compose_config([f"actor_rollout_ref.rollout.n={N}", f"data.train_batch_size={P}",
                          f"trainer.default_local_dir={tmp_path / 'ckpt'}",
                          "gdro.classifier_config.edges=[0.3,0.7]", "gdro.classifier_config.window=4",
                          *([f"gdro.run_dir={tmp_path / 'run'}"] if run_dir else []), *overrides])
    trainer = GDRORayPPOTrainer.__new__(GDRORayPPOTrainer)  # no workers: only the overridden methods run
    trainer.config = cfg
    trainer.gdro = controller_from_config(cfg)
    trainer._gdro_validating = False
    trainer.global_steps = 0
    return trainer


@pytest.fixture
def stub_actor(monkeypatch):
    seen = []

    def fake_update_actor(self, batch):
        seen.append(batch.batch["advantages"].clone())
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": 0.5}})

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_update_actor", fake_update_actor)
    return seen


def fit_step(trainer, step, bypass_plan=False):
    """verl 0.9.1 fit's data path for one step, with generation and reward replaced by a toy world.

    bypass_plan: expand with DataProto.repeat itself, as a verl that stopped calling the batches'
    own ``repeat`` would."""
    rng = np.random.default_rng([step, 7])
    rows = rng.choice(SUCCESS.size, size=P, replace=False)
    batch = prompt_batch([f"toy:train:{k}" for k in rows], seed=step)
    trainer.global_steps = step
    gen_batch = trainer._get_gen_batch(batch)
    expand = (lambda data: DataProto.repeat(data, N, True)) if bypass_plan else (
        lambda data: data.repeat(repeat_times=N, interleave=True))
    gen_in = expand(gen_batch)
    gen_out = DataProto(batch=TensorDict({"responses": torch.zeros(len(gen_in), 3, dtype=torch.long)},
                                         batch_size=[len(gen_in)]),
                        non_tensor_batch=gen_in.non_tensor_batch, meta_info={})  # the rollout's output
    batch = expand(batch).union(gen_out)
    prompt_rows = rows[batch.batch["prompt_row"].numpy()]
    scores = np.where(rng.random(len(batch)) < SUCCESS[prompt_rows], 1.0, -1.0)
    with_rewards(batch, scores)
    batch = batch.select_idxs(rng.permutation(len(batch)))  # as _balance_batch reorders
    batch = ray_trainer.compute_advantage(batch, adv_estimator="grpo", num_repeat=N)
    verl_adv = batch.batch["advantages"].clone()
    out = trainer._update_actor(batch)
    return batch, verl_adv, out


def test_fit_step_plans_scales_and_logs(tmp_path, stub_actor):
    trainer = make_trainer(tmp_path, ["+gdro.allocator_config.eta=20.0"])
    trainer.gdro.open_run()
    planned = []
    for step in range(1, 13):
        batch, verl_adv, out = fit_step(trainer, step)
        counts = np.bincount(batch.batch["prompt_row"].numpy(), minlength=P)
        assert counts.sum() == P * N and counts.min() >= 2  # budget exact, n_i >= n_min
        planned.append(counts)
        ids_R = vb.prompt_ids(batch)
        m_P = trainer.gdro.weighter.multipliers(np.array([trainer.gdro._step_bins[i] for i in ids_R]))
        assert torch.equal(stub_actor[-1], verl_adv * torch.tensor(m_P, dtype=torch.float32)[:, None])
        metrics = out.meta_info["metrics"]
        assert metrics["actor/pg_loss"] == 0.5 and metrics["rollout_alloc/mean_n"] == N
        if any(b >= 0 for b in trainer.gdro._step_bins.values()):
            assert any(k.startswith("gdro/weight/bin_") for k in metrics)
        else:  # first step: the classifier has seen no prompt yet
            assert metrics["gdro/num_unassigned"] == P
    assert any(np.ptp(c) > 0 for c in planned)  # Rollout-GDRO moved away from uniform n
    trainer.gdro.close()
    run = read_run(tmp_path / "run")
    assert run.steps.tolist() == list(range(1, 13)) and run.meta["producer"] == "verl"
    assert np.all(run.scalars["total_rollouts"] == P * N)


def test_validation_batches_are_not_planned(tmp_path):
    trainer = make_trainer(tmp_path)
    seen = {}

    def fake_validate(self):
        gen = self._get_gen_batch(prompt_batch(["a:b:0", "a:b:1"]))
        seen["repeat_is_verls"] = "repeat" not in vars(gen)
        return {}

    original = ray_trainer.RayPPOTrainer._validate
    ray_trainer.RayPPOTrainer._validate = fake_validate
    try:
        trainer._validate()
    finally:
        ray_trainer.RayPPOTrainer._validate = original
    assert seen["repeat_is_verls"] and trainer._gdro_validating is False


def test_checkpoint_round_trip_continues_exactly(tmp_path, stub_actor, monkeypatch):
    def fake_save(self):
        (tmp_path / "ckpt").mkdir(exist_ok=True)
        (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text(str(self.global_steps))

    def fake_load(self):
        self.global_steps = int((tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text())

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_save_checkpoint", fake_save)
    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_load_checkpoint", fake_load)
    straight = make_trainer(tmp_path / "a", run_dir=False)
    first = make_trainer(tmp_path, run_dir=True)
    first.gdro.open_run()
    for step in range(1, 6):
        fit_step(straight, step)
        fit_step(first, step)
    first._save_checkpoint()
    assert (tmp_path / "ckpt" / "global_step_5" / CTRL_FILE).exists()
    fit_step(first, 6)  # logged after the checkpoint, then the job dies
    first.gdro.writer._steps.flush()
    first.gdro._lock.release()  # what the OS does for a dead process
    resumed = make_trainer(tmp_path, run_dir=True)
    resumed._load_checkpoint()
    assert resumed.global_steps == 5
    plans = []
    for step in range(6, 10):
        b1, _, _ = fit_step(straight, step)
        plans.append(np.bincount(b1.batch["prompt_row"].numpy(), minlength=P))
        a1 = stub_actor[-1]
        b2, _, _ = fit_step(resumed, step)
        a2 = stub_actor[-1]
        assert torch.equal(b1.batch["prompt_row"], b2.batch["prompt_row"])  # same plan
        assert torch.equal(a1, a2)  # same multipliers
    assert any(np.ptp(c) > 0 for c in plans)  # fresh controllers would plan uniform n here
    resumed.gdro.close()
    run = read_run(tmp_path / "run")
    assert run.steps.tolist() == list(range(1, 10))  # the dead step 6 was dropped
    # time/elapsed (the app's wall-clock axis) continues from step 5's value after the resume
    elapsed = run.scalars["time/elapsed"]
    assert np.all(np.isfinite(elapsed)) and np.all(np.diff(elapsed) > 0), elapsed
    assert resumed.gdro._clock.before == elapsed[4]


def test_controller_state_file_errors(tmp_path):
    trainer = make_trainer(tmp_path, run_dir=False)
    with pytest.raises(VerlPluginError, match="has no gdro_ctrl.json"):
        restore_controllers(trainer.gdro, tmp_path, 3)
    lenient = make_trainer(tmp_path, ["gdro.resume_without_state=true"], run_dir=False)
    assert restore_controllers(lenient.gdro, tmp_path, 3) is False
    save_controller_state(tmp_path, 2, trainer.gdro.state_dict())
    with pytest.raises(VerlPluginError, match="is for step 2"):
        restore_controllers(trainer.gdro, tmp_path, 3)
    (tmp_path / CTRL_FILE).write_text('{"format": "gdro-verl-ctrl", "vers')
    with pytest.raises(VerlPluginError, match="is corrupt"):
        load_controller_state(tmp_path)
    (tmp_path / CTRL_FILE).write_text(json.dumps({"format": "gdro-verl-ctrl", "version": 99, "step": 1, "state": {}}))
    with pytest.raises(VerlPluginError, match="upgrade gdro-lab"):
        load_controller_state(tmp_path)


@pytest.mark.parametrize("overrides, message", [
    (["trainer.use_v1=true"], "trainer.use_v1=false"),
    (["algorithm.adv_estimator=gae"], "adv_estimator=gae is not supported"),
    (["trainer.critic_warmup=2"], "critic_warmup must be 0"),
    (["actor_rollout_ref.actor.use_prefix_grouper=true"], "use_prefix_grouper=true"),
    (["+gdro.bogus=1"], "no setting\\(s\\) bogus"),
    (["gdro.allocator=no_such_allocator"], "gdro.allocator='no_such_allocator' is unknown"),
    (["gdro.selector=greso"], "set data.gen_batch_size above data.train_batch_size"),
    (["+gdro.allocator_config.n_bar=6"], "differs from actor_rollout_ref.rollout.n"),
    (["gdro.classifier_config.k=3"], "pass@k needs k <= n_min"),
    (["actor_rollout_ref.rollout.n=16"], "n_bar=16 is invalid.*actor_rollout_ref.rollout.n=16"),
    (["gdro.allocator_config.n_min=1"], "gdro settings do not fit this launch"),
])
def test_launch_config_errors_are_one_line(overrides, message):
    cfg = compose_config(["actor_rollout_ref.rollout.n=4", *overrides])
    with pytest.raises(VerlPluginError, match=message) as info:
        check_launch_config(cfg)  # builds the controllers: everything fails here, before Ray starts
    assert "\n" not in str(info.value)


def test_executed_counts_must_equal_the_plan(tmp_path, stub_actor):
    """If verl expanded the batches without the repeat the plugin installs (here: the class's own
    DataProto.repeat), a ragged plan would silently run uniform: the step fails in one line instead."""
    trainer = make_trainer(tmp_path, ["+gdro.allocator_config.eta=20.0"], run_dir=False)
    with pytest.raises(VerlPluginError, match="executed rollouts differ from the Rollout-GDRO plan") as info:
        for step in range(1, 40):
            fit_step(trainer, step, bypass_plan=True)  # uniform plans still match; the first ragged one fails
    assert np.ptp(list(trainer.gdro.last_plan.values())) > 0 and "\n" not in str(info.value)


def _launch_cfg(tmp_path, *extra):
    return compose_config(["actor_rollout_ref.rollout.n=4", f"trainer.default_local_dir={tmp_path / 'ckpt'}",
                           f"gdro.run_dir={tmp_path / 'run'}", *extra])


def test_relaunch_before_the_first_checkpoint_fails_before_launch_in_one_line(tmp_path):
    first = controller_from_config(_launch_cfg(tmp_path))
    first.open_run()                      # the first job wrote its run directory, then died before saving
    first.close("failed")
    cfg = _launch_cfg(tmp_path)
    with pytest.raises(VerlPluginError, match="already holds a run, but this launch resumes no checkpoint") as info:
        check_launch_config(cfg)
    assert "\n" not in str(info.value)
    with pytest.raises(VerlPluginError, match="already holds a run"):  # the same line inside the workers
        controller_from_config(cfg).open_run(resume_step=None)
    steps = tmp_path / "ckpt" / "global_step_3"   # once a checkpoint exists, the launch resumes the run
    save_controller_state(steps, 3, first.state_dict())
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("3")
    check_launch_config(_launch_cfg(tmp_path))
    with pytest.raises(VerlPluginError, match="already holds a run"):
        check_launch_config(_launch_cfg(tmp_path, "trainer.resume_mode=disable"))


def test_one_writer_per_run_directory(tmp_path):
    writer = controller_from_config(_launch_cfg(tmp_path))
    writer.open_run()
    (tmp_path / "ckpt" / "global_step_2").mkdir(parents=True)
    save_controller_state(tmp_path / "ckpt" / "global_step_2", 2, writer.state_dict())
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("2")
    with pytest.raises(VerlPluginError, match=f"pid {os.getpid()}.*one writer per run") as info:
        check_launch_config(_launch_cfg(tmp_path))     # a resume while the first job still writes
    assert "\n" not in str(info.value)
    second = controller_from_config(_launch_cfg(tmp_path))
    with pytest.raises(VerlPluginError, match="being written by another process"):
        second.open_run(resume_step=2)
    writer.close()
    second.open_run(resume_step=2)                     # released: the resume proceeds
    second.close()
    assert read_run(tmp_path / "run").meta["status"] == "finished"


def test_lock_is_released_when_the_writer_is_killed(tmp_path):
    import signal
    import subprocess
    import sys

    code = ("import sys, time; from real_runs.verl.state import lock_run_dir; lock_run_dir(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    with pytest.raises(VerlPluginError, match="being written by another process"):
        check_unlocked(tmp_path / "run")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    check_unlocked(tmp_path / "run")


@pytest.mark.parametrize("content, message", [
    ("file", "is a file"),
    ("folder", "is not empty and holds no run"),
])
def test_run_dir_that_is_not_ours_is_never_written(tmp_path, content, message):
    target = tmp_path / "run"
    if content == "file":
        target.write_text("x")
    else:
        target.mkdir()
        (target / "config.json").write_text('{"mine": true}')
    with pytest.raises(VerlPluginError, match=message):
        check_launch_config(_launch_cfg(tmp_path))
    with pytest.raises(VerlPluginError, match=message):
        controller_from_config(_launch_cfg(tmp_path)).open_run()
    if content == "folder":
        assert (target / "config.json").read_text() == '{"mine": true}' and sorted(os.listdir(target)) == ["config.json"]


def test_resuming_a_checkpoint_without_controller_state_fails_before_launch(tmp_path):
    (tmp_path / "ckpt" / "global_step_4").mkdir(parents=True)
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("4")
    with pytest.raises(VerlPluginError, match="global_step_4, which has no gdro_ctrl.json"):
        check_launch_config(_launch_cfg(tmp_path))
    check_launch_config(_launch_cfg(tmp_path, "gdro.resume_without_state=true"))
