"""A realistic reward batch from MATH-500's answers (seeded): what a policy's rollouts look like to the reward.

4-12 responses per prompt, answers in habitual formats or popular mistakes, 4% cut off. Used by
``benchmarks/bench_reward.py`` and the reward tests. The model of a batch:
docs/eval-notes.md#real_runs-rewards-realistic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

_FRAC = re.compile(r"\\frac\{(\d+)\}\{(\d+)\}")
_TRAILERS = ("", ".", ". I hope it is correct.", "\n\nSo that is the final answer.", " (checked twice).",
             "$.", " \\quad \\blacksquare")


@dataclass(frozen=True)
class RewardBatch:
    """responses_R, answers_R (gold, one per response) and prompt_R (the prompt of each response)."""

    responses: list[str]
    answers: list[str]
    prompt_R: np.ndarray


def variants(gold: str) -> list[str]:
    """Equivalent ways a model writes ``gold`` (the gold string first)."""
    out = [gold]
    if ", " in gold:
        out.append(gold.replace(", ", ","))
    elif "," in gold:
        out.append(gold.replace(",", ", "))
    if "\\frac" in gold:
        out.append(gold.replace("\\frac", "\\dfrac"))
        single = re.fullmatch(r"(-?)\\frac\{(\d)\}\{(\d)\}", gold)
        if single:
            out.append(f"{single.group(1)}\\frac{single.group(2)}{single.group(3)}")
        whole = _FRAC.fullmatch(gold.lstrip("-"))
        if whole and int(whole.group(2)) in (2, 4, 5, 8, 10, 20, 25):
            value = int(whole.group(1)) / int(whole.group(2))
            out.append(("-" if gold.startswith("-") else "") + f"{value:g}")
    if re.fullmatch(r"-?\d+", gold):
        out += [f"{gold} \\text{{ cm}}", f"{gold}^\\circ", f"x = {gold}", f"{gold}.0"]
    if gold.startswith("(") and gold.endswith(")"):
        out.append(f"\\left( {gold[1:-1]} \\right)")
    if "+" in gold and " + " not in gold:
        out.append(gold.replace("+", " + "))
    return out


def wrong_answers(gold: str, others: Sequence[str], rng: np.random.Generator) -> list[str]:
    """One to three popular mistakes for ``gold``, most frequent first."""
    options = []
    if re.fullmatch(r"-?\d+", gold):
        value = int(gold)
        options += [str(value + 1), str(value - 1), str(-value), str(2 * value)]
    frac = _FRAC.fullmatch(gold)
    if frac:
        options += [f"\\frac{{{frac.group(2)}}}{{{frac.group(1)}}}", f"\\frac{{{int(frac.group(1)) + 1}}}{{{frac.group(2)}}}"]
    options += [others[int(i)] for i in rng.choice(len(others), size=3, replace=False)]
    options = [o for o in dict.fromkeys(options) if o != gold]
    count = int(rng.integers(1, 4))
    return [options[int(i)] for i in rng.choice(len(options), size=min(count, len(options)), replace=False)]


def realistic_batch(golds: Sequence[str], num_prompts: int, seed: int = 0, min_n: int = 4,
                    max_n: int = 12) -> RewardBatch:
    """``num_prompts`` prompts (MATH-500 answers in a seeded order, cycling), 4-12 responses each."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(golds))
    responses: list[str] = []
    answers: list[str] = []
    prompt_R: list[int] = []
    for prompt in range(num_prompts):
        gold = golds[int(order[prompt % len(golds)])].strip()
        forms = variants(gold)
        habits = [gold] if rng.random() < 0.6 or len(forms) == 1 else [gold, forms[int(rng.integers(1, len(forms)))]]
        mistakes = wrong_answers(gold, golds, rng)
        weights = np.array([0.6, 0.3, 0.1][: len(mistakes)])
        success = rng.beta(0.7, 0.7)
        for _ in range(int(rng.integers(min_n, max_n + 1))):
            if rng.random() < success:
                answer = habits[int(rng.random() < 0.3)] if len(habits) > 1 else habits[0]
            else:
                answer = mistakes[int(rng.choice(len(mistakes), p=weights / weights.sum()))]
            text = f"Let me work through this step by step. ... so the final answer is $\\boxed{{{answer}}}"
            if rng.random() < 0.04:
                text = text[: -1 - len(answer) // 2]  # cut off inside the box: no answer
            responses.append(text + _TRAILERS[int(rng.integers(len(_TRAILERS)))])
            answers.append(gold)
            prompt_R.append(prompt)
    return RewardBatch(responses, answers, np.array(prompt_R, np.int64))
