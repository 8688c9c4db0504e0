"""The hf engine on the tiny Qwen3: exact ragged counts, raw log-probs, seeds, EOS, weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from real_runs.engines import make_engine  # noqa: E402
from real_runs.engines.hf import HFEngine, plan_batches  # noqa: E402
from real_runs.models import build_qwen3, load_policy  # noqa: E402
from real_runs.types import Engine, SamplingParams  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny", seed=0)


def chat(tok, text: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                   add_generation_prompt=True)


@pytest.fixture(scope="module")
def prompts(tiny):
    _, tok = tiny
    questions = ["1+1?", "What is \\frac{3}{4} of 12? Explain every step of the computation.",
                 "x", "Find the area of a circle of radius 2.", "Let n = 7. Is n prime?"]
    return [chat(tok, q) for q in questions]


def naive_greedy(model, prompt_ids: list[int], steps: int) -> list[int]:
    """Greedy decoding by full forward passes, no cache, no padding (independent of generate)."""
    ids = list(prompt_ids)
    for _ in range(steps):
        with torch.no_grad():
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt_ids):]


def teacher_forced(model, prompt_ids: list[int], response: list[int]) -> np.ndarray:
    """log p(response_t | prompt, response_<t) from one unpadded forward pass, float64 softmax."""
    ids = torch.tensor([list(prompt_ids) + list(response)])
    with torch.no_grad():
        logits = model(ids).logits[0].double()
    logp = torch.log_softmax(logits[len(prompt_ids) - 1:-1], dim=-1)
    return logp.gather(1, torch.tensor(response)[:, None])[:, 0].numpy()


def test_engine_satisfies_protocol_and_factory(tiny):
    model, tok = tiny
    engine = make_engine("hf", model, tok)
    assert isinstance(engine, HFEngine) and isinstance(engine, Engine)
    with pytest.raises(ValueError, match="unknown engine"):
        make_engine("tgi", model, tok)


def test_vllm_engine_without_vllm_is_an_import_error_naming_it(tiny):
    import importlib.util
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError) as err:
        make_engine("vllm", *tiny)
    assert err.value.name == "vllm"


def test_exact_ragged_counts_in_prompt_order(tiny, prompts):
    """Greedy samples of prompt i equal prompt i's own naive greedy decode, at i's slots."""
    model, tok = tiny
    counts_P = np.array([3, 0, 1, 2, 1])
    engine = HFEngine(model, tok, max_batch_tokens=90)  # forces several mixed-length batches
    out = engine.generate(prompts, counts_P, SamplingParams(temperature=0, max_new_tokens=6))
    assert out.metrics["engine/batches"] > 1
    assert np.array_equal(out.counts_P, counts_P) and len(out.token_ids) == counts_P.sum()
    assert np.array_equal(out.prompt_index_R(), np.repeat(np.arange(5), counts_P))
    for i, prompt in enumerate(prompts):
        assert out.prompt_token_ids[i] == tok(prompt, add_special_tokens=False)["input_ids"]
    for r, i in enumerate(out.prompt_index_R()):
        assert out.token_ids[r] == naive_greedy(model, out.prompt_token_ids[i], 6)
        assert out.texts[r] == tok.decode(out.token_ids[r], skip_special_tokens=True)
    assert out.metrics["engine/tokens"] == out.lengths_R.sum() == 6 * counts_P.sum()


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 20, 0.9)])
def test_logprobs_equal_teacher_forced_forward(tiny, prompts, temperature, top_k, top_p):
    """Raw-distribution log-probs, whatever the warpers, despite left padding and the KV cache."""
    model, tok = tiny
    counts_P = np.array([2, 3, 1, 2, 2])
    out = HFEngine(model, tok).generate(
        prompts, counts_P, SamplingParams(temperature, top_p, top_k, max_new_tokens=12, seed=5))
    assert out.metrics["engine/batches"] == 1  # one batch: every short prompt is left-padded
    for r, i in enumerate(out.prompt_index_R()):
        assert out.logprobs[r].dtype == np.float32
        assert out.logprobs[r].shape == (len(out.token_ids[r]),)
        assert len(out.token_ids[r]) == 12 or out.finish_reasons[r] == "stop"
        reference = teacher_forced(model, out.prompt_token_ids[i], out.token_ids[r])
        np.testing.assert_allclose(out.logprobs[r], reference, rtol=0, atol=1e-4)


def test_top_k_and_greedy_are_applied(tiny, prompts):
    model, tok = tiny
    engine = HFEngine(model, tok)
    out = engine.generate(prompts, np.full(5, 2), SamplingParams(top_k=3, max_new_tokens=8, seed=0))
    for r, i in enumerate(out.prompt_index_R()):
        ids = torch.tensor([out.prompt_token_ids[i] + out.token_ids[r]])
        with torch.no_grad():
            logits = model(ids).logits[0, len(out.prompt_token_ids[i]) - 1:-1]
        top3 = logits.topk(3, dim=-1).indices
        assert all(t in top3[s] for s, t in enumerate(out.token_ids[r]))
    one = engine.generate(prompts, np.ones(5, int), SamplingParams(top_k=1, max_new_tokens=5, seed=1))
    greedy = engine.generate(prompts, np.ones(5, int), SamplingParams(temperature=0, max_new_tokens=5))
    assert one.token_ids == greedy.token_ids


def test_seed_reproducible_and_caller_rng_untouched(tiny, prompts):
    model, tok = tiny
    engine = HFEngine(model, tok, max_batch_tokens=120)
    counts_P = np.array([2, 1, 3, 0, 2])
    sampling = SamplingParams(max_new_tokens=10, seed=11)
    state = torch.get_rng_state()
    first = engine.generate(prompts, counts_P, sampling)
    assert torch.equal(state, torch.get_rng_state())
    second = engine.generate(prompts, counts_P, sampling)
    other = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=10, seed=12))
    assert first.token_ids == second.token_ids and first.texts == second.texts
    for a, b in zip(first.logprobs, second.logprobs):
        assert np.array_equal(a, b)
    assert first.token_ids != other.token_ids
    # samples of one prompt differ from each other (rows are independent draws)
    assert first.token_ids[0] != first.token_ids[1]
    # seed=None draws from the global torch RNG, so torch.manual_seed reproduces it
    torch.manual_seed(3)
    a = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=10))
    torch.manual_seed(3)
    b = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=10))
    assert a.token_ids == b.token_ids


def test_stops_at_eos_with_ragged_lengths(prompts):
    """With 100 of 1024 ids declared EOS, rows stop early: cut at the first EOS, 'stop'."""
    model, tok = load_policy("tiny", seed=0)
    eos_ids = list(range(300, 400))
    model.generation_config.eos_token_id = eos_ids
    engine = HFEngine(model, tok, max_batch_tokens=400)
    max_new = 16
    out = engine.generate(prompts, np.full(5, 4), SamplingParams(max_new_tokens=max_new, seed=2))
    reasons = set(out.finish_reasons)
    assert reasons == {"stop", "length"}, reasons
    for r, i in enumerate(out.prompt_index_R()):
        toks, reason = out.token_ids[r], out.finish_reasons[r]
        is_eos = [t in eos_ids for t in toks]
        if reason == "stop":
            assert is_eos[-1] and not any(is_eos[:-1])
        else:
            assert len(toks) == max_new and not any(is_eos)
        assert len(out.logprobs[r]) == len(toks)
        np.testing.assert_allclose(out.logprobs[r], teacher_forced(model, out.prompt_token_ids[i], toks),
                                   atol=1e-4)
    assert out.metrics["engine/tokens"] == out.lengths_R.sum() < 20 * max_new


def test_zero_samples_and_bad_inputs(tiny, prompts):
    model, tok = tiny
    engine = HFEngine(model, tok)
    empty = engine.generate(prompts[:2], np.zeros(2, int), SamplingParams(max_new_tokens=4))
    assert empty.token_ids == [] and empty.prompt_token_ids[1]
    with pytest.raises(ValueError, match="one count per prompt"):
        engine.generate(prompts, np.ones(3, int), SamplingParams())
    with pytest.raises(ValueError, match="non-negative integers"):
        engine.generate(prompts[:2], np.array([1, -1]), SamplingParams())
    with pytest.raises(ValueError, match="non-negative integers"):
        engine.generate(prompts[:2], np.array([1.5, 1]), SamplingParams())
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.generate(prompts[:1], np.ones(1, int), SamplingParams(max_new_tokens=0))
    with pytest.raises(ValueError, match="top_p"):
        engine.generate(prompts[:1], np.ones(1, int), SamplingParams(top_p=0.0))
    with pytest.raises(ValueError, match="empty prompt"):
        engine.generate([""], np.ones(1, int), SamplingParams())
    with pytest.raises(ValueError, match="max_batch_tokens"):
        HFEngine(model, tok, max_batch_tokens=0)


def test_training_mode_restored(prompts):
    model, tok = load_policy("tiny")
    model.train()
    HFEngine(model, tok).generate(prompts[:1], np.ones(1, int), SamplingParams(max_new_tokens=2))
    assert model.training


def test_load_weights_copies_into_a_separate_module_and_is_a_noop_when_shared(tiny, prompts):
    trained, tok = tiny
    stale = build_qwen3(tok, seed=99)
    engine = HFEngine(stale, tok)
    sampling = SamplingParams(temperature=0, max_new_tokens=5)
    reference = HFEngine(trained, tok).generate(prompts, np.ones(5, int), sampling)
    assert engine.generate(prompts, np.ones(5, int), sampling).token_ids != reference.token_ids
    engine.load_weights(trained.state_dict())
    assert engine.generate(prompts, np.ones(5, int), sampling).token_ids == reference.token_ids
    shared = HFEngine(trained, tok)
    before = {k: v.clone() for k, v in trained.state_dict().items()}
    shared.load_weights(trained.state_dict())  # same storage: nothing copied, nothing changed
    assert all(torch.equal(before[k], v) for k, v in trained.state_dict().items())
    with pytest.raises(ValueError, match="unknown parameter"):
        engine.load_weights({"no.such.weight": torch.zeros(1)})


def test_plan_batches_covers_rows_once_within_budget():
    rng = np.random.default_rng(0)
    lengths_R = rng.integers(1, 50, size=200)
    batches = plan_batches(lengths_R, max_new_tokens=30, max_batch_tokens=500, max_batch_size=7)
    rows = np.concatenate(batches)
    assert np.array_equal(np.sort(rows), np.arange(200))
    assert np.all(np.diff(lengths_R[rows]) <= 0)  # longest first
    for batch in batches:
        assert len(batch) <= 7
        assert len(batch) == 1 or len(batch) * (lengths_R[batch].max() + 30) <= 500
    assert [b.tolist() for b in plan_batches(np.array([5, 9]), 100, 10)] == [[1], [0]]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_on_gpu_counts_and_logprobs_close():
    model, tok = load_policy("tiny", device="cuda")
    prompts = [chat(tok, q) for q in ("1+1?", "A longer question about circles and areas?")]
    out = HFEngine(model, tok).generate(prompts, np.array([3, 2]),
                                        SamplingParams(max_new_tokens=16, seed=0))
    assert len(out.token_ids) == 5
    cpu = model.float().cpu()
    for r, i in enumerate(out.prompt_index_R()):
        reference = teacher_forced(cpu, out.prompt_token_ids[i], out.token_ids[r])
        np.testing.assert_allclose(out.logprobs[r], reference, atol=5e-2)
