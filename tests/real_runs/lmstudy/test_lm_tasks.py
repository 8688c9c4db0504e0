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
    reward = pytest.importorskip("real_runs.reward")
    sample = splits[1][::40]
    answers = [p.answer for p in sample]
    good = reward.MathReward().score([tasks.boxed(a) for a in answers], answers)
    bad = reward.MathReward().score([tasks.boxed(str(int(a) + 1)) for a in answers], answers)
    assert np.all(good.rewards_R == 1.0) and np.all(bad.rewards_R == -1.0)
