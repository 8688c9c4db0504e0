"""The verl plugin's planned expansion by value, before verl sees the batches: the generation batch and the
prompt batch both expand to the plan's rollouts per prompt, train_batch_size x rollout.n rows in all. With
the plan installed on the generation batch only, verl's own union assert was what caught it (a crash)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")

from real_runs.verl.trainer import GDRORayPPOTrainer, controller_from_config  # noqa: E402
from verl_helpers import compose_config, prompt_batch  # noqa: E402

P, N = 8, 4


def trainer_with_plan(tmp_path, plan_P: np.ndarray) -> GDRORayPPOTrainer:
    cfg = compose_config([f"actor_rollout_ref.rollout.n={N}", f"data.train_batch_size={P}",
                          f"trainer.default_local_dir={tmp_path / 'ckpt'}", "gdro.classifier_config.edges=[0.3,0.7]"])
    trainer = GDRORayPPOTrainer.__new__(GDRORayPPOTrainer)
    trainer.config = cfg
    trainer.gdro = controller_from_config(cfg)
    trainer._gdro_validating = False
    trainer.global_steps = 1
    trainer.gdro.plan = lambda ids: plan_P.copy()   # a ragged plan, whatever the allocator would say
    return trainer


def rollouts_per_id(expanded) -> dict[str, int]:
    return dict(Counter(str(info["index"]) for info in expanded.non_tensor_batch["extra_info"]))


@pytest.mark.parametrize("plan", [[2, 6, 4, 3, 5, 4, 6, 2], [4] * 8])
def test_generation_and_prompt_batches_expand_to_the_plan(tmp_path, plan):
    plan_P = np.array(plan, np.int64)
    ids = [f"toy:train:{k}" for k in range(P)]
    batch = prompt_batch(ids, seed=1)
    gen_batch = GDRORayPPOTrainer._get_gen_batch(trainer_with_plan(tmp_path, plan_P), batch)
    want = dict(zip(ids, plan))
    generated = gen_batch.repeat(repeat_times=N, interleave=True)
    prompts = batch.repeat(repeat_times=N, interleave=True)
    assert len(generated) == len(prompts) == P * N          # train_batch_size x rollout.n, as verl's chunks need
    assert rollouts_per_id(generated) == want
    assert rollouts_per_id(prompts) == want
    np.testing.assert_array_equal(prompts.batch["prompt_row"].numpy(), np.repeat(np.arange(P), plan_P))
