"""Verifiable rewards that are right on real data and can never hang a run.

:class:`MathReward`: the response's last ``\\boxed{...}`` against the gold answer, both wrapped as
``\\boxed{...}`` and compared by math-verify (raw MATH-500 answers parse correctly only ~78% of
the time; wrapped, 100%). Reward +1 if equal, -1 otherwise (paper App. A), with a success flag.

Safety, in order:
1. The response is only searched, never evaluated: ``rfind`` of the last ``\\boxed{`` and a brace
   match over at most ``max_answer_chars`` characters after it (a 1 MB response costs one C-level
   scan). No box, unbalanced braces or an over-long box: incorrect, counted in
   ``reward/no_answer``; a box math-verify cannot parse is counted in ``reward/unparsed``.
2. Shortcuts without math-verify: the same string as the gold answer (after stripping spaces) is
   correct; when both are plain integers ("042", "-7"; all of DAPO-Math and AIME) they are
   compared as integers. Counted in ``reward/shortcut``. Two plain numeric literals (decimals,
   fractions) are decided the way math-verify would decide them whenever its answer is certain
   (:mod:`real_runs.rewards.verdicts`), counted in ``reward/numeric``.
3. Every other distinct (answer, gold) pair of the call is decided once: from the verdict cache
   (shared across steps, least recently used out, ``cache_size`` verdicts; counted in
   ``reward/cached``), else by :class:`real_runs.rewards.pool.TimedPool` (counted in
   ``reward/verified``, one per distinct pair): worker processes running math-verify in their
   main thread (its ``signal.alarm`` soft timeouts work there) under a hard wall-clock timeout; a
   hung worker is killed and replaced, a crashed one replaced; either way every response with
   that pair scores -1 and is counted (``reward/timeouts``, ``reward/errors``), and nothing is
   cached. The pool has one worker per usable core by default.
4. Model output is never evaluated as code: math-verify runs with LaTeX extraction only (its
   plain-expression fallback would pass arithmetic to sympy's ``parse_expr``, i.e. ``eval``).

Departure from the paper: the released code scores with verl's ``math_dapo`` (normalised string
match of an "Answer:" line); issue 8 asks for math-verify on ``\\boxed{}``, which accepts
equivalent forms (``\\dfrac``, ``0.5``, intervals, ``x = 5``) that a string match rejects.

:class:`ChoiceReward` (multiple choice, GPQA's "X) text" gold answers) is the worked example of a
user-defined reward: any object with ``score(responses, answers) -> RewardResult`` fits
:class:`real_runs.types.Reward`.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, Sequence

import numpy as np

from real_runs.rewards.pool import TimedPool
from real_runs.rewards.verdicts import VerdictCache, decide_numbers, verdict_key
from real_runs.types import RewardResult

_BOX_OPENERS = ("\\boxed{", "\\fbox{")


def extract_last_boxed(response: str, max_chars: int = 1000) -> str | None:
    """Content of the last ``\\boxed{}``/``\\fbox{}``, braces matched within ``max_chars``; else None.

    Cost is one reverse scan of the response plus at most ``max_chars`` steps, whatever its size.
    """
    start = max(response.rfind(opener) for opener in _BOX_OPENERS)
    if start < 0:
        return None
    open_at = response.index("{", start)
    window = response[open_at: open_at + max_chars + 2]
    depth = 0
    for pos, char in enumerate(window):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return window[1:pos]
    return None


_INTEGER = re.compile(r"[+-]?\d{1,100}")


def _shortcut(content: str, gold: str) -> bool | None:
    """True for the same string; for two plain integers, their equality; None: ask math-verify."""
    content = content.strip()
    if content == gold:
        return True
    if _INTEGER.fullmatch(content) and _INTEGER.fullmatch(gold):
        return int(content) == int(gold)
    return None


def _results(success_R: np.ndarray, counters: Mapping[str, float]) -> RewardResult:
    rewards_R = np.where(success_R, 1.0, -1.0)
    metrics = {name: float(value) for name, value in counters.items()}
    metrics["reward/mean"] = float(rewards_R.mean()) if rewards_R.size else 0.0
    return RewardResult(rewards_R, success_R.astype(bool), metrics)


def _check_lengths(responses: Sequence[str], answers: Sequence[str]) -> None:
    if len(responses) != len(answers):
        raise ValueError(f"score() got {len(responses)} responses and {len(answers)} answers: "
                         "give one gold answer per response")


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class MathReward:
    """math-verify on ``\\boxed{}`` answers, in a pool of worker processes with a hard timeout.

    timeout_s: hard wall-clock limit per response once a worker holds it (the worker is killed
        and replaced after it); math-verify's own soft alarms get half of it (>= 1 s).
    num_workers: worker processes; None = one per usable core (scoring is CPU-bound).
    max_answer_chars: longest ``\\boxed{}`` content considered; longer counts as no answer.
    exact_match_shortcut: decide equal strings, plain integers and plain numeric literals without
        math-verify (tests turn it off to check math-verify itself).
    cache_size: verdicts kept across calls (least recently used out; 0 = no cache). Distinct pairs
        of one call are always decided once.

    Workers are separate processes: a script that builds a MathReward at import time needs the
    usual ``if __name__ == "__main__":`` guard (as for any multiprocessing pool).
    """

    def __init__(self, timeout_s: float = 5.0, num_workers: int | None = None, max_answer_chars: int = 1000,
                 exact_match_shortcut: bool = True, cache_size: int = 16384):
        self.exact_match_shortcut = exact_match_shortcut
        self.timeout_s = float(timeout_s)
        self.max_answer_chars = int(max_answer_chars)
        self.soft_timeout = max(1, int(self.timeout_s / 2))
        self.cache = VerdictCache(cache_size)
        workers = available_cores() if num_workers is None else num_workers
        self._pool = TimedPool("real_runs.rewards.math_task:verify_boxed", workers, timeout_s)

    def score(self, responses: Sequence[str], answers: Sequence[str]) -> RewardResult:
        """Score R responses against their gold answers (see the module docstring)."""
        _check_lengths(responses, answers)
        success_R = np.zeros(len(responses), dtype=bool)
        counters = {"reward/timeouts": 0, "reward/errors": 0, "reward/no_answer": 0,
                    "reward/unparsed": 0, "reward/shortcut": 0, "reward/numeric": 0, "reward/cached": 0,
                    "reward/verified": 0}
        pending: dict[tuple[str, str], list[int]] = {}  # distinct pairs for math-verify -> their rows
        for row, (response, answer) in enumerate(zip(responses, answers)):
            content = extract_last_boxed(str(response), self.max_answer_chars)
            gold = str(answer).strip()
            if content is None or not gold:
                counters["reward/no_answer"] += 1
                continue
            if self.exact_match_shortcut:
                if (decided := _shortcut(content, gold)) is not None:
                    success_R[row] = decided
                    counters["reward/shortcut"] += 1
                    continue
                if (decided := decide_numbers(content.strip(), gold)) is not None:
                    success_R[row] = decided
                    counters["reward/numeric"] += 1
                    continue
            key = (verdict_key(content), gold[: self.max_answer_chars])
            verdict = self.cache.get(key)
            if verdict is None:
                pending.setdefault(key, []).append(row)
            else:
                success_R[row] = verdict == 1
                counters["reward/cached"] += 1
                counters["reward/unparsed"] += verdict == -1
        tasks = [(content, gold, self.soft_timeout) for content, gold in pending]
        counters["reward/verified"] = len(tasks)
        for (key, rows), (status, value) in zip(pending.items(), self._pool.map(tasks)):
            if status == "ok":
                self.cache.put(key, value)
                success_R[rows] = value == 1
                counters["reward/unparsed"] += (value == -1) * len(rows)
            else:
                counters["reward/timeouts" if status == "timeout" else "reward/errors"] += len(rows)
        return _results(success_R, counters)

    def close(self) -> None:
        """Stop the worker processes."""
        self._pool.close()

    def __enter__(self) -> "MathReward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
        _check_lengths(responses, answers)
        success_R = np.zeros(len(responses), dtype=bool)
        no_answer = 0
        for row, (response, answer) in enumerate(zip(responses, answers)):
            gold = str(answer).strip()[:1].upper()
            chosen = extract_choice(str(response), self.letters)
            no_answer += chosen is None
            success_R[row] = chosen is not None and chosen == gold
        return _results(success_R, {"reward/timeouts": 0, "reward/errors": 0,
                                    "reward/no_answer": no_answer})

    def close(self) -> None:
        """Nothing to stop (kept for a uniform interface)."""


#: Benchmarks scored by multiple choice; every other source uses :class:`MathReward`.
CHOICE_SOURCES = frozenset({"gpqa", "gpqa_diamond"})


def reward_kind(source: str) -> str:
    """"choice" for multiple-choice benchmarks, "math" otherwise."""
    return "choice" if source in CHOICE_SOURCES else "math"
