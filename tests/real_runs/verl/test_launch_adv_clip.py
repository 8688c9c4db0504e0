"""gdro.adv_clip on verl 0.9.1's real DataProto: verl's GRPO advantages clipped to [-C, C] BEFORE the
Prompt-GDRO multipliers (gdro train's order: A = m_i clip(A_ij, +-5)), off by default, bad values one line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import ray_trainer  # noqa: E402
from verl_helpers import compose_config, prompt_batch, with_rewards  # noqa: E402

from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl import batch as vb  # noqa: E402
from real_runs.verl.runner import check_launch_config  # noqa: E402
from real_runs.verl.trainer import GDRORayPPOTrainer, controller_from_config  # noqa: E402

N = 30  # a group of 30 with one success has A = 29 / sqrt(30) = 5.29 under verl's Bessel std
SUCCESSES = [1, 15, 29, 0]  # per prompt, every step: A = +5.29 / mixed / -5.29 / 0


def grpo_batch(step: int) -> DataProto:
    """One step's batch after verl's compute_advantage (GRPO), prompts expanded through the plugin's plan."""
    batch = prompt_batch([f"toy:train:{k}" for k in range(len(SUCCESSES))], seed=step)
    expanded = batch.repeat(repeat_times=N, interleave=True)
    expanded = expanded.union(DataProto(batch=TensorDict({"responses": torch.zeros(len(expanded), 3, dtype=torch.long)},
                                                         batch_size=[len(expanded)]), meta_info={}))
    scores = np.concatenate([[1.0] * c + [-1.0] * (N - c) for c in SUCCESSES])
    with_rewards(expanded, scores)
    return ray_trainer.compute_advantage(expanded, adv_estimator="grpo", num_repeat=N)


def make_trainer(*overrides):
    cfg = compose_config([f"actor_rollout_ref.rollout.n={N}", f"data.train_batch_size={len(SUCCESSES)}",
                          "gdro.allocator=uniform", "gdro.allocator_config.n_max=32", "gdro.weighter=gdro",
                          "gdro.classifier_config.edges=[0.3,0.7]", *overrides])
    trainer = GDRORayPPOTrainer.__new__(GDRORayPPOTrainer)  # no workers: only the overridden methods run
    trainer.config, trainer.gdro, trainer._gdro_validating, trainer.global_steps = cfg, controller_from_config(cfg), False, 0
    return trainer


@pytest.fixture
def seen(monkeypatch):
    advantages = []

    def fake_update_actor(self, batch):
        advantages.append(batch.batch["advantages"].clone())
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {}})

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_update_actor", fake_update_actor)
    return advantages


def run_steps(trainer, seen, steps=3):
    """(verl's advantages, the multiplier of each row, the advantages the actor got, metrics) per step."""
    out = []
    for step in range(1, steps + 1):
        trainer.global_steps = step
        gen = trainer._get_gen_batch(prompt_batch([f"toy:train:{k}" for k in range(len(SUCCESSES))], seed=step))
        assert len(gen) == len(SUCCESSES)
        batch = grpo_batch(step)
        verl_adv = batch.batch["advantages"].clone()
        metrics = trainer._update_actor(batch).meta_info["metrics"]
        bins = np.array([trainer.gdro._step_bins[i] for i in vb.prompt_ids(batch)])
        m_R = torch.tensor(trainer.gdro.weighter.multipliers(bins), dtype=verl_adv.dtype)[:, None]
        out.append((verl_adv, m_R, seen[-1], metrics))
    return out


def test_clip_comes_before_the_multipliers(seen):
    steps = run_steps(make_trainer("gdro.adv_clip=5.0"), seen)
    verl_adv, m_R, got, metrics = steps[-1]
    assert verl_adv.abs().max() > 5.2  # verl's GRPO gives |A| = 5.29 here: the clip binds
    assert (m_R != 1).any()  # Prompt-GDRO acts on this step
    torch.testing.assert_close(got, verl_adv.clamp(-5.0, 5.0) * m_R, rtol=0, atol=0)
    assert not torch.equal(got, (verl_adv * m_R).clamp(-5.0, 5.0))  # the other order differs here
    mask = grpo_batch(1).batch["response_mask"].bool()
    assert metrics["gdro/adv_clip_frac"] == pytest.approx(float(((verl_adv.abs() > 5) & mask).sum() / mask.sum()))


def test_no_clip_by_default(seen):
    trainer = make_trainer()
    assert trainer.config.gdro.adv_clip is None
    verl_adv, m_R, got, metrics = run_steps(trainer, seen)[-1]
    torch.testing.assert_close(got, verl_adv * m_R, rtol=0, atol=0)
    assert "gdro/adv_clip_frac" not in metrics


@pytest.mark.parametrize("value", ["0", "-5", "nan", "true", "five"])
def test_bad_clip_fails_before_launch_in_one_line(value):
    cfg = compose_config(["actor_rollout_ref.rollout.n=4", f"gdro.adv_clip={value}"])
    with pytest.raises(VerlPluginError, match="gdro.adv_clip=.* is invalid: use a number > 0") as info:
        check_launch_config(cfg)
    assert "\n" not in str(info.value)
