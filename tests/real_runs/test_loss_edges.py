"""real_runs.loss edges that mutation testing (scripts/mutation.sh) found unpinned: default
arguments, the k3 clamp, the log-ratio clamp with zero advantages, and which tokens each clip
indicator counts. Expected values are written out by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from real_runs import loss as L  # noqa: E402


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
