"""The hf engine's side effects that mutation testing (scripts/mutation.sh) found unpinned."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from real_runs.engines.hf import HFEngine  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import SamplingParams  # noqa: E402


def test_generate_leaves_the_models_generation_config_as_it_was():
    """The engine swaps in a clean GenerationConfig for the call only: the caller's object (saved
    with the model by save_pretrained) is the same object, unchanged, afterwards."""
    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    before = model.generation_config
    snapshot = before.to_dict()
    HFEngine(model, tokenizer).generate(["Say 1"], np.array([2]), SamplingParams(max_new_tokens=2, seed=0))
    assert model.generation_config is before and model.generation_config.to_dict() == snapshot


# ----------------------------------------------------------------------------- mutation testing, second pass

import inspect  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from real_runs.engines.hf import (_warpers, check_sampling, encode_prompt, eos_token_ids,  # noqa: E402
                                  plan_batches)
from real_runs.memory import project  # noqa: E402


class _Tokenizer:
    """A tokenizer stand-in: one id per character, "<s>" (id 1) as BOS when it has one; add_special_tokens
    defaults to True as in transformers."""

    def __init__(self, *, eos: int | None = 5, pad: int | None = None, bos: bool = False) -> None:
        self.eos_token_id, self.pad_token_id = eos, pad
        self.bos_token = "<s>" if bos else None

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        ids = [1] if self.bos_token and add_special_tokens else []
        if self.bos_token and text.startswith("<s>"):
            ids, text = ids + [1], text[3:]
        return {"input_ids": ids + [ord(c) for c in text]}


def test_eos_ids_merge_the_models_and_the_tokenizers_once_each():
    assert eos_token_ids(SimpleNamespace(eos_token_id=7), _Tokenizer(eos=5)) == [7, 5]  # an int
    assert eos_token_ids(SimpleNamespace(eos_token_id=[7, 5]), _Tokenizer(eos=5)) == [7, 5]  # no duplicate
    assert eos_token_ids(SimpleNamespace(eos_token_id=[7]), _Tokenizer(eos=None)) == [7]
    assert eos_token_ids(None, _Tokenizer(eos=5)) == [5]  # no generation config at all
    assert eos_token_ids(SimpleNamespace(), _Tokenizer(eos=5)) == [5]
    with pytest.raises(ValueError, match="define no EOS token"):
        eos_token_ids(SimpleNamespace(eos_token_id=None), _Tokenizer(eos=None))


def test_engine_settings_pad_id_and_default_budget():
    """The pad id is the tokenizer's, else the first EOS; a model without a generation config works; the
    limits accept 1; the default KV budget is the one the memory projection (gdro memory, README) assumes."""
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[7, 9]))
    assert HFEngine(model, _Tokenizer(eos=None, pad=3)).pad_id == 3
    assert HFEngine(model, _Tokenizer(eos=None, pad=None)).pad_id == 7
    bare = HFEngine(SimpleNamespace(), _Tokenizer(eos=5, pad=None), max_batch_tokens=1, max_batch_size=1)
    assert bare.eos_ids == [5] and bare.pad_id == 5 and bare.max_batch_tokens == 1 and bare.max_batch_size == 1
    assert HFEngine(model, _Tokenizer()).max_batch_tokens == inspect.signature(project).parameters["kv_tokens"].default
    with pytest.raises(ValueError, match="max_batch_size must be >= 1 or None, got 0"):
        HFEngine(model, _Tokenizer(), max_batch_size=0)
    with pytest.raises(ValueError, match="top_p"):
        check_sampling(SamplingParams(top_p=1.5))


def test_encode_prompt_adds_a_bos_only_where_the_text_lacks_it():
    bos = _Tokenizer(bos=True)
    assert encode_prompt(bos, "hi") == [1, ord("h"), ord("i")]
    assert encode_prompt(bos, "<s>hi") == [1, ord("h"), ord("i")]  # not two BOS
    assert encode_prompt(_Tokenizer(), "hi") == [ord("h"), ord("i")]


def test_plan_batches_keeps_the_row_order_of_equal_lengths():
    """Ties keep their row order (a stable sort), so which row gets which seeded sample does not depend on
    numpy's sort implementation; each batch is a run of the sorted order."""
    lengths_R = np.array([3, 5] * 50)
    assert [b.tolist() for b in plan_batches(lengths_R, 0, 10**9)] == [list(range(1, 100, 2)) + list(range(0, 100, 2))]
    batches = plan_batches(lengths_R, 1, 24)  # 4 rows of width 6 per batch, then 6 of width 4 (and one mixed)
    assert np.concatenate(batches).tolist() == list(range(1, 100, 2)) + list(range(0, 100, 2))
    assert [b.size for b in batches] == [4] * 13 + [6] * 8


def _apply(warpers, logits: torch.Tensor) -> torch.Tensor:
    ids = torch.zeros((1, 1), dtype=torch.long)
    for warper in warpers:
        logits = warper(ids, logits)
    return logits


def _reference_distribution(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> np.ndarray:
    """softmax(logits / T) restricted to the k most likely tokens, then to the fewest most likely tokens whose
    mass reaches top_p, renormalised (written out with numpy)."""
    z = logits / temperature
    keep = np.ones(z.size, bool)
    if top_k > 0:
        keep[np.argsort(-z)[top_k:]] = False
    p = np.where(keep, np.exp(z - z.max()), 0.0)
    p /= p.sum()
    order = np.argsort(-p)
    before = np.concatenate([[0.0], np.cumsum(p[order])[:-1]])
    keep[order[before >= top_p]] = False
    out = np.where(keep, p, 0.0)
    return out / out.sum()


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (2.0, 0, 1.0), (0.5, 0, 1.0), (1.0, 4, 1.0),
                                                     (2.0, 0, 0.7), (0.7, 6, 0.8), (1.0, 0, 0.5)])
def test_warpers_give_the_tempered_top_k_top_p_distribution(temperature, top_k, top_p):
    logits = np.array([[2.0, -1.0, 0.3, 1.1, -0.4, 0.9, 2.6, -2.0, 0.0, 1.7, -0.8, 0.5]])
    warped = _apply(_warpers(SamplingParams(temperature, top_p, top_k)), torch.tensor(logits, dtype=torch.float64))
    got = torch.softmax(warped, dim=-1).numpy()[0]
    np.testing.assert_allclose(got, _reference_distribution(logits[0], temperature, top_k, top_p), atol=1e-12)
    assert _warpers(SamplingParams(temperature=0.0, top_k=3, top_p=0.5)) == []  # greedy: the argmax only


@pytest.fixture(scope="module")
def tiny_model():
    torch.set_num_threads(1)
    return load_policy("tiny", seed=0)


def test_metrics_count_batches_time_and_rate(tiny_model):
    """engine/batches follows max_batch_size; engine/seconds lies within the call; tokens/s = tokens / seconds."""
    model, tokenizer = tiny_model
    engine = HFEngine(model, tokenizer, max_batch_size=1)
    start = time.perf_counter()
    out = engine.generate(["Say 1", "Say 22"], np.array([2, 1]), SamplingParams(max_new_tokens=2, seed=0))
    wall = time.perf_counter() - start
    metrics = out.metrics
    assert set(metrics) == {"engine/tokens", "engine/seconds", "engine/tokens_per_s", "engine/batches"}
    assert metrics["engine/batches"] == 3 and metrics["engine/tokens"] == sum(len(t) for t in out.token_ids)
    assert 0 < metrics["engine/seconds"] <= wall
    assert metrics["engine/tokens_per_s"] == metrics["engine/tokens"] / metrics["engine/seconds"]
    assert HFEngine(model, tokenizer).generate(["Say 1", "Say 22"], np.array([2, 1]), SamplingParams(
        max_new_tokens=2, seed=0)).metrics["engine/batches"] == 1


def test_unseeded_calls_draw_fresh_samples_from_the_global_rng(tiny_model):
    """seed=None: the call advances torch's global RNG (which the trainer checkpoints), so the next call draws
    other samples; reseeding replays them."""
    model, tokenizer = tiny_model
    engine = HFEngine(model, tokenizer)
    sampling = SamplingParams(max_new_tokens=6)
    torch.manual_seed(5)
    before = torch.get_rng_state()
    first = engine.generate(["Say 1"], np.array([4]), sampling)
    assert not torch.equal(before, torch.get_rng_state())
    second = engine.generate(["Say 1"], np.array([4]), sampling)
    assert first.token_ids != second.token_ids
    torch.manual_seed(5)
    assert engine.generate(["Say 1"], np.array([4]), sampling).token_ids == first.token_ids


def test_texts_leave_out_special_tokens():
    """A response that ends at the special EOS token (<|im_end|>) has that token in token_ids, not in its text:
    the reward and the logged samples see the words only."""
    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    prompt = "Say 1"
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hidden = model.model(torch.tensor([ids])).last_hidden_state[0, -1]
    weight = torch.zeros_like(model.lm_head.weight)
    weight[tokenizer.eos_token_id] = hidden / hidden.norm()  # greedy picks the EOS first
    model.lm_head.weight = torch.nn.Parameter(weight)
    out = HFEngine(model, tokenizer).generate([prompt], np.array([1]), SamplingParams(temperature=0, max_new_tokens=4))
    assert out.token_ids == [[tokenizer.eos_token_id]] and out.finish_reasons == ["stop"]
    assert tokenizer.decode(out.token_ids[0]) == tokenizer.eos_token and out.texts == [""]
