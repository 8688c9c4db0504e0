"""The vllm engine's bookkeeping by value, with a stand-in for ``vllm.LLM`` (runs in the main environment,
where vLLM is not installed): a generation records its seconds and tokens per second (the tokens by hand
over a clock that moves by a known amount), and an engine woken up is awake (a later ``sleep`` frees the
GPU again, a later generation does not wake vLLM twice). Both were sampled mutants that survived, since the
engine's own tests run only in the vLLM environment."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from real_runs.engines import vllm as vllm_engine
from real_runs.types import SamplingParams


def _completion(index: int, token_ids: list[int]) -> Any:
    return SimpleNamespace(index=index, token_ids=token_ids, text="x" * len(token_ids), finish_reason="stop",
                           logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in token_ids])


class FakeLLM:
    """``vllm.LLM`` as the engine calls it: ``generate`` returns one output per request; ``sleep`` / ``wake_up``
    counted."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.calls = clock, {"sleep": 0, "wake_up": 0}

    def generate(self, requests: list[Any], params: list[Any], use_tqdm: bool = False) -> list[Any]:
        self.clock[0] += 2.0                                   # the generation takes 2 s on the engine's clock
        return [SimpleNamespace(outputs=[_completion(0, [5, 6, 7]), _completion(1, [8])]),
                SimpleNamespace(outputs=[_completion(0, [9, 10, 11, 12])])]

    def sleep(self, level: int) -> None:
        self.calls["sleep"] += 1

    def wake_up(self) -> None:
        self.calls["wake_up"] += 1


class FakeTokenizer:
    bos_token = None

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Any:
    clock = [100.0]
    monkeypatch.setattr(vllm_engine, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(vllm_engine, "build_requests",           # the only part that needs vLLM's own classes
                        lambda ids, counts, sampling, stop: ([{"prompt_token_ids": p} for p in ids], [None] * len(ids)))
    made = vllm_engine.VLLMEngine.__new__(vllm_engine.VLLMEngine)   # no vllm.LLM built
    made.llm, made.tokenizer, made.stop_token_ids = FakeLLM(clock), FakeTokenizer(), [0]
    made.enable_sleep_mode, made.sleep_level, made.sleeping = True, 1, False
    return made


def test_a_generation_records_its_seconds_and_tokens_per_second(engine: Any) -> None:
    rollouts = engine.generate(["ab", "c"], np.array([2, 1]), SamplingParams(temperature=1.0, max_new_tokens=4))
    tokens = 3 + 1 + 4
    assert rollouts.metrics["engine/tokens"] == tokens
    assert rollouts.metrics["engine/seconds"] == 2.0
    assert rollouts.metrics["engine/tokens_per_s"] == pytest.approx(tokens / 2.0)


def test_an_engine_woken_up_is_awake_and_can_sleep_again(engine: Any) -> None:
    engine.sleep()
    assert engine.sleeping and engine.llm.calls == {"sleep": 1, "wake_up": 0}
    engine.wake_up()
    assert not engine.sleeping and engine.llm.calls == {"sleep": 1, "wake_up": 1}
    engine.generate(["ab", "c"], np.array([2, 1]), SamplingParams(temperature=1.0, max_new_tokens=4))
    assert engine.llm.calls["wake_up"] == 1                      # already awake: not woken twice
    engine.sleep()
    assert engine.sleeping and engine.llm.calls == {"sleep": 2, "wake_up": 1}
    engine.generate(["ab", "c"], np.array([2, 1]), SamplingParams(temperature=1.0, max_new_tokens=4))
    assert not engine.sleeping and engine.llm.calls["wake_up"] == 2   # a sleeping engine wakes to generate
