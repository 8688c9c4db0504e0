"""real_runs.loss against an independent float64 numpy reference written from the formulas.

Values AND gradients (d loss / d logp_bt derived by hand per branch) on random ragged batches,
empty responses included, for every aggregation mode and KL estimator; micro-batches add up to the
mini-batch loss; verl 0.9.1's ``agg_loss`` on hand-computed examples (its own function is compared
in the verl environment: tests/real_runs/verl/test_loss_parity.py); and the edges (defaults, clamps,
clip indicators, dtypes) against values written out by hand.
"""

from __future__ import annotations

import itertools
import math

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


# ----------------------------------------------------------------------------- edges, by hand
# Default arguments, the k3 clamp, the log-ratio clamp with zero advantages, which tokens each clip
# indicator counts (what mutation testing, scripts/mutation.sh, found unpinned); expected values by hand.

def test_defaults_are_the_dual_clip_3_and_the_k3_estimator():
    logp, old = torch.tensor([[0.0, -3.0]]), torch.tensor([[0.0, 0.0]])
    adv = torch.tensor([[-1.0, -1.0]])
    default, _ = L.clipped_surrogate(torch.tensor([[3.0, 0.0]]), old, adv, 0.2, 0.28)
    assert default.tolist() == [[3.0, 1.0]]                         # -A e^3 capped at -A c = 3
    torch.testing.assert_close(L.kl_penalty(logp, old), L.kl_penalty(logp, old, "k3"))


def test_k3_is_clamped_at_10():
    ref = torch.tensor([[3.0, 1.0]])                                # d = 3: e^3 - 4 = 16.09 -> 10
    kl = L.kl_penalty(torch.zeros(1, 2), ref, "k3")
    assert kl[0, 0].item() == 10.0 and kl[0, 1].item() == pytest.approx(math.e - 2.0)


def test_huge_log_ratios_give_finite_losses_and_gradients_even_for_zero_advantages():
    """exp(100) overflows float32; the clamp at 20 keeps -0 x ratio at 0, not NaN."""
    logp = torch.tensor([[100.0, 100.0, -100.0]], requires_grad=True)
    loss, _ = L.clipped_surrogate(logp, torch.zeros(1, 3), torch.tensor([[0.0, 1.0, 1.0]]), 0.2, 0.28)
    assert torch.isfinite(loss).all() and loss[0, 0].item() == 0.0 and loss[0, 1].item() == pytest.approx(-1.28)
    loss.sum().backward()
    assert torch.isfinite(logp.grad).all()


def test_clip_indicators_count_only_tokens_whose_advantage_has_the_matching_sign():
    """A zero advantage (a zero-variance group) is never 'clipped high' or 'clipped low'."""
    logp = torch.log(torch.tensor([[2.0, 2.0, 0.5, 0.5, 4.0]]))
    adv = torch.tensor([[0.0, 1.0, 0.0, -1.0, -1.0]])
    loss, flags = L.clipped_surrogate(logp, torch.zeros(1, 5), adv, 0.2, 0.28)
    assert flags["clip_frac_high"].tolist() == [[0.0, 1.0, 0.0, 0.0, 0.0]]
    assert flags["clip_frac_low"].tolist() == [[0.0, 0.0, 0.0, 1.0, 0.0]]
    assert flags["dual_clip_frac"].tolist() == [[0.0, 0.0, 0.0, 0.0, 1.0]]


def test_policy_loss_reports_every_indicator_under_its_logged_name():
    ones = torch.ones(2, 3)
    _, sums = L.policy_loss(ones * -1.0, ones * -1.2, torch.tensor([1.0, -1.0]), ones, clip_low=0.2, clip_high=0.28,
                            clip_ratio_c=3.0, agg="token-mean", ref_logp_BT=ones * -1.0, kl_coef=0.1,
                            entropy_BT=ones, entropy_coef=0.0)
    assert set(sums) == {"clip_frac", "clip_frac_high", "clip_frac_low", "dual_clip_frac", "kl", "entropy"}


def test_policy_loss_applies_its_arguments_and_defaults():
    """clip_ratio_c reaches the surrogate, the entropy bonus is -c_H H for any c_H > 0, the masked
    entropy sum skips padding, and the defaults are kl_coef 0, k3, entropy_coef 0, token-mean."""
    logp = torch.log(torch.tensor([[4.0, 1.0], [1.0, 1.0]]))
    old, mask = torch.zeros(2, 2), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv, entropy, ref = torch.tensor([-1.0, 0.5]), torch.tensor([[0.5, 1.5], [2.0, 9.0]]), torch.zeros(2, 2)
    common = dict(clip_low=0.2, clip_high=0.28, agg="token-mean")
    capped, sums = L.policy_loss(logp, old, adv, mask, clip_ratio_c=3.0, entropy_BT=entropy, entropy_coef=0.01,
                                 **common)
    free, _ = L.policy_loss(logp, old, adv, mask, clip_ratio_c=None, **common)
    # tokens: (A=-1, rho=4) -> 4 capped at 3; (A=-1, rho=1) -> 1; (A=0.5, rho=1) -> -0.5; padding
    assert capped.item() == pytest.approx((3.0 + 1.0 - 0.5) / 3 - 0.01 * (0.5 + 1.5 + 2.0) / 3)
    assert free.item() == pytest.approx((4.0 + 1.0 - 0.5) / 3)
    assert sums["entropy"].item() == pytest.approx(4.0)
    plain, _ = L.policy_loss(logp, old, adv, mask, clip_ratio_c=3.0, ref_logp_BT=ref, **common)
    assert plain.item() == pytest.approx((3.0 + 1.0 - 0.5) / 3)          # kl_coef defaults to 0
    metric_only, _ = L.policy_loss(logp, old, adv, mask, clip_ratio_c=3.0, entropy_BT=entropy, **common)
    assert metric_only.item() == pytest.approx(plain.item())            # entropy_coef defaults to 0
    with_kl, kl_sums = L.policy_loss(logp, old, adv, mask, clip_ratio_c=3.0, ref_logp_BT=ref, kl_coef=0.1, **common)
    k3 = L.kl_penalty(logp, ref, "k3")
    assert kl_sums["kl"].item() == pytest.approx(float((k3 * mask).sum()))
    assert with_kl.item() == pytest.approx(plain.item() + 0.1 * float((k3 * mask).sum()) / 3)
    assert L.aggregate(entropy, mask).item() == pytest.approx(4.0 / 3)   # token-mean by default


def test_a_ratio_exactly_on_a_clip_boundary_is_not_counted_as_clipped():
    """clip_frac_high / clip_frac_low / dual_clip_frac count ratios strictly beyond their bound
    (verl's strict comparisons): rho = 1 exactly (log-ratio 0) with eps_high = eps_low = 0 and a
    dual cap c = 1 sits on all three boundaries and is counted by none; a hair beyond is."""
    adv = torch.tensor([[1.0, -1.0]])
    zero = torch.zeros(1, 2)
    loss, ind = L.clipped_surrogate(zero, zero, adv, 0.0, 0.0, clip_ratio_c=1.0)
    assert loss.tolist() == [[-1.0, 1.0]]
    assert ind["clip_frac_high"].tolist() == [[0.0, 0.0]] and ind["clip_frac_low"].tolist() == [[0.0, 0.0]]
    assert ind["dual_clip_frac"].tolist() == [[0.0, 0.0]]
    beyond = torch.tensor([[1e-3, -1e-3]])
    _, ind = L.clipped_surrogate(beyond, zero, adv, 0.0, 0.0, clip_ratio_c=1.0)
    assert ind["clip_frac_high"].tolist() == [[1.0, 0.0]] and ind["clip_frac_low"].tolist() == [[0.0, 1.0]]
    _, ind = L.clipped_surrogate(-beyond, zero, adv, 0.0, 0.0, clip_ratio_c=0.99)
    assert ind["dual_clip_frac"].tolist() == [[0.0, 1.0]]              # A < 0, rho = e^1e-3: loss > 0.99


@pytest.mark.parametrize("mode", L.AGG_MODES)
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.int64, torch.float64])
def test_the_loss_keeps_the_log_probs_dtype_whatever_the_mask_and_advantage_dtypes(mode, mask_dtype):
    """float32 log-probs give a float32 loss with a bool / int / float64 mask and float64 advantages
    (numpy's default, as the trainer passes them), equal to the all-float32 loss."""
    values = torch.tensor([[0.5, -1.5, 2.0], [3.0, 0.25, -0.75]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    reference = L.aggregate(values, mask.float(), mode, norm_length=4.0)
    got = L.aggregate(values, mask.to(mask_dtype), mode, norm_length=4.0)
    assert got.dtype == torch.float32 and got.item() == reference.item()
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.125], [0.75, 0.5, 0.5]]))
    old = logp - 0.1
    kwargs = dict(clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0, agg=mode, norm_length=4.0)
    want, _ = L.policy_loss(logp, old, torch.tensor([1.0, -2.0]), mask.float(), **kwargs)
    loss, _ = L.policy_loss(logp, old, torch.tensor([1.0, -2.0], dtype=torch.float64), mask.to(mask_dtype), **kwargs)
    assert loss.dtype == torch.float32 and loss.item() == want.item()
