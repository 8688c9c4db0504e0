"""The math reward: verifiable, right on real data, and it can never hang a run.

:class:`MathReward`: the response's last ``\\boxed{...}`` against the gold answer, compared by
math-verify; reward +1 if equal, -1 otherwise (paper App. A), with a success flag. Every verdict is
math-verify's on the raw boxed content; cheap cases are decided in the parent, the rest in a
:class:`real_runs.rewards.pool.TimedPool` whose hung or crashed tasks score -1 and are counted
(``reward/*``). Departs from the paper's code (verl's ``math_dapo`` string match on an "Answer:" line),
since math-verify accepts equivalent forms. What is decided where: docs/eval-notes.md#real_runs-rewards-math.
"""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

import numpy as np

from real_runs.rewards.pool import TimedPool
from real_runs.rewards.verdicts import VerdictCache, decide_numbers, verdict_key
from real_runs.types import RewardResult, check_one_answer_each

_BOX_OPENERS = ("\\boxed{", "\\fbox{")
_BRACE = re.compile(r"[{}]")


def _closing(text: str, open_at: int, limit: int | None = None) -> int:
    """End (exclusive) of the "}" that closes the "{" at ``open_at``, looked for within ``limit`` characters
    (all without); -1 when the braces do not balance there."""
    depth = 0
    for brace in _BRACE.finditer(text, open_at, len(text) if limit is None else open_at + limit):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return brace.end()
    return -1


def extract_last_boxed(response: str, max_chars: int = 1000) -> str | None:
    """Content of the last ``\\boxed{}``/``\\fbox{}``, braces matched within ``max_chars``; else None.

    Cost is one reverse scan of the response plus at most ``max_chars`` steps, whatever its size.
    """
    start = max(response.rfind(opener) for opener in _BOX_OPENERS)
    if start < 0:
        return None
    open_at = response.index("{", start)
    end = _closing(response, open_at, max_chars + 2)
    return None if end < 0 else response[open_at + 1:end - 1]


def first_boxed_end(text: str) -> int:
    """End (exclusive) of the first ``\\boxed{...}``/``\\fbox{...}`` once its braces balance, -1 while it is
    incomplete or absent: the answer marker of the hf engine's early stopping (a box nested in it is part of it)."""
    opened = [at for at in (text.find(opener) for opener in _BOX_OPENERS) if at >= 0]
    return _closing(text, text.index("{", min(opened))) if opened else -1


_INTEGER = re.compile(r"[+-]?\d{1,100}")


def _shortcut(content: str, gold: str) -> bool | None:
    """True for the same string; for two plain integers, their equality; None: ask math-verify."""
    content = content.strip()
    if content == gold:
        return True
    if _INTEGER.fullmatch(content) and _INTEGER.fullmatch(gold):
        return int(content) == int(gold)
    return None


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class MathReward:
    """math-verify on ``\\boxed{}`` answers, in a pool of worker processes with a hard timeout.

    timeout_s: hard wall-clock limit per response once a worker holds it (math-verify's soft alarms: half).
    num_workers: worker processes; None = one per usable core.
    max_answer_chars: longest ``\\boxed{}`` content considered; longer counts as no answer.
    exact_match_shortcut: decide equal strings and plain numbers without math-verify.
    cache_size: verdicts kept across calls (LRU; 0 = no cache).
    Workers are processes: build it under ``if __name__ == "__main__":`` in a script.
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
        check_one_answer_each(responses, answers)
        success_R = np.zeros(len(responses), dtype=bool)
        counters = {"reward/timeouts": 0, "reward/errors": 0, "reward/no_answer": 0,
                    "reward/unparsed": 0, "reward/shortcut": 0, "reward/numeric": 0, "reward/cached": 0,
                    "reward/verified": 0}
        pending: dict[tuple[str, str], tuple[str, list[int]]] = {}  # key -> (first content seen, its rows)
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
                pending.setdefault(key, (content, []))[1].append(row)
            else:
                success_R[row] = verdict == 1
                counters["reward/cached"] += 1
                counters["reward/unparsed"] += verdict == -1
        # the raw content goes to math-verify (its own rewrites then run once, as on the uncached path);
        # the tasks of one gold answer go to one worker (affinity), which parses that gold once, call after call
        order = sorted(pending, key=lambda key: key[1])
        tasks = [(pending[key][0], key[1], self.soft_timeout) for key in order]
        counters["reward/verified"] = len(tasks)
        for key, (status, value) in zip(order, self._pool.map(tasks, affinity=[key[1] for key in order])):
            rows = pending[key][1]
            if status == "ok":
                self.cache.put(key, value)
                success_R[rows] = value == 1
                counters["reward/unparsed"] += (value == -1) * len(rows)
            else:
                counters["reward/timeouts" if status == "timeout" else "reward/errors"] += len(rows)
        return RewardResult.from_successes(success_R, counters)

    def close(self) -> None:
        """Stop the worker processes."""
        self._pool.close()

    def __enter__(self) -> "MathReward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
