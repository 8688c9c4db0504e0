"""The hf engine's early stopping (DUET's marker-gated abort): the answer marker, per-row stops equal to
gdro_lab.allocation.duet.marker_gated_abort's on the same rollouts, seeded keep draws, and off = unchanged."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_lab.allocation.duet import marker_gated_abort  # noqa: E402
from real_runs.engines.hf import HFEngine, _batch_seed, encode_prompt, plan_batches  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.rewards.math import first_boxed_end  # noqa: E402
from real_runs.types import SamplingParams  # noqa: E402

torch.set_num_threads(1)
MAX_NEW = 30


@pytest.mark.parametrize("text,end", [
    ("so \\boxed{1{2}3} and \\boxed{9}", len("so \\boxed{1{2}3}")),   # nested braces; the first of two boxes
    ("\\boxed{a} \\boxed{b}", len("\\boxed{a}")),
    ("x \\fbox{5}.", len("x \\fbox{5}")),
    ("\\boxed{1{2}", -1), ("\\boxed{", -1), ("the answer is 5", -1), ("\\boxed 5 }", -1), ("", -1),
    ("\\boxed{a \\boxed{b}", -1),                # the second box is inside the first, still open
    ("{} \\boxed{x}", len("{} \\boxed{x}")),     # braces before the box do not count
])
def test_the_marker_is_the_first_complete_box(text: str, end: int):
    assert first_boxed_end(text) == end


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny", seed=0)


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def scripted():
    """The tiny Qwen3 made to emit a fixed response per prompt (its forward's last logits replaced: the script's
    next token gets all the mass), so marker and EOS positions are known; generate itself is transformers'."""
    model, tok = load_policy("tiny", seed=0)
    eos, filler = model.generation_config.eos_token_id[0], _ids(tok, " ok") * MAX_NEW
    box = _ids(tok, "\\boxed{5}")
    responses = [_ids(tok, "So \\boxed{1{2}3} is it.") + [eos],                   # marker at 11, EOS at 16
                 _ids(tok, "The answer is \\boxed{42} and then a long tail") + filler,   # marker at 10
                 _ids(tok, "no box here, only words that keep going") + filler,          # a tail
                 _ids(tok, "\\boxed{7 plus some words") + _ids(tok, " x} done") + filler,  # marker too late
                 _ids(tok, "Short.") + [eos],                                       # ends before the check
                 _ids(tok, "Hi \\boxed{x}") + [eos],                                # EOS inside the grace
                 _ids(tok, "z") * (12 - len(box)) + box + filler,                   # marker at the check (12)
                 _ids(tok, "z") * (13 - len(box)) + box + filler]                   # one past it
    prompts = [f"p{i}" for i in range(len(responses))]
    script = {tuple(encode_prompt(tok, p)): r for p, r in zip(prompts, responses)}
    state = {"calls": 0}
    original = model.forward

    def forward(*args, input_ids=None, attention_mask=None, **kwargs):
        out = original(*args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        if input_ids.shape[1] > 1:  # the prefill: which script each row follows
            mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
            state["rows"] = [script[tuple(ids[m.bool()].tolist())] for ids, m in zip(input_ids, mask)]
            state["t"] = 0
        t = state["t"]
        nxt = torch.tensor([row[min(t, len(row) - 1)] for row in state["rows"]])
        logits = torch.full_like(out.logits[:, -1], -1e4)
        logits[torch.arange(nxt.numel()), nxt] = 0.0
        out.logits[:, -1] = logits
        state["t"], state["calls"] = t + 1, state["calls"] + 1
        return out

    model.forward = forward
    return model, tok, prompts, state


def _reference(engine: HFEngine, prompts: list[str], counts_P: np.ndarray, sampling: SamplingParams):
    """The rule's tokens and weights (marker_gated_abort) on the rollouts generated without it: markers from the
    decoded prefixes, keep draws from the engine's documented seeding (per batch of plan_batches)."""
    off = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=sampling.max_new_tokens, seed=sampling.seed,
                                                             temperature=sampling.temperature))
    tok = engine.tokenizer
    marker_R = np.array([next((t for t in range(1, len(ids) + 1)
                               if first_boxed_end(tok.decode(ids[:t], skip_special_tokens=True)) >= 0), -1)
                         for ids in off.token_ids])
    lengths = np.array([len(off.prompt_token_ids[i]) for i in off.prompt_index_R()])
    u_R = np.empty(lengths.size)
    for b, rows in enumerate(plan_batches(lengths, sampling.max_new_tokens, engine.max_batch_tokens)):
        u_R[rows] = np.random.default_rng(_batch_seed(sampling.seed, b)).random(rows.size)
    tokens, weights = marker_gated_abort(marker_R, off.lengths_R, sampling.abort_horizon, sampling.abort_grace, u_R,
                                         sampling.abort_keep_prob)
    return off, marker_R, tokens, weights


def _check(engine, prompts, counts_P, sampling) -> np.ndarray:
    off, marker_R, tokens, weights = _reference(engine, prompts, counts_P, sampling)
    on = engine.generate(prompts, counts_P, sampling)
    np.testing.assert_array_equal(on.lengths_R, tokens)
    np.testing.assert_array_equal(on.weights_R, weights)
    for r in range(tokens.size):   # a stopped row is the unstopped one cut; the others are unchanged, bit for bit
        assert on.token_ids[r] == off.token_ids[r][:tokens[r]]
        assert on.logprobs[r].tobytes() == off.logprobs[r][:tokens[r]].tobytes()
        cut = tokens[r] < off.lengths_R[r]
        expected = ("abort" if weights[r] == 0 else "marker") if cut else off.finish_reasons[r]
        assert on.finish_reasons[r] == expected, r
        assert cut == (on.finish_reasons[r] in ("abort", "marker"))
    assert (marker_R >= 0).any() or not (on.lengths_R < off.lengths_R).all()
    return weights


def test_scripted_stops_equal_marker_gated_abort(scripted):
    """Marker stops (nested box, EOS inside the grace, the marker at the check and one past it), aborts and
    kept tails, over seeds and batches; the pad token is an EOS id here, so the cut must not take it."""
    model, tok, prompts, _ = scripted
    counts_P = np.array([2, 2, 3, 3, 1, 1, 1, 1])
    engine = HFEngine(model, tok, max_batch_tokens=70)  # several batches: each draws its own keeps
    seen = []
    for seed in range(4):
        sampling = SamplingParams(max_new_tokens=MAX_NEW, seed=seed, abort_horizon=8, abort_grace=4,
                                  abort_keep_prob=0.5)
        seen.append(_check(engine, prompts, counts_P, sampling))
    weights = np.concatenate(seen)
    assert {0.0, 1.0, 2.0} <= set(weights.tolist())  # aborted, scored and kept tails all happened
    one = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=MAX_NEW, seed=3, abort_horizon=8,
                                                            abort_grace=4, abort_keep_prob=0.5))
    assert set(one.finish_reasons) >= {"marker", "stop"}
    np.testing.assert_array_equal(one.weights_R, seen[-1])  # the keep draws are reproducible


def test_grace_zero_and_a_horizon_past_every_row(scripted):
    model, tok, prompts, _ = scripted
    engine = HFEngine(model, tok)
    counts_P = np.ones(len(prompts), np.int64)
    _check(engine, prompts, counts_P, SamplingParams(max_new_tokens=MAX_NEW, seed=1, abort_horizon=3, abort_grace=0,
                                                     abort_keep_prob=0.05))
    _check(engine, prompts, counts_P, SamplingParams(max_new_tokens=MAX_NEW, seed=1, abort_horizon=MAX_NEW,
                                                     abort_grace=2))


def test_stopped_rows_stop_generating(scripted):
    """When every row of a batch is stopped, generate returns: one forward pass per generated token."""
    model, tok, prompts, state = scripted
    engine = HFEngine(model, tok)
    before = state["calls"]
    out = engine.generate(prompts[1:3], np.array([1, 2]), SamplingParams(max_new_tokens=MAX_NEW, seed=0,
                                                                          abort_horizon=8, abort_grace=4,
                                                                          abort_keep_prob=0.01))
    assert out.finish_reasons == ["marker", "abort", "abort"] and out.lengths_R.tolist() == [14, 12, 12]
    assert state["calls"] - before == 14 < MAX_NEW


def test_sampled_stops_equal_marker_gated_abort_on_the_random_model(tiny):
    """Real sampling (no marker from a random model): aborts and kept tails at the reference's rows, and the rows
    it lets run are the unstopped generation bit for bit (stopping rows does not move the others' RNG)."""
    model, tok = tiny
    prompts = ["Say 1", "What is 2+2? Put it in \\boxed{}.", "x"]
    engine = HFEngine(model, tok, max_batch_tokens=200)
    weights = _check(engine, prompts, np.array([3, 2, 3]), SamplingParams(max_new_tokens=20, seed=7, abort_horizon=5,
                                                                           abort_grace=2, abort_keep_prob=0.4))
    assert {0.0, 2.5} <= set(weights.tolist())


def test_off_is_the_unchanged_generation(tiny, monkeypatch):
    """abort_horizon = 0 passes no stopping criterion and reports no weights (the code path of before, checked
    bit for bit against the previous commit when written); a rule that can never fire changes nothing."""
    model, tok = tiny
    engine = HFEngine(model, tok, max_batch_tokens=200)
    prompts, counts_P = ["Say 1", "x"], np.array([2, 3])
    calls = []
    original = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(kw) or original(**kw))
    off = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=12, seed=3))
    assert off.weights_R is None and set(off.finish_reasons) <= {"stop", "length"}
    assert calls and all("stopping_criteria" not in kw for kw in calls)
    idle = engine.generate(prompts, counts_P, SamplingParams(max_new_tokens=12, seed=3, abort_horizon=12,
                                                             abort_grace=1))
    assert "stopping_criteria" in calls[-1] and np.all(idle.weights_R == 1.0)
    assert idle.token_ids == off.token_ids and idle.finish_reasons == off.finish_reasons
    assert [a.tobytes() for a in idle.logprobs] == [a.tobytes() for a in off.logprobs]


def test_bad_abort_settings_are_refused(tiny):
    engine = HFEngine(*tiny)
    for bad in (dict(abort_horizon=-1), dict(abort_grace=-2), dict(abort_keep_prob=0.0), dict(abort_keep_prob=1.5)):
        with pytest.raises(ValueError, match="abort_horizon >= 0, abort_grace >= 0 and 0 < abort_keep_prob <= 1"):
            engine.generate(["x"], np.array([1]), SamplingParams(max_new_tokens=2, **bad))


def test_the_vllm_engine_refuses_early_stopping():
    from real_runs.engines.vllm import VLLMEngine
    engine = object.__new__(VLLMEngine)  # no vLLM needed: the refusal comes before any use of it
    with pytest.raises(ValueError, match="supported by the hf engine only"):
        engine.generate(["x"], np.array([1]), SamplingParams(max_new_tokens=4, abort_horizon=2))
