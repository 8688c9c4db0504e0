"""The ``hf`` rollout engine: transformers ``generate`` with per-prompt sample counts.

Prompt i owns the next ``counts_P[i]`` samples; rows are length-sorted and packed under
``max_batch_tokens``. ``logprobs[r][t]`` is log softmax of the RAW logits at the sampled token (what a
teacher-forced pass gives); only the given :class:`~real_runs.types.SamplingParams` apply. With
``sampling.seed`` set one call is reproducible and the caller's RNG untouched. With ``sampling.abort_horizon``
> 0, DUET's early stopping stops rows inside ``generate`` (:class:`_AbortRule`). Detail:
docs/models.md#real_runs-engines-hf.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import torch
from transformers import (GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria,
                          StoppingCriteriaList)
from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from real_runs.rewards.math import first_boxed_end
from real_runs.types import Rollouts, SamplingParams


class _RawLogprobCapture(LogitsProcessor):
    """Records log p(token) under the raw logits: at step t it reads the token sampled at t-1."""

    def __init__(self) -> None:
        self.logprobs_T: list[torch.Tensor] = []
        self.last_logsoftmax: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.last_logsoftmax is not None:
            self.logprobs_T.append(self.last_logsoftmax.gather(1, input_ids[:, -1:])[:, 0])
        self.last_logsoftmax = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """All steps' log-probs, (B, T), once the final sampled tokens are known."""
        if self.last_logsoftmax is not None:
            self.logprobs_T.append(self.last_logsoftmax.gather(1, last_tokens[:, None])[:, 0])
            self.last_logsoftmax = None
        return torch.stack(self.logprobs_T, dim=1)


class _AbortRule(StoppingCriteria):
    """DUET's abort rule (:func:`gdro_lab.allocation.duet.marker_gated_abort`) as a per-row stopping criterion.

    A row whose answer marker (:func:`~real_runs.rewards.math.first_boxed_end` of its text) completes at token
    m <= horizon + grace stops at m + grace; at horizon + grace a row without one stops (aborted) unless
    ``keep_R`` (its draw u < keep_prob), which then runs to EOS. ``stop_R``: tokens at the rule's stop, -1: none.
    """

    def __init__(self, tokenizer, width: int, eos: set[int], sampling: SamplingParams, keep_R: np.ndarray,
                 closes: dict[int, bool]) -> None:
        self.tokenizer, self.width, self.eos, self.keep_R, self.closes = tokenizer, width, eos, keep_R, closes
        self.grace, self.check = sampling.abort_grace, sampling.abort_horizon + sampling.abort_grace
        self.marker_R, self.stop_R = np.full(keep_R.size, -1), np.full(keep_R.size, -1)
        self.done_R = np.zeros(keep_R.size, bool)

    def _closes(self, token: int) -> bool:
        """Whether the token's text holds a "}" (only such a token can complete a box; cached per token)."""
        if token not in self.closes:
            self.closes[token] = "}" in self.tokenizer.decode([token])
        return self.closes[token]

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        t = input_ids.shape[1] - self.width  # tokens generated
        for r, token in enumerate(input_ids[:, -1].tolist()):
            if self.done_R[r] or token in self.eos:
                self.done_R[r] = True
                continue
            if t <= self.check and self.marker_R[r] < 0 and self._closes(token) and first_boxed_end(
                    self.tokenizer.decode(input_ids[r, self.width:].tolist(), skip_special_tokens=True)) >= 0:
                self.marker_R[r] = t
            m = self.marker_R[r]
            if (m >= 0 and t == m + self.grace) or (m < 0 and t == self.check and not self.keep_R[r]):
                self.stop_R[r], self.done_R[r] = t, True
        return torch.as_tensor(self.stop_R == t, device=input_ids.device)  # type: ignore[return-value]

    def finish(self, rows: list[tuple[list[int], np.ndarray, str]], keep_prob: float
               ) -> tuple[list[tuple[list[int], np.ndarray, str]], np.ndarray]:
        """The rows cut at the rule's stops ("marker" or "abort"), and each row's weight: 0 aborted,
        1 / keep_prob for a kept marker-less row still running at horizon + grace, else 1."""
        weights = np.ones(len(rows))
        for r, (toks, lps, reason) in enumerate(rows):
            stop = int(self.stop_R[r])
            if stop >= 0:
                rows[r] = (toks[:stop], lps[:stop], "marker" if self.marker_R[r] >= 0 else "abort")
                weights[r] = 1.0 if self.marker_R[r] >= 0 else 0.0
            elif self.keep_R[r] and self.marker_R[r] < 0 and len(toks) > self.check:
                weights[r] = 1.0 / keep_prob
        return rows, weights


def plan_batches(lengths_R: np.ndarray, max_new_tokens: int, max_batch_tokens: int,
                 max_batch_size: int | None = None) -> list[np.ndarray]:
    """Rows sorted by prompt length (longest first), cut greedily into batches.

    A batch of b rows padded to prompt length L costs b * (L + max_new_tokens) tokens of KV cache;
    each batch stays within ``max_batch_tokens`` (a single row always forms a batch). Returns the
    row indices of each batch.
    """
    order_R = np.argsort(-np.asarray(lengths_R), kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < order_R.size:
        width = int(lengths_R[order_R[start]]) + max_new_tokens  # longest row of the batch
        rows = max(1, max_batch_tokens // width)
        if max_batch_size is not None:
            rows = min(rows, max_batch_size)
        batches.append(order_R[start:start + rows])
        start += rows
    return batches


def _batch_seed(seed: int, batch: int) -> int:
    return int(np.random.SeedSequence([seed, batch]).generate_state(1, np.uint64)[0] >> 1)


class HFEngine:
    """Rollouts from a transformers causal LM (CPU or GPU), exact per-prompt sample counts.

    model: a causal LM; when it is the trainer's own module, ``load_weights`` is a no-op.
    tokenizer: its tokenizer (prompts are encoded without extra special tokens unless the
        tokenizer adds a BOS the prompt text lacks).
    max_batch_tokens: KV-cache budget per ``generate`` call, rows x (prompt + max_new_tokens).
    max_batch_size: optional cap on rows per call.
    """

    def __init__(self, model, tokenizer, *, max_batch_tokens: int = 65536,
                 max_batch_size: int | None = None) -> None:
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {max_batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_tokens = int(max_batch_tokens)
        self.max_batch_size = max_batch_size
        self.eos_ids = eos_token_ids(getattr(model, "generation_config", None), tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])
        self._closes: dict[int, bool] = {}  # early stopping: token -> its text holds a "}"

    # ------------------------------------------------------------------ public API
    def generate(self, prompts: Sequence[str], counts_P: np.ndarray,
                 sampling: SamplingParams) -> Rollouts:
        """Exactly ``counts_P[i]`` samples of prompt i, flat in prompt order (see module doc)."""
        counts_P = check_counts(prompts, counts_P)
        check_sampling(sampling)
        prompt_ids = [encode_prompt(self.tokenizer, p) for p in prompts]
        row_prompt_R = np.repeat(np.arange(len(prompts)), counts_P)
        lengths_R = np.array([len(prompt_ids[i]) for i in row_prompt_R], dtype=np.int64)
        tokens: list[list[int]] = [[] for _ in row_prompt_R]
        logprobs: list[np.ndarray] = [np.zeros(0, np.float32) for _ in row_prompt_R]
        reasons = ["length"] * row_prompt_R.size
        weights_R = np.ones(row_prompt_R.size) if sampling.abort_horizon > 0 else None
        batches = plan_batches(lengths_R, sampling.max_new_tokens, self.max_batch_tokens,
                               self.max_batch_size)
        start = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            for b, rows in enumerate(batches):
                batch_prompts = [prompt_ids[row_prompt_R[r]] for r in rows]
                out, weights = self._generate_batch(batch_prompts, sampling, b)
                for r, (toks, lps, reason) in zip(rows, out):
                    tokens[r], logprobs[r], reasons[r] = toks, lps, reason
                if weights_R is not None:
                    weights_R[rows] = weights
        finally:
            self.model.train(was_training)
        seconds = time.perf_counter() - start
        texts = self.tokenizer.batch_decode(tokens, skip_special_tokens=True) if tokens else []
        generated = int(sum(len(t) for t in tokens))
        metrics = {"engine/tokens": float(generated), "engine/seconds": seconds,
                   "engine/tokens_per_s": generated / seconds if seconds > 0 else 0.0,
                   "engine/batches": float(len(batches))}
        return Rollouts(counts_P=counts_P, prompt_token_ids=prompt_ids, token_ids=tokens,
                        logprobs=logprobs, texts=texts, finish_reasons=reasons, metrics=metrics,
                        weights_R=weights_R)

    def load_weights(self, state_dict: dict) -> None:
        """Copy trained weights into the engine's model.

        A no-op when the engine shares the trainer's module (every tensor already has the same
        storage), which is how the one-machine trainer uses it.
        """
        params = self.model.state_dict()
        if all(k in params and v.data_ptr() == params[k].data_ptr() for k, v in state_dict.items()):
            return
        missing = [k for k in state_dict if k not in params]
        if missing:
            raise ValueError(f"load_weights: {len(missing)} unknown parameter names, e.g. {missing[0]!r}")
        with torch.no_grad():
            for name, value in state_dict.items():
                params[name].copy_(value)

    def sleep(self) -> None:
        """Free cached GPU memory between rollouts (the module itself stays; API parity with vLLM)."""
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def wake_up(self) -> None:
        """Nothing to restore for the hf engine (API parity with vLLM)."""

    # ------------------------------------------------------------------ internals
    def _generate_batch(self, batch_prompts: list[list[int]], sampling: SamplingParams, batch_index: int
                        ) -> tuple[list[tuple[list[int], np.ndarray, str]], np.ndarray | None]:
        """(rows: tokens, log-probs, finish reason; the abort weights, None without early stopping)."""
        device = next(self.model.parameters()).device
        width = max(len(p) for p in batch_prompts)
        input_ids = torch.full((len(batch_prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(input_ids)
        for row, ids in enumerate(batch_prompts):
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            mask[row, width - len(ids):] = 1
        capture = _RawLogprobCapture()
        processors = LogitsProcessorList([capture] + _warpers(sampling))
        # Temperature/top-k/top-p live in our processors (after the capture), so generate's own
        # sampling flags stay neutral; greedy sets none (it would warn about unused flags).
        neutral = dict(temperature=1.0, top_k=0, top_p=1.0) if sampling.temperature > 0 else {}
        config = GenerationConfig(
            do_sample=sampling.temperature > 0, max_new_tokens=sampling.max_new_tokens,
            eos_token_id=self.eos_ids, pad_token_id=self.pad_id, num_beams=1, use_cache=True,
            **neutral)
        saved = self.model.generation_config
        self.model.generation_config = GenerationConfig(eos_token_id=self.eos_ids,
                                                        pad_token_id=self.pad_id)
        devices = [device] if device.type == "cuda" else []
        seed = None if sampling.seed is None else _batch_seed(sampling.seed, batch_index)
        rule = None
        if sampling.abort_horizon > 0:  # keep draws from their own generator: sampling's RNG stream is untouched
            keep_R = np.random.default_rng(seed).random(len(batch_prompts)) < sampling.abort_keep_prob
            rule = _AbortRule(self.tokenizer, width, set(self.eos_ids), sampling, keep_R, self._closes)
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices,
                                                        enabled=sampling.seed is not None):
                if seed is not None:
                    torch.manual_seed(seed)
                sequences = self.model.generate(
                    input_ids=input_ids.to(device), attention_mask=mask.to(device),
                    generation_config=config, logits_processor=processors,
                    **({} if rule is None else {"stopping_criteria": StoppingCriteriaList([rule])}))
        finally:
            self.model.generation_config = saved
        new_BT = sequences[:, width:]
        logp_BT = capture.finish(new_BT[:, -1]).float().cpu().numpy()
        rows = _cut_at_eos(new_BT.cpu().numpy(), logp_BT, set(self.eos_ids))
        return (rows, None) if rule is None else rule.finish(rows, sampling.abort_keep_prob)


def _warpers(sampling: SamplingParams) -> list[LogitsProcessor]:
    if sampling.temperature <= 0:
        return []
    warpers: list[LogitsProcessor] = []
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k > 0:
        warpers.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(sampling.top_p))
    return warpers


def _cut_at_eos(new_BT: np.ndarray, logp_BT: np.ndarray,
                eos: set[int]) -> list[tuple[list[int], np.ndarray, str]]:
    """Each row up to and including its first EOS ("stop"), else all of it ("length")."""
    out = []
    for toks, lps in zip(new_BT, logp_BT):
        hits = np.flatnonzero(np.isin(toks, list(eos)))
        end = int(hits[0]) + 1 if hits.size else toks.size
        out.append(([int(t) for t in toks[:end]], lps[:end].astype(np.float32),
                    "stop" if hits.size else "length"))
    return out


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """Token ids of a formatted prompt: no special tokens added, except a BOS the text lacks."""
    add = tokenizer.bos_token is not None and not prompt.startswith(tokenizer.bos_token)
    ids = tokenizer(prompt, add_special_tokens=add)["input_ids"]
    if not ids:
        raise ValueError("an empty prompt cannot be generated from: every prompt needs a token")
    return list(ids)


def eos_token_ids(generation_config, tokenizer) -> list[int]:
    """Stop tokens: the model's ``generation_config.eos_token_id`` (int or list) + tokenizer eos."""
    eos = getattr(generation_config, "eos_token_id", None)
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the model and tokenizer define no EOS token: set tokenizer.eos_token")
    return [int(i) for i in ids]


def check_counts(prompts: Sequence[str], counts_P) -> np.ndarray:
    counts = np.asarray(counts_P)
    if counts.ndim != 1 or counts.size != len(prompts):
        raise ValueError(f"counts_P needs one count per prompt: got shape {counts.shape} for "
                         f"{len(prompts)} prompts")
    if counts.size and (not np.all(np.equal(np.mod(counts, 1), 0)) or counts.min() < 0):
        raise ValueError("counts_P must hold non-negative integers")
    return counts.astype(np.int64)


def check_sampling(sampling: SamplingParams) -> None:
    if sampling.max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {sampling.max_new_tokens}")
    if sampling.temperature < 0 or not 0 < sampling.top_p <= 1 or sampling.top_k < 0:
        raise ValueError("sampling needs temperature >= 0, 0 < top_p <= 1 and top_k >= 0, got "
                         f"{sampling.temperature}, {sampling.top_p}, {sampling.top_k}")
    if min(sampling.abort_horizon, sampling.abort_grace) < 0 or not 0 < sampling.abort_keep_prob <= 1:
        raise ValueError("sampling needs abort_horizon >= 0, abort_grace >= 0 and 0 < abort_keep_prob <= 1, got "
                         f"{sampling.abort_horizon}, {sampling.abort_grace}, {sampling.abort_keep_prob}")
