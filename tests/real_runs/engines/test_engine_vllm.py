"""The vllm engine's request building and output unpacking against vLLM's real classes.

Runs in the vLLM-on-CPU environment (.ci/setup-vllm: vllm-cpu, the GPU train lock's vLLM release);
skipped with a reason where vLLM does not import. The engine generating for real:
test_engine_vllm_cpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
vllm = pytest.importorskip("vllm", reason="vllm not installed (optional extra [vllm], own venv)")

from vllm.logprobs import Logprob  # noqa: E402
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402

from real_runs.engines.vllm import build_requests, prompt_seeds, unpack_outputs  # noqa: E402
from real_runs.types import SamplingParams  # noqa: E402

PROMPTS = [[1, 2, 3], [4, 5], [6], [7, 8, 9, 10]]


def test_build_requests_one_per_nonzero_prompt_with_its_count():
    counts_P = np.array([2, 0, 3, 1])
    sampling = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, max_new_tokens=64, seed=7)
    prompts, params = build_requests(PROMPTS, counts_P, sampling, stop_token_ids=[11, 12])
    assert [p["prompt_token_ids"] for p in prompts] == [PROMPTS[0], PROMPTS[2], PROMPTS[3]]
    assert all(isinstance(p, vllm.SamplingParams) for p in params)
    assert [p.n for p in params] == [2, 3, 1]
    for p in params:
        assert p.logprobs == 0 and p.max_tokens == 64 and p.stop_token_ids == [11, 12]
        assert (p.temperature, p.top_p, p.top_k) == (0.6, 0.95, 20)
        assert p.skip_special_tokens
    seeds = [p.seed for p in params]
    assert seeds == [s for s, c in zip(prompt_seeds(7, 4), counts_P) if c]
    assert len(set(seeds)) == 3
    _, again = build_requests(PROMPTS, counts_P, sampling, stop_token_ids=[11, 12])
    assert [p.seed for p in again] == seeds


def test_build_requests_give_every_rollout_its_own_seed_under_vllms_child_rule():
    """vLLM samples child k of a seeded request with seed + k: over a ragged plan, no two rollouts
    of the call share a seed (so a group's rollouts differ); an oversized group is refused."""
    from real_runs.engines.vllm import SEED_STRIDE, rollout_seeds
    counts_P = np.array([12, 2, 0, 7])
    _, params = build_requests(PROMPTS, counts_P, SamplingParams(temperature=1.0, max_new_tokens=4, seed=3), [0])
    children = [p.seed + k for p in params for k in range(p.n)]
    assert len(children) == counts_P.sum() and len(set(children)) == len(children)
    assert children == [s for group in rollout_seeds(3, counts_P) for s in group]
    with pytest.raises(ValueError, match="samples per prompt"):
        build_requests(PROMPTS, np.array([SEED_STRIDE + 1, 1, 1, 1]), SamplingParams(seed=3), [0])


def test_build_requests_greedy_and_unseeded_are_valid_vllm_params():
    _, params = build_requests(PROMPTS, np.ones(4, int),
                               SamplingParams(temperature=0, max_new_tokens=5), [0])
    assert all(p.seed is None and p.temperature == 0 and p.top_k in (0, -1) for p in params)
    assert params[0].sampling_type == vllm.sampling_params.SamplingType.GREEDY
    prompts, params = build_requests(PROMPTS, np.zeros(4, int), SamplingParams(), [0])
    assert prompts == [] and params == []


def completion(index: int, tokens: list[int], reason: str = "stop", offset: float = 0.0,
               with_logprobs: bool = True) -> CompletionOutput:
    """A completion whose step-t log-prob dict holds the sampled token and a decoy token 0."""
    steps = [{t: Logprob(logprob=-0.1 * (s + 1) - offset, rank=1), 0: Logprob(logprob=-9.0, rank=5)}
             for s, t in enumerate(tokens)] if with_logprobs else None
    return CompletionOutput(index=index, text=f"c{index}:" + ",".join(map(str, tokens)),
                            token_ids=tokens, cumulative_logprob=None, logprobs=steps,
                            finish_reason=reason)


def request(i: int, completions: list[CompletionOutput]) -> RequestOutput:
    return RequestOutput(request_id=str(i), prompt=None, prompt_token_ids=PROMPTS[i],
                         prompt_logprobs=None, outputs=completions, finished=True)


def test_unpack_outputs_flat_in_prompt_order_with_sampled_logprobs():
    counts_P = np.array([2, 0, 3, 1])
    outputs = [request(0, [completion(1, [5, 6], "length", 1.0), completion(0, [3], "stop", 0.0)]),
               request(2, [completion(2, [9, 9, 9]), completion(0, [7]), completion(1, [8, 8])]),
               request(3, [completion(0, [4, 4, 4, 4], "length")])]
    out = unpack_outputs(outputs, counts_P, [list(p) for p in PROMPTS])
    assert np.array_equal(out.prompt_index_R(), [0, 0, 2, 2, 2, 3])
    assert out.token_ids == [[3], [5, 6], [7], [8, 8], [9, 9, 9], [4, 4, 4, 4]]
    assert out.texts[1] == "c1:5,6" and out.finish_reasons == ["stop", "length", "stop", "stop",
                                                                "stop", "length"]
    np.testing.assert_allclose(out.logprobs[1], [-1.1, -1.2], rtol=1e-6)
    np.testing.assert_allclose(out.logprobs[5], [-0.1, -0.2, -0.3, -0.4], rtol=1e-6)
    assert all(lp.dtype == np.float32 for lp in out.logprobs)
    assert out.metrics["engine/tokens"] == 13 and out.prompt_token_ids[1] == PROMPTS[1]


@pytest.mark.parametrize("case,match", [
    ("count", "returned 1 samples, expected 2"),
    ("requests", "returned 1 requests, expected 2"),
    ("abort", "finish reason 'abort'"),
    ("nologprobs", "no log-probs"),
])
def test_unpack_outputs_rejects_inconsistent_outputs(case, match):
    counts_P = np.array([2, 1, 0, 0])
    good_second = request(1, [completion(0, [1])])
    first = [completion(0, [1]), completion(1, [2])]
    if case == "count":
        outputs = [request(0, first[:1]), good_second]
    elif case == "requests":
        outputs = [request(0, first)]
    elif case == "abort":
        outputs = [request(0, [first[0], completion(1, [2], "abort")]), good_second]
    else:
        outputs = [request(0, [first[0], completion(1, [2], with_logprobs=False)]), good_second]
    with pytest.raises(ValueError, match=match):
        unpack_outputs(outputs, counts_P, [list(p) for p in PROMPTS])


def test_round_trip_through_a_fake_llm_keeps_exact_counts():
    """build_requests -> an LLM stand-in honouring n -> unpack_outputs: exact ragged counts."""
    rng = np.random.default_rng(0)
    counts_P = rng.integers(0, 6, size=4)
    prompts, params = build_requests(PROMPTS, counts_P, SamplingParams(seed=1), [0])
    outputs = [request(int(np.flatnonzero(counts_P)[j]),
                       [completion(k, [int(p["prompt_token_ids"][0]), k]) for k in range(sp.n)])
               for j, (p, sp) in enumerate(zip(prompts, params))]
    out = unpack_outputs(outputs, counts_P, [list(p) for p in PROMPTS])
    assert np.array_equal(out.prompt_index_R(), np.repeat(np.arange(4), counts_P))
    for r, i in enumerate(out.prompt_index_R()):
        assert out.token_ids[r][0] == PROMPTS[i][0]


@pytest.mark.gpu
def test_vllm_engine_on_gpu_counts_logprobs_weights_and_sleep():
    """Written for a GPU machine with the [vllm] extra; NOT run on the development machines."""
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from real_runs.engines import make_engine
    from real_runs.models import build_qwen3, load_policy
    model, tok = load_policy("tiny", seed=0)
    engine = make_engine("vllm", model, tok, gpu_memory_utilization=0.2, enforce_eager=True)
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                       add_generation_prompt=True) for q in ("1+1?", "x", "2*3?")]
    counts_P = np.array([3, 0, 2])
    out = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=16, seed=0))
    assert np.array_equal(out.prompt_index_R(), [0, 0, 0, 2, 2])
    for r, i in enumerate(out.prompt_index_R()):
        ids = torch.tensor([out.prompt_token_ids[i] + out.token_ids[r]])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0].double(), -1)
        start = len(out.prompt_token_ids[i]) - 1
        ref = logp[start:-1].gather(1, torch.tensor(out.token_ids[r])[:, None])[:, 0].numpy()
        np.testing.assert_allclose(out.logprobs[r], ref, atol=5e-2)
    again = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=16, seed=0))
    assert again.token_ids == out.token_ids
    greedy = SamplingParams(temperature=0, max_new_tokens=8)
    before = engine.generate(prompts, np.ones(3, int), greedy).token_ids
    engine.load_weights(build_qwen3(tok, seed=5).state_dict())
    assert engine.generate(prompts, np.ones(3, int), greedy).token_ids != before
    engine.sleep()
    engine.wake_up()
    engine.load_weights(model.state_dict())
    assert engine.generate(prompts, np.ones(3, int), greedy).token_ids == before
