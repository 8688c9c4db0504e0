"""real_runs.loss.aggregate against verl 0.9.1's own ``agg_loss``, and the plugin's loss-mode check
against verl's own policy losses (issue 21.2 and 20.3).

Random ragged batches with empty responses, every aggregation mode, with and without verl's global
denominators (``batch_num_tokens``, ``global_batch_size``, ``loss_scale_factor`` at dp_size 1):
values and gradients must agree. Every registered verl policy loss is run on a random batch: those
the plugin accepts (``LINEAR_LOSS_MODES``) must weight each prompt by its multiplier when the
advantages are scaled, and the ones it rejects must not.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl_helpers import compose_config  # noqa: E402

from real_runs import loss as L  # noqa: E402
from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl.runner import check_launch_config  # noqa: E402
from real_runs.verl.trainer import LINEAR_LOSS_MODES  # noqa: E402


def ragged(seed: int, batch: int = 9, width: int = 7):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, width + 1, size=batch)
    lengths[rng.integers(batch)] = 0  # at least one empty response
    lengths[rng.integers(batch)] = width
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.float32)
    values = rng.normal(0.0, 1.0, size=(batch, width)).astype(np.float32)
    values[mask == 0] = rng.choice([0.0, 7.0, np.nan], size=int((mask == 0).sum()))  # padding garbage
    return values, mask


def _value_and_grad(fn, values, mask, **kw):
    x = torch.tensor(np.nan_to_num(values, nan=0.0), dtype=torch.float64, requires_grad=True)
    loss = fn(x, torch.tensor(mask, dtype=torch.float64), **kw)
    loss.backward()
    return float(loss.detach()), x.grad.numpy()


@pytest.mark.parametrize("mode", L.AGG_MODES)
def test_aggregate_equals_verls_agg_loss(mode):
    for seed in range(12):
        values, mask = ragged(seed)
        ours = _value_and_grad(lambda x, m: L.aggregate(x, m, mode), values, mask)
        theirs = _value_and_grad(lambda x, m: core_algos.agg_loss(x, m, mode), values, mask)
        assert ours[0] == pytest.approx(theirs[0], rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("mode", L.AGG_MODES)
def test_global_denominators_and_micro_batches_equal_verls(mode):
    """verl's micro-batch losses with the mini-batch's global counts, and ours, add up alike."""
    values, mask = ragged(99, batch=12)
    tokens, seqs, scale = float(mask.sum()), float((mask.sum(1) > 0).sum()), 16.0
    total_ours = total_theirs = 0.0
    for rows in (slice(0, 5), slice(5, 6), slice(6, 12)):
        ours = _value_and_grad(lambda x, m: L.aggregate(x, m, mode, num_tokens=tokens, num_seqs=seqs,
                                                        norm_length=scale), values[rows], mask[rows])
        theirs = _value_and_grad(lambda x, m: core_algos.agg_loss(x, m, mode, dp_size=1, batch_num_tokens=tokens,
                                                                  global_batch_size=seqs, loss_scale_factor=scale),
                                 values[rows], mask[rows])
        assert ours[0] == pytest.approx(theirs[0], rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-15)
        total_ours, total_theirs = total_ours + ours[0], total_theirs + theirs[0]
    whole = _value_and_grad(lambda x, m: L.aggregate(x, m, mode, norm_length=scale), values, mask)
    assert total_ours == pytest.approx(whole[0], rel=1e-12) and total_theirs == pytest.approx(whole[0], rel=1e-12)


def _actor_config():
    from verl.utils.config import omega_conf_to_dataclass

    cfg = compose_config(["actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                          "actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.3",
                          "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.3",
                          "+actor_rollout_ref.actor.policy_loss.dro_beta=0.5"])
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


def _policy_loss(mode, config, old, logp, advantages, mask):
    fn = core_algos.get_policy_loss_fn(mode)
    loss, _ = fn(old_log_prob=old, log_prob=logp, advantages=advantages, response_mask=mask,
                 loss_agg_mode="seq-mean-token-sum", config=config)
    return float(loss)


def _weights_prompts(mode, config) -> bool:
    """loss(A * m_row) == (1 / B) sum_b m_b loss(row b alone), for random rows and multipliers m_b > 0."""
    rng = np.random.default_rng(3)
    batch, width = 8, 6
    mask = torch.ones(batch, width)
    mask[2, 3:] = 0
    old = torch.tensor(rng.normal(-1.5, 0.5, (batch, width)), dtype=torch.float32)
    logp = old + torch.tensor(rng.normal(0.0, 0.4, (batch, width)), dtype=torch.float32)
    advantages = torch.tensor(rng.normal(0.0, 1.0, batch), dtype=torch.float32)[:, None].expand(batch, width)
    m = torch.tensor(rng.uniform(0.3, 4.0, batch), dtype=torch.float32)[:, None]
    scaled = _policy_loss(mode, config, old, logp, advantages * m, mask)
    rows = [_policy_loss(mode, config, old[b:b + 1], logp[b:b + 1], advantages[b:b + 1], mask[b:b + 1])
            for b in range(batch)]
    return abs(scaled - float(np.mean(np.asarray(rows) * m[:, 0].numpy()))) <= 1e-5 * (1 + abs(scaled))


def test_accepted_loss_modes_are_exactly_those_that_weight_prompts():
    config = _actor_config()
    weighted, unweighted = [], []
    for mode in sorted(core_algos.POLICY_LOSS_REGISTRY):
        try:
            ok = _weights_prompts(mode, config)
        except Exception:  # a loss that cannot run on its own is not accepted either
            ok = False
        (weighted if ok else unweighted).append(mode)
    assert set(weighted) == set(LINEAR_LOSS_MODES), f"weighting prompts: {weighted}; rejected: {unweighted}"
    assert {"clip_cov", "kl_cov", "dro"} <= set(unweighted)


@pytest.mark.parametrize("mode", ["clip_cov", "kl_cov", "dro", "my_custom_loss"])
def test_rejected_loss_modes_fail_before_launch_in_one_line(mode):
    cfg = compose_config(["actor_rollout_ref.rollout.n=4", f"actor_rollout_ref.actor.policy_loss.loss_mode={mode}"])
    with pytest.raises(VerlPluginError, match=f"loss_mode={mode} is not linear in the advantage") as info:
        check_launch_config(cfg)
    assert "\n" not in str(info.value)
    check_launch_config(compose_config(["actor_rollout_ref.rollout.n=4", "gdro.weighter=uniform",
                                        f"actor_rollout_ref.actor.policy_loss.loss_mode={mode}"]))
