"""Contracts shared by the real-run parts: prompts, rollouts, sampling, engines and rewards.

Everything here is plain Python and numpy (no torch), so data loaders, rewards, engines, the
evaluator, the trainer and the verl plugin can be built and tested against the same shapes.
Rollouts are flat and ragged like :class:`gdro_lab.StepFeedback`: prompt i owns the next
``counts_P[i]`` samples, in prompt order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Problem:
    """One prompt of a data set.

    id: stable across runs and machines, ``"{source}:{split}:{row}"`` (the paper's UID).
    problem: the question text, without any instruction wrapper.
    answer: the gold answer as a string (not wrapped in ``\\boxed{}``).
    source: the data set name (``"dapo_math_17k"``, ``"math500"``, ...).
    group: the worst-group label: MATH subject x level where the data has them, else ``source``.
    """

    id: str
    problem: str
    answer: str
    source: str
    group: str


@dataclass(frozen=True)
class SamplingParams:
    """How to sample responses (engine-independent; vLLM and transformers map it their way).

    top_k = 0 and top_p = 1.0 disable those filters; temperature = 0 is greedy. abort_*: DUET's early
    stopping (the rule of :func:`gdro_lab.allocation.duet.marker_gated_abort`; horizon 0 = off; the hf
    engine only, the answer marker a complete ``\\boxed{}``).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 512
    seed: int | None = None
    abort_horizon: int = 0
    abort_grace: int = 0
    abort_keep_prob: float = 0.05


@dataclass
class Rollouts:
    """The samples of one ``generate`` call, flat and ragged (R = sum(counts_P) samples).

    counts_P: samples per prompt; prompt_token_ids: P lists, as fed; token_ids: R lists (EOS included).
    logprobs: one float32 array per sample, log-probs under the raw model distribution (temperature 1,
        no top-p/top-k), as a teacher-forced pass gives them.
    texts: decoded text per sample; finish_reasons: "stop" or "length" per sample, or with early stopping
        "marker" (stopped grace tokens after its answer marker) or "abort" (aborted at horizon + grace).
    weights_R: with early stopping, each sample's abort weight: 1, 0 (aborted: no reward, out of the loss) or
        1 / keep_prob (a marker-less tail kept to EOS); None without it.
    """

    counts_P: np.ndarray
    prompt_token_ids: list[list[int]]
    token_ids: list[list[int]]
    logprobs: list[np.ndarray]
    texts: list[str]
    finish_reasons: list[str]
    metrics: dict[str, float] = field(default_factory=dict)
    weights_R: np.ndarray | None = None

    def __post_init__(self) -> None:
        total = int(np.sum(self.counts_P))
        for name in ("token_ids", "logprobs", "texts", "finish_reasons"):
            if len(getattr(self, name)) != total:
                raise ValueError(f"Rollouts.{name} has {len(getattr(self, name))} entries, "
                                 f"expected sum(counts_P) = {total}")
        if len(self.prompt_token_ids) != len(self.counts_P):
            raise ValueError("Rollouts.prompt_token_ids needs one entry per prompt")

    @property
    def lengths_R(self) -> np.ndarray:
        """Generated tokens per sample."""
        return np.array([len(t) for t in self.token_ids], dtype=np.int64)

    def prompt_index_R(self) -> np.ndarray:
        """Prompt index of every sample: repeat(arange(P), counts_P)."""
        return np.repeat(np.arange(len(self.counts_P)), np.asarray(self.counts_P, np.int64))


@runtime_checkable
class Engine(Protocol):
    """A rollout engine: ``generate`` returns exactly ``counts_P[i]`` samples for prompt i.

    ``prompts`` are already-formatted prompt strings (chat template applied by the caller
    through :func:`real_runs.data.format_prompt`); ``load_weights`` takes a state dict of the
    trained policy (a no-op when the engine shares the trainer's module).
    """

    def generate(self, prompts: Sequence[str], counts_P: np.ndarray,
                 sampling: SamplingParams) -> Rollouts: ...

    def load_weights(self, state_dict: dict) -> None: ...


@dataclass
class RewardResult:
    """Scores of R responses: reward +1 / -1 (paper App. A), success flag, and counters."""

    rewards_R: np.ndarray
    successes_R: np.ndarray
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_successes(cls, successes_R: np.ndarray, counters: Mapping[str, float]) -> "RewardResult":
        """Reward +1 where ``successes_R`` is true, else -1; ``counters`` as floats plus ``reward/mean``."""
        rewards_R = np.where(successes_R, 1.0, -1.0)
        metrics = {name: float(value) for name, value in counters.items()}
        metrics["reward/mean"] = float(rewards_R.mean()) if rewards_R.size else 0.0
        return cls(rewards_R, successes_R.astype(bool), metrics)


def check_one_answer_each(responses: Sequence[str], answers: Sequence[str]) -> None:
    """A reward's ``score`` refuses responses and gold answers of different counts."""
    if len(responses) != len(answers):
        raise ValueError(f"score() got {len(responses)} responses and {len(answers)} answers: "
                         "give one gold answer per response")


@runtime_checkable
class Reward(Protocol):
    """A verifiable reward: never raises on model output, bounded in time, never runs it as code.

    ``metrics`` carries counters such as ``reward/timeouts`` and ``reward/errors``.
    """

    def score(self, responses: Sequence[str], answers: Sequence[str]) -> RewardResult: ...
