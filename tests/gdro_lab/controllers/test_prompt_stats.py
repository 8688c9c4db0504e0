"""PromptStats against a naive per-prompt record of every visit."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_stats import PromptStats
from gdro_lab.runformat.runlog import decode_state, encode_state


def random_steps(seed, steps=30, pool=12, batch=6, duplicates=False):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        index = rng.choice(pool, batch, replace=duplicates)
        counts = rng.integers(1, 20, batch)
        y = rng.random(counts.sum()) < np.repeat(rng.random(pool)[index], counts)
        yield StepFeedback([f"q{i}" for i in index], rng.integers(-1, 3, batch), counts, 2.0 * y - 1, y)


@pytest.mark.parametrize("duplicates", [False, True])
def test_history_matches_a_naive_record(duplicates):
    stats = PromptStats(decay=0.6, easy_rate=0.98, hard_rate=0.11)
    visits = defaultdict(list)  # id -> [(outcomes list, bin)]
    for fb in random_steps(3, duplicates=duplicates):
        stats.record(fb)
        start = 0
        for pid, n, b in zip(fb.prompt_ids, fb.counts_P, fb.bins_P):
            visits[pid].append((list(fb.successes_R[start:start + n]), int(b)))
            start += n
    for pid, history in visits.items():
        row = stats.rows([pid])[0]
        s = n = 0.0
        for outcomes, _ in history:
            s, n = 0.6 * s + sum(outcomes), 0.6 * n + len(outcomes)
        flat = [y for outcomes, _ in history for y in outcomes]
        easy = hard = 0
        for outcomes, _ in history:
            rate = sum(outcomes) / len(outcomes)
            easy = easy + 1 if rate >= 0.98 else 0
            hard = hard + 1 if rate <= 0.11 else 0
        assert stats.successes[row] == pytest.approx(s) and stats.trials[row] == pytest.approx(n)
        assert stats.recent_rate(np.array([row]))[0] == pytest.approx(np.mean(flat[-16:]))
        assert stats.total[row] == len(flat) and stats.visits[row] == len(history)
        assert stats.bin[row] == history[-1][1]
        assert (stats.easy_streak[row], stats.hard_streak[row]) == (easy, hard)


def test_unseen_rows_and_state_round_trip():
    stats = PromptStats(decay=0.5)
    for fb in random_steps(5, steps=10):
        stats.record(fb)
    rows = stats.rows(["q1", "never"])
    assert rows[1] == -1 and np.isnan(stats.recent_rate(rows)[1]) and stats.take("trials", rows, -7.0)[1] == -7.0
    restored = PromptStats(decay=0.5)
    restored.load_state_dict(decode_state(json.loads(json.dumps(encode_state(stats.state_dict())))))
    for fb in random_steps(6, steps=5):
        stats.record(fb)
        restored.record(fb)
    for name in ("successes", "trials", "recent", "total", "easy_streak", "bin"):
        np.testing.assert_array_equal(getattr(stats, name), getattr(restored, name))
