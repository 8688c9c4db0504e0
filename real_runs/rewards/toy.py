"""A toy reward with known per-prompt odds (``rollout.reward = "toy"``; the ``tiny-cpu`` preset).

NOT a task: the verdict does not measure whether the response is right. Prompt i (keyed by its
gold answer string a_i) succeeds with a fixed, known probability

    p_i = u("odds", a_i),          u(...) = first 8 bytes of sha256(...) / 2^64, uniform in [0, 1)

and response r of that prompt succeeds iff u("draw", a_i, text_r) < p_i. The draw is a hash of
the response text, so a verdict is deterministic (a resumed run rescores identically) and
independent across distinct responses; identical texts of one prompt get one verdict. Why:
docs/eval-notes.md#real_runs-rewards-toy.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from real_runs.types import RewardResult


def _uniform(*parts: str) -> float:
    digest = hashlib.sha256("\x00".join(("gdro-toy",) + parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64


def toy_odds(answer: str) -> float:
    """p_i: the known success probability of every response to a prompt with gold ``answer``."""
    return _uniform("odds", answer)


class ToyOddsReward:
    """+1 / -1 with probability p_i per prompt (see the module docstring); never reads the math."""

    def score(self, responses: Sequence[str], answers: Sequence[str]) -> RewardResult:
        if len(responses) != len(answers):
            raise ValueError(f"score() got {len(responses)} responses and {len(answers)} answers: "
                             "give one gold answer per response")
        success_R = np.array([_uniform("draw", a, text) < toy_odds(a) for text, a in zip(responses, answers)],
                             dtype=bool)
        rewards_R = np.where(success_R, 1.0, -1.0)
        return RewardResult(rewards_R, success_R, {"reward/mean": float(rewards_R.mean()) if rewards_R.size else 0.0})

    def close(self) -> None:
        """Nothing to release (the math reward's pool has workers; this has none)."""
