"""The arena's allocators and prompt selectors in the verl plugin: verl's data path of a fit step with
the workers stubbed, exact budget every step, dropped groups out of the update, resume."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import ray_trainer  # noqa: E402

from gdro_lab.functional.grpo import group_is_constant  # noqa: E402
from real_runs.verl import batch as vb  # noqa: E402
from real_runs.verl.trainer import GDRORayPPOTrainer, controller_from_config  # noqa: E402
from verl_helpers import compose_config, prompt_batch, with_rewards  # noqa: E402

P, N = 8, 4
SUCCESS = np.repeat([0.0, 0.5, 1.0], 8)  # prompts that never / sometimes / always succeed


def make_trainer(tmp_path, overrides=(), gen_batch=P):
    cfg = compose_config([f"actor_rollout_ref.rollout.n={N}", f"data.train_batch_size={P}",
                          f"+data.gen_batch_size={gen_batch}", f"trainer.default_local_dir={tmp_path / 'ckpt'}",
                          "gdro.classifier_config.edges=[0.3,0.7]", "gdro.classifier_config.window=4", *overrides])
    trainer = GDRORayPPOTrainer.__new__(GDRORayPPOTrainer)
    trainer.config = cfg
    trainer.gdro = controller_from_config(cfg)
    trainer._gdro_validating = False
    trainer.global_steps = 0
    return trainer


@pytest.fixture
def stub_actor(monkeypatch):
    seen = []

    def fake_update_actor(self, batch):
        seen.append(batch.batch["response_mask"].clone())
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {}})

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_update_actor", fake_update_actor)
    return seen


def fit_step(trainer, step, candidates):
    rng = np.random.default_rng([step, 3])
    rows = rng.choice(SUCCESS.size, size=candidates, replace=False)
    batch = prompt_batch([f"toy:train:{k}" for k in rows], seed=step)
    trainer.global_steps = step
    gen_in = trainer._get_gen_batch(batch).repeat(repeat_times=N, interleave=True)
    gen_out = DataProto(batch=TensorDict({"responses": torch.zeros(len(gen_in), 3, dtype=torch.long)},
                                         batch_size=[len(gen_in)]), non_tensor_batch=gen_in.non_tensor_batch, meta_info={})
    batch = batch.repeat(repeat_times=N, interleave=True).union(gen_out)
    scores = np.where(rng.random(len(batch)) < SUCCESS[rows[batch.batch["prompt_row"].numpy()]], 1.0, -1.0)
    with_rewards(batch, scores)
    batch = batch.select_idxs(rng.permutation(len(batch)))
    batch = ray_trainer.compute_advantage(batch, adv_estimator="grpo", num_repeat=N)
    mask_before = batch.batch["response_mask"].clone()
    out = trainer._update_actor(batch)
    assert torch.equal(batch.batch["response_mask"], mask_before)  # restored after the update
    return batch, out.meta_info["metrics"]


@pytest.mark.parametrize("allocator", ["knapsack", "vip", "duet", "cero", "gdro_prompt"])
def test_per_prompt_allocators_plan_an_exact_budget_from_the_ids(tmp_path, stub_actor, allocator):
    trainer = make_trainer(tmp_path, [f"gdro.allocator={allocator}", "gdro.weighter=uniform"])
    plans = []
    for step in range(1, 9):
        batch, metrics = fit_step(trainer, step, P)
        counts = np.bincount(batch.batch["prompt_row"].numpy(), minlength=P)
        assert counts.sum() == P * N and counts.min() >= 2 and counts.max() <= 12
        assert metrics["gdro/compute/rollouts_generated"] == P * N
        plans.append(counts)
    assert len(trainer.gdro.allocator.stats) > P  # the history is per prompt id
    assert any(np.ptp(c) > 0 for c in plans)


def test_dynamic_sampling_drops_constant_groups_from_the_update(tmp_path, stub_actor):
    trainer = make_trainer(tmp_path, ["gdro.selector=dynamic_sampling", "gdro.allocator=uniform"])
    for step in range(1, 5):
        batch, metrics = fit_step(trainer, step, P)
        feedback, index = vb.feedback_from_batch(batch, trainer.gdro._step_bins)
        constant_R = group_is_constant(feedback.rewards_R, feedback.counts_P)[index]
        masked = stub_actor[-1].sum(dim=-1).numpy() == 0
        np.testing.assert_array_equal(masked, constant_R)
        assert metrics["gdro/compute/rollouts_trained"] == (~constant_R).sum()
        assert metrics["gdro/compute/rollouts_generated"] == P * N


def test_greso_chooses_train_batch_size_of_the_candidates_and_resumes(tmp_path, stub_actor):
    trainer = make_trainer(tmp_path, ["gdro.selector=greso", "gdro.allocator=uniform",
                                      "+gdro.selector_config.p_easy=0.05", "+gdro.selector_config.p_hard=0.05"],
                           gen_batch=16)
    skipped = 0
    for step in range(1, 15):
        batch, metrics = fit_step(trainer, step, 16)
        counts = np.bincount(batch.batch["prompt_row"].numpy(), minlength=16)
        assert counts.sum() == P * N and np.count_nonzero(counts) == P  # 8 of 16 candidates, n_bar each
        skipped += metrics.get("gdro/select/skipped", 0)
    assert skipped > 0  # all-correct and all-wrong prompts were skipped before rollout
    state = trainer.gdro.state_dict()
    again = make_trainer(tmp_path, ["gdro.selector=greso", "gdro.allocator=uniform"], gen_batch=16)
    again.gdro.load_state_dict(state)
    a, _ = fit_step(trainer, 15, 16)
    b, _ = fit_step(again, 15, 16)
    assert torch.equal(a.batch["prompt_row"], b.batch["prompt_row"])  # same screening after the round trip
