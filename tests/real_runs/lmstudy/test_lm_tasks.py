"""The task suite: answers by brute arithmetic and by the math reward, disjoint splits, stable ids."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from real_runs.lmstudy import tasks

CFG = tasks.TaskConfig(train_size=3000, heldout_per_group=400, seed=0)


@pytest.fixture(scope="module")
def splits():
    return tasks.train_split(CFG), tasks.heldout_split(CFG)


def brute(text: str) -> int:
    """Independent reference: parse ``a op b [op c]=`` and apply the operators left to right."""
    match = re.fullmatch(r"(\d+)([+\-*%])(\d+)(?:([+\-])(\d+))?=", text)
    assert match, text
    a, op, b, op2, c = match.groups()
    value = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
             "%": lambda x, y: x - y * (x // y)}[op](int(a), int(b))
    if op2:
        value = value + int(c) if op2 == "+" else value - int(c)
    return value


def test_answers_match_brute_arithmetic(splits):
    for p in splits[0] + splits[1]:
        assert int(p.answer) == brute(p.problem), p


def test_heldout_disjoint_from_train_and_sizes(splits):
    train, held = splits
    assert not {p.problem for p in train} & {p.problem for p in held}
    assert Counter(p.group for p in held) == {g: 400 for g in tasks.SKILLS}
    assert len(train) == CFG.train_size
    assert len({p.id for p in train}) == len(train) and len({p.id for p in held}) == len(held)
    # held-out spread evenly over levels within each group
    levels = Counter((p.group, tasks.cell(p)) for p in held)
    for group, specs in tasks.SKILLS.items():
        counts = [levels[group, i] for i in range(len(specs))]
        assert max(counts) - min(counts) <= 1, (group, counts)


def test_ids_stable_and_seeded(splits):
    again = tasks.heldout_split(CFG)
    assert [p.id for p in again] == [p.id for p in splits[1]]
    other = tasks.heldout_split(tasks.TaskConfig(seed=1))
    assert {p.id for p in other} != {p.id for p in splits[1]}
    for p in splits[0][:50] + splits[1][:50]:
        source, split, level, text = p.id.split(":")
        assert (source, text) == (f"lmstudy_{p.group}", p.problem) and split in ("train", "test")
        assert p.source == source and level == f"L{tasks.cell(p) + 1}"


def test_training_pool_heavy_tailed(splits):
    by_group = Counter(p.group for p in splits[0])
    ordered = [by_group[g] for g in tasks.GROUP_WEIGHTS]
    assert ordered == sorted(ordered, reverse=True) and ordered[0] > 4 * ordered[-1]
    levels = Counter((p.group, tasks.cell(p)) for p in splits[0])
    for group, specs in tasks.SKILLS.items():
        counts = [levels[group, i] for i in range(len(specs))]
        assert counts == sorted(counts, reverse=True), (group, counts)


def test_subtraction_has_a_borrow_and_is_nonnegative(splits):
    for p in splits[0] + splits[1]:
        if p.group == "sub":
            a, b = map(int, p.problem[:-1].split("-"))
            assert a >= b
            assert any(int(x) < int(y) for x, y in zip(str(a)[::-1], str(b).zfill(len(str(a)))[::-1]))


def test_supervised_stream_avoids_heldout(splits):
    held = {p.problem for p in splits[1]}
    stream = tasks.sample_supervised(np.random.default_rng(0), 3000, held)
    assert not {p.problem for p in stream} & held
    assert all(int(p.answer) == brute(p.problem) for p in stream)


def test_bad_config_is_a_clear_error():
    with pytest.raises(ValueError, match="train_size"):
        tasks.TaskConfig(train_size=0)
    with pytest.raises(ValueError, match="heldout_per_group"):
        tasks.TaskConfig(heldout_per_group=0)


def test_reward_accepts_boxed_gold_and_rejects_wrong(splits):
    reward = pytest.importorskip("real_runs.rewards.math")
    sample = splits[1][::40]
    answers = [p.answer for p in sample]
    good = reward.MathReward().score([tasks.boxed(a) for a in answers], answers)
    bad = reward.MathReward().score([tasks.boxed(str(int(a) + 1)) for a in answers], answers)
    assert np.all(good.rewards_R == 1.0) and np.all(bad.rewards_R == -1.0)


def _enumerate(group: str, level: int) -> set[str]:
    """Every distinct problem of a small level, by exhaustive enumeration of the operand ranges."""
    def digits(n: int) -> range:
        return range(10 ** (n - 1) if n > 1 else 0, 10**n)
    spec = tasks.SKILLS[group][level]
    if group == "sub":
        pairs = ((a, b) for a in digits(2) for b in digits(2) if a >= b and tasks._has_borrow(a, b))
    elif group == "add":
        pairs = ((a, b) for a in digits(2) for b in digits(2))
    elif group == "mul":
        pairs = ((a, b) for a in digits(1) for b in digits(2))
    elif group == "chain":
        pairs = ((a, b, c) for a in digits(1) for b in digits(1) for c in digits(1))
    else:
        pairs = ((a, m) for a in digits(2) for m in range(2, 10))
    return {spec.template.format(*ops) for ops in pairs}


@pytest.mark.parametrize("group", ["sub", "add", "mul", "chain", "mod"])
def test_space_is_a_lower_bound_on_distinct_problems(group):
    """Pool sizing relies on space <= the true number of distinct problems (else drawing never ends)."""
    distinct = _enumerate(group, 0)
    assert tasks.SKILLS[group][0].space <= len(distinct)
    rng = np.random.default_rng(0)
    assert all(tasks.SKILLS[group][0].template.format(*tasks.SKILLS[group][0].draw(rng)) in distinct
               for _ in range(200))

def test_large_pool_ends_and_stays_distinct_and_disjoint():
    """A pool larger than the small levels hold: capped at half of each level's room, no hang."""
    cfg = tasks.TaskConfig(train_size=20_000, heldout_per_group=50)
    train = tasks.train_split(cfg)
    texts = [p.problem for p in train]
    assert len(set(texts)) == len(texts)
    assert not set(texts) & {p.problem for p in tasks.heldout_split(cfg)}
    sub2 = sum(1 for p in train if p.group == "sub" and tasks.cell(p) == 0)
    assert 0 < sub2 <= (1620 - 17) // 2


def _columns(x: int, width: int) -> list[int]:
    return [(x // 10**i) % 10 for i in range(width)]


def test_slips_by_hand():
    assert tasks.add_no_carry(58, 67) == 15  # 8+7=15 -> 5, 5+6=11 -> 1
    assert tasks.add_no_carry(1234, 5678) == 6802  # columns 12, 10, 8, 6 -> 2, 0, 8, 6
    assert tasks.sub_smaller_from_larger(52, 38) == 26  # |2-8| = 6, |5-3| = 2
    assert tasks.sub_smaller_from_larger(503, 7) == 504  # |3-7| = 4, 0, 5
    assert tasks.mul_no_carry(7, 48) == 86  # 7*8=56 -> 6, 7*4=28 -> 8
    # columns of 23*45: 3*5=15 -> 5; (3*4 -> 2) + (2*5 -> 0) = 2; 2*4=8 -> 8
    assert tasks.mul_no_carry(23, 45) == 825
    p_chain = tasks.make_problem("chain", 0, (7, 5, 3), "train")
    p_mod = tasks.make_problem("mod", 1, (123, 7), "train")
    assert tasks.slipped_answer(p_chain) == "15" and p_chain.answer == "9"
    assert tasks.slipped_answer(p_mod) == "17" and p_mod.answer == "4"
    assert tasks.operands(tasks.make_problem("chain", 1, (12, 34, 56), "test")) == (12, 34, 56)


def test_slips_agree_with_the_right_answer_exactly_without_carry_or_borrow():
    """Brute force over all 2-digit pairs against an independent column check: the slip equals
    the right answer iff no column carries (add) / needs a borrow (sub)."""
    for a in range(10, 100):
        for b in range(10, 100):
            carry = any(x + y >= 10 for x, y in zip(_columns(a, 2), _columns(b, 2)))
            assert (tasks.add_no_carry(a, b) == a + b) == (not carry)
            if a >= b:
                borrow = any(x < y for x, y in zip(_columns(a, 2), _columns(b, 2)))
                assert (tasks.sub_smaller_from_larger(a, b) == a - b) == (not borrow)
                assert borrow == tasks._has_borrow(a, b)
    for a in range(1, 10):
        for b in range(10, 1000):
            carry = any(a * y >= 10 for y in _columns(b, 3))
            assert (tasks.mul_no_carry(a, b) == a * b) == (not carry)


def test_heldout_halves_are_disjoint_balanced_and_named_by_half():
    cfg = tasks.TaskConfig(heldout_per_group=40)
    whole = tasks.heldout_split(cfg)
    halves = tasks.heldout_halves(cfg)
    assert set(halves) == {"val", "test"}
    val, test = ({p.problem for p in halves[h]} for h in ("val", "test"))
    assert not val & test and val | test == {p.problem for p in whole}  # every held-out problem, in one half
    for half, problems in halves.items():
        assert {p.source for p in problems} == {f"lmstudy_{half}_{g}" for g in tasks.SKILLS}
        for group in tasks.SKILLS:  # the same count per group and level in both halves (up to one)
            mine = [tasks.cell(p) for p in problems if p.group == group]
            other = [tasks.cell(p) for p in halves["test" if half == "val" else "val"] if p.group == group]
            for level in set(mine) | set(other):
                assert abs(mine.count(level) - other.count(level)) <= 1
