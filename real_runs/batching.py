"""Batching helpers of the trainer: data order, micro-batches by token budget, teacher-forced
log-probs of responses, the step's rollouts as tensors, phase timers (used by real_runs/train.py,
train_setup.py and ppo.py).
"""

from __future__ import annotations

import dataclasses
import resource
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from real_runs import loss as L


class DataOrder:
    """Prompts in a seeded random order per epoch; the position is all a resumed run needs."""

    def __init__(self, size: int, seed: int, shuffle: bool):
        self.size, self.seed, self.shuffle, self.position = size, seed, shuffle, 0
        self._epoch, self._order = -1, np.arange(size)

    def take(self, count: int) -> np.ndarray:
        out = np.empty(count, np.int64)
        for j in range(count):
            epoch, index = divmod(self.position, self.size)
            if epoch != self._epoch and self.shuffle:
                self._epoch, self._order = epoch, np.random.default_rng([self.seed, epoch]).permutation(self.size)
            out[j] = self._order[index]
            self.position += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position, "size": self.size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = int(state["position"])


class Timer:
    """Accumulates wall-clock seconds per phase: ``with timer("generate"): ...`` -> ``time/generate``."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.seconds[f"time/{name}"] = self.seconds.get(f"time/{name}", 0.0) + time.perf_counter() - start


def micro_batches(lengths_R: np.ndarray, budget: int) -> list[np.ndarray]:
    """Split sample indices into micro-batches of at most ``budget`` padded tokens, longest first."""
    order = np.argsort(-lengths_R, kind="stable")
    batches: list[np.ndarray] = []
    current: list[int] = []
    width = 0
    for index in order:
        width = max(width, int(lengths_R[index])) if current else int(lengths_R[index])
        if current and width * (len(current) + 1) > budget:
            batches.append(np.array(current))
            current, width = [], int(lengths_R[index])
        current.append(int(index))
    if current:
        batches.append(np.array(current))
    return batches


def response_logprobs(model: Any, prompts: Sequence[Sequence[int]],
                      responses: Sequence[Sequence[int]], pad_id: int, device: torch.device,
                      with_entropy: bool = False, entropy_grad: bool = False,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Teacher-forced log pi(y_t | x, y_<t) of each response token: (logp_BT, mask_BT, entropy_BT).

    Right-padded [prompt, response] rows; only the response positions go through the LM head,
    so the B x T x V logits never include the prompt. The entropy (a metric) is computed without
    a graph unless ``entropy_grad`` (an entropy bonus), which saves a B x T x V activation.
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    width, span = max(lengths), max(len(r) for r in responses)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    positions = torch.zeros(len(prompts), span, dtype=torch.long)
    tokens = torch.full((len(prompts), span), pad_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), span)
    for row, (p, r) in enumerate(zip(prompts, responses)):
        input_ids[row, :lengths[row]] = torch.tensor(list(p) + list(r))
        attention[row, :lengths[row]] = 1
        positions[row, :len(r)] = torch.arange(len(p) - 1, len(p) - 1 + len(r))
        tokens[row, :len(r)] = torch.tensor(list(r), dtype=torch.long)
        mask[row, :len(r)] = 1.0
    input_ids, attention, positions, tokens = (t.to(device) for t in (input_ids, attention, positions, tokens))
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention, use_cache=False).last_hidden_state
    picked = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
    logits_BTV = model.get_output_embeddings()(picked)
    logp_BT = L.token_logprobs(logits_BTV, tokens)
    entropy_BT = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy_BT = L.token_entropy(logits_BTV)
    return logp_BT, mask.to(device), entropy_BT


@dataclasses.dataclass
class RolloutBatch:
    """One step's rollouts as the update needs them (R samples, flat, prompt order)."""

    prompts: list[list[int]]
    responses: list[list[int]]           # an empty response becomes one masked-out pad token
    real_lengths: np.ndarray             # generated tokens per sample (0 for an empty response)
    lengths: np.ndarray                  # prompt + response tokens per sample (micro-batch packing)
    advantages: np.ndarray               # weighted, clipped advantage per sample
    pad_id: int
    old_logp: list[torch.Tensor] = dataclasses.field(default_factory=list)
    ref_logp: list[torch.Tensor] = dataclasses.field(default_factory=list)
    weights: np.ndarray | None = None    # early stopping's abort weight per sample (its loss x it); None: 1

    @classmethod
    def from_rollouts(cls, rollouts: Any, advantages_R: np.ndarray, pad_id: int) -> "RolloutBatch":
        prompts = [list(rollouts.prompt_token_ids[p]) for p in rollouts.prompt_index_R()]
        responses = [list(t) if len(t) else [pad_id] for t in rollouts.token_ids]
        return cls(prompts, responses, np.array([len(t) for t in rollouts.token_ids], np.int64),
                   np.array([len(p) + len(r) for p, r in zip(prompts, responses)], np.int64),
                   np.asarray(advantages_R, float), pad_id, weights=getattr(rollouts, "weights_R", None))

    def forward(self, model: torch.nn.Module, rows: np.ndarray, *, with_entropy: bool = False,
                entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Log-probs of ``rows`` under ``model``; the mask covers only the real generated tokens."""
        device = next(model.parameters()).device
        logp, mask, entropy = response_logprobs(model, [self.prompts[r] for r in rows], [self.responses[r] for r in rows],
                                                self.pad_id, device, with_entropy, entropy_grad)
        real = torch.as_tensor(self.real_lengths[rows], device=device)[:, None]
        return logp, mask * (torch.arange(mask.shape[1], device=device)[None, :] < real), entropy

    def padded(self, values: list[torch.Tensor], rows: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.nn.utils.rnn.pad_sequence([values[r] for r in rows], batch_first=True).to(device)

    def engine_gaps(self, rows: np.ndarray, logp_BT: torch.Tensor, engine_logprobs: Sequence[np.ndarray]) -> list[float]:
        """max |trainer - engine| log-prob over each row's real tokens (``logp_BT``: the trainer's, row j of
        it for ``rows[j]``; rows with no token are skipped): a consistency metric of the rollouts."""
        gaps = []
        for j, r in enumerate(rows):
            if self.real_lengths[r]:
                gap = logp_BT[j, :self.real_lengths[r]].detach().float().cpu() - torch.as_tensor(engine_logprobs[r])
                gaps.append(float(gap.abs().max()))
        return gaps


def peak_memory_gb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
