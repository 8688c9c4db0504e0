"""Multiple-choice reward (GPQA: gold answers look like "X) option text"; the chosen letter decides).

:class:`ChoiceReward` is the worked example of a user-defined reward: any object with
``score(responses, answers) -> RewardResult`` fits :class:`real_runs.types.Reward`.
:func:`reward_kind` says which benchmarks it scores; every other source is scored by
:class:`real_runs.rewards.math.MathReward`.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from real_runs.types import RewardResult, check_one_answer_each

_LETTER_PATTERNS = (
    re.compile(r"\\boxed\{\s*(?:\\text\{\s*)?\(?([A-Z])\)?"),
    re.compile(r"ANSWER\s*[:：]\s*\(?([A-Z])\b", re.IGNORECASE),
    re.compile(r"answer is\s*:?\s*\(?([A-Z])\)", re.IGNORECASE),
)


def extract_choice(response: str, letters: str = "ABCD", tail_chars: int = 2000) -> str | None:
    """The chosen letter: the last ``\\boxed{X}``, else the last ``ANSWER: X``, else "answer is (X)".

    Only the last ``tail_chars`` characters are searched (the answer is at the end; this bounds
    the regex work on any input). Letters outside ``letters`` do not count.
    """
    tail = response[-tail_chars:]
    for pattern in _LETTER_PATTERNS:
        found = [m.group(1).upper() for m in pattern.finditer(tail)]
        found = [f for f in found if f in letters]
        if found:
            return found[-1]
    return None


class ChoiceReward:
    """Multiple choice (GPQA): gold answers look like "X) option text"; the letter decides.

    A user-defined reward needs only this shape: ``score(responses, answers) -> RewardResult``,
    never raising on model output and bounded in time (here: regexes over a capped tail).
    """

    def __init__(self, letters: str = "ABCD"):
        self.letters = letters

    def score(self, responses: Sequence[str], answers: Sequence[str]) -> RewardResult:
        """+1 when the response's letter equals the gold letter (first character of the answer)."""
        check_one_answer_each(responses, answers)
        success_R = np.zeros(len(responses), dtype=bool)
        no_answer = 0
        for row, (response, answer) in enumerate(zip(responses, answers)):
            gold = str(answer).strip()[:1].upper()
            chosen = extract_choice(str(response), self.letters)
            no_answer += chosen is None
            success_R[row] = chosen is not None and chosen == gold
        return RewardResult.from_successes(success_R, {"reward/timeouts": 0, "reward/errors": 0,
                                                       "reward/no_answer": no_answer})

    def close(self) -> None:
        """Nothing to stop (kept for a uniform interface)."""


#: Benchmarks scored by multiple choice; every other source uses the math reward.
CHOICE_SOURCES = frozenset({"gpqa", "gpqa_diamond"})


def reward_kind(source: str) -> str:
    """"choice" for multiple-choice benchmarks, "math" otherwise."""
    return "choice" if source in CHOICE_SOURCES else "math"
