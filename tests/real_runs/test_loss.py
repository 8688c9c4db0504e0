"""real_runs.loss against an independent float64 numpy reference written from the formulas.

Values AND gradients (d loss / d logp_bt derived by hand per branch) on random ragged batches,
empty responses included, for every aggregation mode and KL estimator; micro-batches add up to the
mini-batch loss; verl 0.9.1's ``agg_loss`` on hand-computed examples (its own function is compared
in the verl environment: tests/real_runs/verl/test_loss_parity.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from real_runs import loss as L  # noqa: E402

MODES = L.AGG_MODES
ESTIMATORS = ("k1", "k2", "k3")


def ragged_batch(seed: int, batch: int = 7, width: int = 9, spread: float = 0.6, empty: int = 0):
    """Random responses of 1..width tokens; the first ``empty`` rows have none."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, size=batch)
    lengths[:empty] = 0
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(float)
    old = rng.normal(-2.0, 0.7, size=(batch, width))
    logp = old + rng.normal(0.0, spread, size=(batch, width))   # ratios well outside the clip band
    ref = old + rng.normal(0.0, 0.5, size=(batch, width))
    adv = rng.normal(0.0, 1.5, size=batch)
    return logp, old, ref, adv, mask


def reference(logp, old, ref, adv, mask, mode, estimator, kl_coef, clip_low=0.2, clip_high=0.28, c=3.0,
              norm=None, num_tokens=None, num_seqs=None):
    """Loss value and d loss / d logp in float64, token by token, from Eq. 4-6 and verl's agg_loss."""
    batch, width = logp.shape
    value_BT = np.zeros_like(logp)
    grad_BT = np.zeros_like(logp)
    for b, t in itertools.product(range(batch), range(width)):
        a = adv[b]
        ratio = np.exp(logp[b, t] - old[b, t])
        unclipped = -a * ratio
        clipped = -a * min(max(ratio, 1 - clip_low), 1 + clip_high)
        if clipped > unclipped:
            pg, dpg = clipped, 0.0          # clipped branch is constant in logp
        else:
            pg, dpg = unclipped, -a * ratio
        if a < 0 and pg > -a * c:
            pg, dpg = -a * c, 0.0           # dual clip
        d = ref[b, t] - logp[b, t]
        if estimator == "k1":
            kl, dkl = -d, 1.0
        elif estimator == "k2":
            kl, dkl = 0.5 * d * d, -d
        else:
            kl, dkl = np.exp(d) - d - 1.0, 1.0 - np.exp(d)
        value_BT[b, t] = pg + kl_coef * kl
        grad_BT[b, t] = dpg + kl_coef * dkl
    lengths = mask.sum(1)
    tokens = mask.sum() if num_tokens is None else num_tokens
    seqs = (lengths > 0).sum() if num_seqs is None else num_seqs  # empty responses are not averaged
    weight_BT = {"token-mean": mask / tokens,
                 "seq-mean-token-mean": mask / (lengths[:, None] + 1e-8) / seqs,
                 "seq-mean-token-sum": mask / seqs,
                 "seq-mean-token-sum-norm": mask / seqs / (width if norm is None else norm)}[mode]
    return float((weight_BT * value_BT).sum()), weight_BT * grad_BT


def torch_loss(logp, old, ref, adv, mask, mode, estimator, kl_coef, **kw):
    logp_t = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    value, sums = L.policy_loss(logp_t, torch.tensor(old), torch.tensor(adv), torch.tensor(mask),
                                clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0, agg=mode,
                                ref_logp_BT=torch.tensor(ref), kl_coef=kl_coef, kl_estimator=estimator, **kw)
    value.backward()
    return float(value.detach()), logp_t.grad.numpy(), sums


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_policy_loss_value_and_gradient_match_reference(mode, estimator):
    for seed in range(4):
        logp, old, ref, adv, mask = ragged_batch(seed, empty=seed % 3)
        kl_coef = 0.3  # large so a wrong KL term shows in the comparison
        want_value, want_grad = reference(logp, old, ref, adv, mask, mode, estimator, kl_coef)
        got_value, got_grad, _ = torch_loss(logp, old, ref, adv, mask, mode, estimator, kl_coef)
        assert got_value == pytest.approx(want_value, rel=1e-10, abs=1e-12)
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-9, atol=1e-12)


def test_reference_batches_exercise_every_branch():
    logp, old, ref, adv, mask = ragged_batch(0, batch=40)
    ratio = np.exp(logp - old)
    adv_BT = np.broadcast_to(adv[:, None], ratio.shape)
    real = mask > 0
    assert np.any(real & (ratio > 1.28) & (adv_BT > 0))          # upper clip
    assert np.any(real & (ratio < 0.8) & (adv_BT < 0))           # lower clip
    assert np.any(real & (ratio > 3.0) & (adv_BT < 0))           # dual clip
    assert np.any(real & (ratio > 0.8) & (ratio < 1.28))         # unclipped


@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_add_up_to_the_mini_batch(mode):
    logp, old, ref, adv, mask = ragged_batch(5, batch=10, empty=2)
    full, grad_full, _ = torch_loss(logp, old, ref, adv, mask, mode, "k3", 0.01, norm_length=12.0)
    parts, grads = 0.0, []
    for rows in (slice(0, 3), slice(3, 4), slice(4, 10)):
        width = int(mask[rows].sum(1).max())  # each micro-batch padded to its own longest response
        value, grad, _ = torch_loss(logp[rows, :width], old[rows, :width], ref[rows, :width], adv[rows],
                                    mask[rows, :width], mode, "k3", 0.01, num_tokens=float(mask.sum()),
                                    num_seqs=float((mask.sum(1) > 0).sum()), norm_length=12.0)
        parts += value
        padded = np.zeros((grad.shape[0], logp.shape[1]))
        padded[:, :width] = grad
        grads.append(padded)
    assert parts == pytest.approx(full, rel=1e-12)
    np.testing.assert_allclose(np.concatenate(grads), grad_full, rtol=1e-10, atol=1e-14)


def test_aggregation_matches_verl_0_9_1_on_hand_computed_examples():
    """The issue's two examples and one per mode, worked out by hand from verl's agg_loss."""
    ones = torch.ones(2, 2)
    half = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # the second response is empty
    values = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    # Dr. GRPO: token sums (2, 2) averaged over 2 responses, / loss_scale_factor T = 2 -> 1.0 (not 2.0)
    assert float(L.aggregate(ones, ones, "seq-mean-token-sum-norm")) == 1.0
    # the empty response is left out of the seq-mean: (1 + 1) / 1 -> 2.0 (not 1.0)
    assert float(L.aggregate(ones, half, "seq-mean-token-sum")) == 2.0
    assert float(L.aggregate(values, half, "token-mean")) == 2.0                    # (1 + 3) / 2 tokens
    assert float(L.aggregate(values, half, "seq-mean-token-sum")) == 4.0            # (1 + 3) / 1 response
    assert float(L.aggregate(values, half, "seq-mean-token-sum-norm")) == 2.0       # 4 / 1 / T=2
    assert float(L.aggregate(values, half, "seq-mean-token-sum-norm", norm_length=8.0)) == 0.5
    assert float(L.aggregate(values, half, "seq-mean-token-mean")) == pytest.approx(2.0, rel=1e-7)  # (4 / 2) / 1
    assert float(L.aggregate(values, ones, "seq-mean-token-mean")) == pytest.approx(4.0, rel=1e-7)  # (2 + 6) / 2
    assert float(L.aggregate(values, ones, "seq-mean-token-sum", num_seqs=4.0)) == 4.0  # (4 + 12) / 4 given


def test_clip_indicators_and_kl_sums():
    logp, old, ref, adv, mask = ragged_batch(2, batch=20)
    _, _, sums = torch_loss(logp, old, ref, adv, mask, "token-mean", "k3", 0.001)
    ratio = np.exp(logp - old)
    adv_BT = np.broadcast_to(adv[:, None], ratio.shape)
    assert float(sums["clip_frac_high"]) == ((ratio > 1.28) & (adv_BT > 0) & (mask > 0)).sum()
    assert float(sums["clip_frac_low"]) == ((ratio < 0.8) & (adv_BT < 0) & (mask > 0)).sum()
    clipped = -adv_BT * np.clip(ratio, 0.8, 1.28) > -adv_BT * ratio
    assert float(sums["clip_frac"]) == (clipped & (mask > 0)).sum()
    d = ref - logp
    assert float(sums["kl"]) == pytest.approx(((np.exp(d) - d - 1) * mask).sum(), rel=1e-10)


def test_ratio_one_gives_minus_mean_advantage_and_policy_gradient():
    """On-policy (rho = 1): loss = -mean A over tokens, gradient = -A m / N (REINFORCE with baseline)."""
    _, old, _, adv, mask = ragged_batch(3)
    value, grad, sums = torch_loss(old.copy(), old, old, adv, mask, "token-mean", "k1", 0.0)
    assert value == pytest.approx(-(adv[:, None] * mask).sum() / mask.sum(), rel=1e-12)
    np.testing.assert_allclose(grad, -adv[:, None] * mask / mask.sum(), rtol=1e-12, atol=1e-15)
    assert float(sums["clip_frac"]) == 0.0


def test_token_logprobs_and_entropy_against_numpy():
    rng = np.random.default_rng(7)
    logits = rng.normal(0, 2, size=(3, 5, 11))
    tokens = rng.integers(0, 11, size=(3, 5))
    logits_t = torch.tensor(logits, requires_grad=True)
    logp = L.token_logprobs(logits_t, torch.tensor(tokens))
    shifted = logits - logits.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    want = np.take_along_axis(log_softmax, tokens[..., None], -1)[..., 0]
    np.testing.assert_allclose(logp.detach().numpy(), want, rtol=1e-6, atol=1e-6)
    logp.sum().backward()   # d log p_y / d logits = onehot(y) - softmax
    onehot = np.eye(11)[tokens]
    np.testing.assert_allclose(logits_t.grad.numpy(), onehot - np.exp(log_softmax), atol=1e-6)
    entropy = L.token_entropy(torch.tensor(logits)).numpy()
    np.testing.assert_allclose(entropy, -(np.exp(log_softmax) * log_softmax).sum(-1), rtol=1e-6)


def test_bad_names_raise():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="KL estimator"):
        L.kl_penalty(x, x, "k4")
    with pytest.raises(ValueError, match="aggregation"):
        L.aggregate(x, torch.ones(2, 3), "sum")
