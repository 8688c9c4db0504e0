"""The plugin's batch transformations on real verl DataProto objects (runs in the verl venv only)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage  # noqa: E402

from gdro_lab.controllers.prompt_gdro import PromptGDRO, WeighterConfig  # noqa: E402
from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl import batch as vb  # noqa: E402
from verl_helpers import prompt_batch, with_rewards  # noqa: E402

IDS = ["math500:test:0", "math500:test:7", "dapo:train:3", "dapo:train:9", "aime24:test:1"]


def test_expand_follows_counts_in_row_order():
    data = prompt_batch(IDS)
    counts = np.array([2, 5, 3, 2, 8])
    out = vb.expand(data, counts)
    expected_rows = [row for row, n in enumerate(counts) for _ in range(n)]  # naive loop
    assert out.batch["prompt_row"].tolist() == expected_rows
    assert vb.prompt_ids(out) == [IDS[row] for row in expected_rows]
    assert list(out.non_tensor_batch["uid"]) == [data.non_tensor_batch["uid"][r] for r in expected_rows]


def test_uniform_plan_equals_verls_repeat():
    data = prompt_batch(IDS)
    ours = vb.expand(data, np.full(len(IDS), 4))
    verl = data.repeat(repeat_times=4, interleave=True)
    assert torch.equal(ours.batch["prompt_row"], verl.batch["prompt_row"])
    for key in data.non_tensor_batch:
        assert list(ours.non_tensor_batch[key]) == list(verl.non_tensor_batch[key])


def test_planned_repeat_runs_the_plan_and_refuses_other_calls():
    data = prompt_batch(IDS)
    counts = np.array([2, 6, 4, 2, 6])
    vb.install_planned_repeat(data, counts, n_bar=4)
    out = data.repeat(repeat_times=4, interleave=True)
    assert len(out) == 20 and np.bincount(out.batch["prompt_row"].numpy()).tolist() == counts.tolist()
    with pytest.raises(VerlPluginError, match="repeat\\(4, interleave=True\\)"):
        data.repeat(repeat_times=8, interleave=True)
    with pytest.raises(VerlPluginError):
        data.repeat(repeat_times=4, interleave=False)


@pytest.mark.parametrize("counts, message", [
    ([2, 6, 4, 2, 5], "spends 19 rollouts"),
    ([1, 7, 4, 2, 6], "n_i >= n_min"),
    ([4, 4, 4, 4], "one per prompt"),
    ([4.0, 4.0, 4.0, 4.0, 4.0], "integers"),
])
def test_check_plan_rejects_bad_plans(counts, message):
    with pytest.raises(VerlPluginError, match=message):
        vb.check_plan(np.array(counts), 5, 4, n_min=2)


def test_prompt_ids_need_extra_info_index():
    data = prompt_batch(IDS)
    assert vb.prompt_ids(data) == IDS
    data.non_tensor_batch["extra_info"][2] = {"group": "g"}
    with pytest.raises(VerlPluginError, match="row 2 has no extra_info.index"):
        vb.prompt_ids(data)
    data.non_tensor_batch.pop("extra_info")
    with pytest.raises(VerlPluginError, match="real_runs.verl.convert"):
        vb.prompt_ids(data)


def _shuffled_expansion(counts, seed=1):
    data = vb.expand(prompt_batch(IDS, seed=seed), np.asarray(counts))
    perm = np.random.default_rng(seed).permutation(len(data))
    return data.select_idxs(perm)  # as after verl's _balance_batch


def test_ragged_layout_regroups_a_shuffled_batch():
    counts = [2, 5, 1, 3, 4]
    data = _shuffled_expansion(counts)
    prompt_index, order, counts_P = vb.ragged_layout(data.non_tensor_batch["uid"])
    uids = list(data.non_tensor_batch["uid"])
    first_seen = list(dict.fromkeys(uids))  # naive reference: prompts by first appearance
    assert prompt_index.tolist() == [first_seen.index(u) for u in uids]
    assert counts_P.tolist() == [uids.count(u) for u in first_seen]
    assert [uids[r] for r in order] == [u for u in first_seen for _ in range(uids.count(u))]


def test_feedback_from_batch_keeps_ids_rewards_and_bins():
    counts = [2, 5, 2, 3, 4]
    data = _shuffled_expansion(counts, seed=3)
    rng = np.random.default_rng(0)
    scores = rng.choice([-1.0, 1.0], size=len(data))
    with_rewards(data, scores)
    bins_by_id = {IDS[0]: 3, IDS[1]: 0, IDS[3]: 9}
    feedback, prompt_index = vb.feedback_from_batch(data, bins_by_id)
    ids_R = vb.prompt_ids(data)
    for p, pid in enumerate(feedback.prompt_ids):
        rows = [r for r in range(len(data)) if prompt_index[r] == p]
        assert {ids_R[r] for r in rows} == {pid}
        assert feedback.counts_P[p] == counts[IDS.index(pid)]
        start = int(np.sum(feedback.counts_P[:p]))
        assert sorted(feedback.rewards_R[start:start + len(rows)]) == sorted(scores[rows])
        assert feedback.bins_P[p] == bins_by_id.get(pid, -1)
    assert feedback.successes_R.tolist() == (feedback.rewards_R > 0).tolist()


def test_one_uid_with_two_ids_is_an_error():
    data = vb.expand(prompt_batch(IDS), np.full(5, 2))
    with_rewards(data, np.ones(10))
    data.non_tensor_batch["extra_info"][1] = {"index": "other:0"}
    with pytest.raises(VerlPluginError, match="two different extra_info ids"):
        vb.feedback_from_batch(data, {})


def _grpo_reference(scores_R, uid_R, eps=1e-6):
    """Float64 re-derivation of verl's rule: singleton -> raw score, else (s - mean) / (Bessel std + eps)."""
    out = np.empty(len(scores_R))
    for u in set(uid_R):
        rows = [r for r in range(len(uid_R)) if uid_R[r] == u]
        s = np.asarray(scores_R, float)[rows]
        out[rows] = s if s.size == 1 else (s - s.mean()) / (s.std(ddof=1) + eps)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prompt_gdro_scaling_composes_exactly_with_verls_grpo(seed):
    rng = np.random.default_rng(seed)
    counts = np.array([1, 2, 7, 1, 5])  # ragged, with prompts that end with a single response
    data = _shuffled_expansion(counts, seed=seed)
    scores = rng.choice([-1.0, 1.0], size=len(data)) + (seed == 2) * rng.normal(size=len(data))
    with_rewards(data, scores)
    adv, _ = compute_grpo_outcome_advantage(data.batch["token_level_rewards"], data.batch["response_mask"],
                                            index=data.non_tensor_batch["uid"])
    data.batch["advantages"] = adv
    weighter = PromptGDRO(WeighterConfig(num_bins=3, eta=2.0))
    bins = {IDS[0]: 0, IDS[1]: 1, IDS[2]: 2, IDS[3]: 0}
    feedback, prompt_index = vb.feedback_from_batch(data, bins)
    for _ in range(3):
        weighter.update(feedback)
    m_P = weighter.multipliers(feedback.bins_P)
    assert np.ptp(m_P) > 0.1  # distinct multipliers, so a wrong row->prompt map would show
    scaled = vb.scaled_advantages(data, m_P, prompt_index)
    pid = vb.prompt_ids(data)
    m_row = torch.tensor([m_P[feedback.prompt_ids.index(i)] for i in pid], dtype=torch.float32)
    assert torch.equal(scaled, adv * m_row[:, None])  # bit-exact: verl's output times the multiplier
    reference = _grpo_reference(scores.astype(np.float32), list(data.non_tensor_batch["uid"]))
    mask = data.batch["response_mask"].numpy()
    np.testing.assert_allclose(scaled.numpy(), (reference * m_row.numpy())[:, None] * mask, rtol=2e-5, atol=2e-6)
