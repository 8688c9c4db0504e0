"""Rollout engines behind one protocol (:class:`real_runs.types.Engine`).

``make_engine("hf", model, tokenizer, **kwargs)`` -> :class:`~real_runs.engines.hf.HFEngine`
(transformers ``generate``; CPU and GPU). ``make_engine("vllm", model, tokenizer, **kwargs)`` ->
:class:`~real_runs.engines.vllm.VLLMEngine` (offline ``vllm.LLM``; GPU, optional extra ``[vllm]``).
Both return exactly ``counts_P[i]`` samples for prompt i, flat in prompt order, with the sampled
tokens' log-probs under the raw model distribution.
"""

from __future__ import annotations

from real_runs.types import Engine

ENGINES = ("hf", "vllm")


def make_engine(name: str, model, tokenizer, **kwargs) -> Engine:
    """Build the engine called ``name`` around ``model`` / ``tokenizer`` (see each engine's kwargs)."""
    if name == "hf":
        from real_runs.engines.hf import HFEngine
        return HFEngine(model, tokenizer, **kwargs)
    if name == "vllm":
        from real_runs.engines.vllm import VLLMEngine
        return VLLMEngine(model, tokenizer, **kwargs)
    raise ValueError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")
