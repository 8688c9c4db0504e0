"""A synthetic, verifiable arithmetic task suite for the CPU learning study (no downloads).

Five skill groups with difficulty levels (``SKILLS``: add, sub, mul, chain, mod); a heavy-tailed
training pool and a disjoint held-out split of fixed size per group. A problem is the bare expression
(``"123+45="``), the answer ``\\boxed{168}``, each skill its own source; ids are
``"lmstudy_{group}:{split}:L{level}:{expression}"``. Everything is a pure function of a seed. The
suite: docs/lm-study-notes.md#real_runs-lmstudy-tasks.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from gdro_lab._validate import require_int
from real_runs.types import Problem

SOURCE = "lmstudy"
Operands = tuple[int, ...]


def _digits(rng: np.random.Generator, n: int) -> int:
    return int(rng.integers(10 ** (n - 1) if n > 1 else 0, 10**n))


def _has_borrow(a: int, b: int) -> bool:
    while b:
        if a % 10 < b % 10:
            return True
        a, b = a // 10, b // 10
    return False


def _add(n: int) -> Callable[[np.random.Generator], Operands]:
    return lambda rng: (_digits(rng, n), _digits(rng, n))


def _sub(n: int) -> Callable[[np.random.Generator], Operands]:
    def draw(rng: np.random.Generator) -> Operands:
        while True:
            a, b = sorted((_digits(rng, n), _digits(rng, n)), reverse=True)
            if _has_borrow(a, b):
                return a, b
    return draw


def _mul(n: int, m: int) -> Callable[[np.random.Generator], Operands]:
    return lambda rng: (_digits(rng, n), _digits(rng, m))


def _chain(n: int) -> Callable[[np.random.Generator], Operands]:
    return lambda rng: (_digits(rng, n), _digits(rng, n), _digits(rng, n))


def _mod(n: int) -> Callable[[np.random.Generator], Operands]:
    return lambda rng: (_digits(rng, n), int(rng.integers(2, 10)))


@dataclass(frozen=True)
class Level:
    """One difficulty level of a skill: how to draw operands, render and solve them.

    draw: operands from a generator; template: ``str.format`` pattern of the expression; space: the
    number of distinct problems, or a lower bound; weight: its relative frequency in the training pool.
    """

    draw: Callable[[np.random.Generator], Operands]
    template: str
    solve: Callable[..., int]
    space: int
    weight: float


def _add_space(n: int) -> int:
    return (9 * 10 ** (n - 1)) ** 2


def _sub_space(n: int) -> int:
    """Distinct ``a - b`` with n-digit a >= b and a borrow: exact for n = 2 (1,620, enumerated),
    a lower bound (a quarter of the ordered pairs) above, where the borrow share only grows."""
    if n == 2:
        return sum(1 for a in range(10, 100) for b in range(10, a + 1) if _has_borrow(a, b))
    return _add_space(n) // 4


SKILLS: dict[str, list[Level]] = {
    "add": [Level(_add(n), "{}+{}=", lambda a, b: a + b, _add_space(n), w)
            for n, w in ((2, 0.6), (3, 0.3), (4, 0.1))],
    "sub": [Level(_sub(n), "{}-{}=", lambda a, b: a - b, _sub_space(n), w)
            for n, w in ((2, 0.6), (3, 0.3), (4, 0.1))],
    "mul": [Level(_mul(n, m), "{}*{}=", lambda a, b: a * b, 9 * 10 ** (n - 1) * 9 * 10 ** (m - 1), w)
            for n, m, w in ((1, 2, 0.6), (1, 3, 0.3), (2, 2, 0.1))],
    "chain": [Level(_chain(n), "{}+{}-{}=", lambda a, b, c: a + b - c, (9 * 10 ** (n - 1)) ** 3, w)
              for n, w in ((1, 0.7), (2, 0.3))],
    "mod": [Level(_mod(n), "{}%{}=", lambda a, m: a % m, 9 * 10 ** (n - 1) * 8, w)
            for n, w in ((2, 0.7), (3, 0.3))],
}

#: Zipf-like training frequencies of the groups (common to rare), summing to 1.
GROUP_WEIGHTS: dict[str, float] = {"add": 0.44, "sub": 0.22, "mul": 0.15, "chain": 0.11, "mod": 0.08}


@dataclass(frozen=True)
class TaskConfig:
    """Sizes and seed of the suite.

    train_size: problems in the training pool (heavy-tailed mix, >= 1).
    heldout_per_group: held-out problems per group, spread evenly over its levels (>= 1; a
        level contributes at most a third of its distinct problems).
    seed: the suite's seed; the same seed gives the same problems and ids everywhere.
    """

    train_size: int = 4000
    heldout_per_group: int = 400
    seed: int = 0

    def __post_init__(self) -> None:
        require_int("TaskConfig", "train_size", self.train_size, 1)
        require_int("TaskConfig", "heldout_per_group", self.heldout_per_group, 1)


def make_problem(group: int | str, level: int, operands: Operands, split: str) -> Problem:
    """Render one problem: text ``"a+b="``, answer the exact integer, a content-derived id."""
    spec = SKILLS[str(group)][level]
    text = spec.template.format(*operands)
    answer = str(spec.solve(*operands))
    source = f"{SOURCE}_{group}"
    return Problem(id=f"{source}:{split}:L{level + 1}:{text}", problem=text, answer=answer,
                   source=source, group=str(group))


def _draw_unique(rng: np.random.Generator, spec: Level, count: int, taken: set[str]) -> list[Operands]:
    out: list[Operands] = []
    while len(out) < count:
        ops = spec.draw(rng)
        key = spec.template.format(*ops)
        if key not in taken:
            taken.add(key)
            out.append(ops)
    return out


def heldout_split(cfg: TaskConfig) -> list[Problem]:
    """The held-out problems: ``heldout_per_group`` per group, evenly over levels."""
    problems: list[Problem] = []
    for g_index, (group, levels) in enumerate(SKILLS.items()):
        rng = np.random.default_rng([cfg.seed, 1, g_index])
        base, extra = divmod(cfg.heldout_per_group, len(levels))
        quotas = [min(base + (i < extra), spec.space // 3) for i, spec in enumerate(levels)]
        taken: set[str] = set()
        for level, (spec, quota) in enumerate(zip(levels, quotas)):
            problems += [make_problem(group, level, ops, "test")
                         for ops in _draw_unique(rng, spec, quota, taken)]
    return problems


#: The two halves of the held-out split: ``val`` chooses (learning rates), ``test`` reports.
HALVES = ("val", "test")


def heldout_halves(cfg: TaskConfig) -> dict[str, list[Problem]]:
    """The held-out split cut in two disjoint halves of different problems, ``val`` and ``test``.

    Within every (group, level) the problems alternate val, test, val, ... in their drawn order,
    so both halves have the same groups and levels (200 problems per group each at the default
    400). Each problem's ``source`` names its half and group (``lmstudy_val_add``, ...), so the
    evaluator reports every half-group as its own benchmark; ``group`` stays the skill.
    """
    out: dict[str, list[Problem]] = {half: [] for half in HALVES}
    seen: dict[tuple[str, int], int] = {}
    for problem in heldout_split(cfg):
        key = (problem.group, cell(problem))
        half = HALVES[seen.get(key, 0) % 2]
        seen[key] = seen.get(key, 0) + 1
        out[half].append(dataclasses.replace(problem, source=f"{SOURCE}_{half}_{problem.group}"))
    return out


def train_split(cfg: TaskConfig) -> list[Problem]:
    """The heavy-tailed training pool, disjoint from :func:`heldout_split`, in a shuffled order."""
    heldout = heldout_split(cfg)
    held = {p.problem for p in heldout}
    rng = np.random.default_rng([cfg.seed, 2])
    cells = [(g, lv, GROUP_WEIGHTS[g] * spec.weight) for g, levels in SKILLS.items()
             for lv, spec in enumerate(levels)]
    probs = np.array([w for _, _, w in cells])
    draws = rng.multinomial(cfg.train_size, probs / probs.sum())
    problems: list[Problem] = []
    taken = set(held)
    for (group, level, _), count in zip(cells, draws):
        spec = SKILLS[group][level]
        room = (spec.space - sum(1 for p in heldout if p.group == group and cell(p) == level)) // 2
        problems += [make_problem(group, level, ops, "train")
                     for ops in _draw_unique(rng, spec, min(int(count), room), taken)]
    order = rng.permutation(len(problems))
    return [problems[i] for i in order]


def cell(problem: Problem) -> int:
    """The difficulty level (0-based) of a problem, read from its id."""
    return int(problem.id.split(":")[2][1:]) - 1


def sample_supervised(rng: np.random.Generator, size: int, held: set[str]) -> list[Problem]:
    """Fresh problems from the training distribution (heavy-tailed), none whose text is in ``held``.

    The warm start trains on these: an endless stream, so it learns the skills, not a pool.
    """
    cells = [(g, lv, GROUP_WEIGHTS[g] * spec.weight) for g, levels in SKILLS.items()
             for lv, spec in enumerate(levels)]
    probs = np.array([w for _, _, w in cells])
    picks = rng.choice(len(cells), size=size, p=probs / probs.sum())
    out: list[Problem] = []
    for pick in picks:
        group, level, _ = cells[pick]
        spec = SKILLS[group][level]
        while True:
            ops = spec.draw(rng)
            if spec.template.format(*ops) not in held:
                out.append(make_problem(group, level, ops, "train"))
                break
    return out


def _digits_of(x: int) -> list[int]:
    """Decimal digits of a non-negative integer, least significant first."""
    return [int(c) for c in reversed(str(x))]


def _from_digits(digits_D: list[int]) -> int:
    return sum(d * 10**i for i, d in enumerate(digits_D))


def add_no_carry(a: int, b: int) -> int:
    """``a + b`` column by column, each column's carry dropped (``58+67 -> 15``)."""
    da, db = _digits_of(a), _digits_of(b)
    width = max(len(da), len(db))
    da, db = da + [0] * (width - len(da)), db + [0] * (width - len(db))
    return _from_digits([(x + y) % 10 for x, y in zip(da, db)])


def sub_smaller_from_larger(a: int, b: int) -> int:
    """``a - b`` column by column, always the smaller digit from the larger, no borrow
    (``52-38 -> 26``): the commonest subtraction bug in Brown & Burton (1978)."""
    da, db = _digits_of(a), _digits_of(b)
    db = db + [0] * (len(da) - len(db))
    return _from_digits([abs(x - y) for x, y in zip(da, db)])


def mul_no_carry(a: int, b: int) -> int:
    """``a * b`` by partial products with every carry dropped: digit ``(a_i * b_j) mod 10`` at
    column ``i + j``, columns summed without carry (``7*48 -> 86``)."""
    cols: dict[int, int] = {}
    for i, x in enumerate(_digits_of(a)):
        for j, y in enumerate(_digits_of(b)):
            cols[i + j] = (cols.get(i + j, 0) + x * y) % 10
    return _from_digits([cols[k] for k in range(max(cols) + 1)])


#: The demonstrator's systematic slip per skill (a buggy procedure, not noise): the answer a
#: "careless student" gives. It equals the right answer on the easy problems (no carry, no
#: borrow, ...), so slips cost most on the hard ones.
SLIPS: dict[str, Callable[..., int]] = {
    "add": add_no_carry,
    "sub": sub_smaller_from_larger,
    "mul": mul_no_carry,
    "chain": lambda a, b, c: a + b + c,  # the minus sign read as a plus
    "mod": lambda a, m: a // m,  # the quotient instead of the remainder
}


def operands(problem: Problem) -> Operands:
    """The integers of a problem's expression, in order (``"12+3-4=" -> (12, 3, 4)``)."""
    return tuple(int(x) for x in re.findall(r"\d+", problem.problem))


def slipped_answer(problem: Problem) -> str:
    """The answer of the skill's slip (:data:`SLIPS`) on this problem, as a string."""
    return str(SLIPS[str(problem.group)](*operands(problem)))


def boxed(answer: str) -> str:
    """The response the reward expects for a gold answer: ``\\boxed{answer}``."""
    return "\\boxed{" + answer + "}"
