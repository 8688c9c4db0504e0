"""The toy reward of tiny-cpu: known per-prompt odds, deterministic verdicts, never reads the math."""

from __future__ import annotations

import numpy as np
from scipy import stats

from real_runs.rewards.toy import ToyOddsReward, toy_odds


def test_success_frequency_matches_the_known_odds():
    """For each of 20 answers, 2,000 distinct responses succeed at the announced p (binomial test)."""
    reward = ToyOddsReward()
    odds = []
    for answer in [str(a) for a in range(20)]:
        p = toy_odds(answer)
        odds.append(p)
        result = reward.score([f"response {j}" for j in range(2000)], [answer] * 2000)
        assert set(np.unique(result.rewards_R)) <= {-1.0, 1.0}
        np.testing.assert_array_equal(result.successes_R, result.rewards_R > 0)
        assert stats.binomtest(int(result.successes_R.sum()), 2000, p).pvalue > 1e-4, (answer, p)
    # the odds spread over [0, 1): a uniform sample by construction
    assert stats.kstest(odds + [toy_odds(f"x{i}") for i in range(200)], "uniform").pvalue > 1e-3


def test_verdicts_are_deterministic_and_do_not_read_the_answer_in_the_text():
    reward = ToyOddsReward()
    texts = ["\\boxed{7}", "\\boxed{8}", "anything", "anything"]
    first = reward.score(texts, ["7"] * 4)
    second = reward.score(texts, ["7"] * 4)
    np.testing.assert_array_equal(first.rewards_R, second.rewards_R)
    assert first.rewards_R[2] == first.rewards_R[3]                 # same text, same prompt: one verdict
    right = reward.score(["\\boxed{7}"] * 1, ["7"]).successes_R[0]
    assert right == first.successes_R[0]                            # the right answer is not favoured


def _documented_uniform(*parts: str) -> float:
    """u(...) of the module docstring, written from it: the first 8 bytes (little-endian) of
    sha256 over "gdro-toy" and the parts joined by NUL, divided by 2^64."""
    import hashlib
    digest = hashlib.sha256("\x00".join(["gdro-toy", *parts]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64


def test_odds_and_verdicts_follow_the_documented_formula_and_the_metrics_the_mean():
    """p_i = u("odds", a_i) and response r succeeds iff u("draw", a_i, text_r) < p_i, exactly, for 40
    answers x 3 texts (the same texts under every answer: a verdict depends on both); the metrics
    hold the mean reward (0.0 for an empty batch); a length mismatch is a one-line error."""
    import pytest

    answers = [str(a) for a in range(40) for _ in range(3)]
    texts = [f"\\boxed{{{j}}} done" for _ in range(40) for j in range(3)]
    assert [toy_odds(a) for a in answers] == [_documented_uniform("odds", a) for a in answers]
    result = ToyOddsReward().score(texts, answers)
    expected = [_documented_uniform("draw", a, t) < _documented_uniform("odds", a) for t, a in zip(texts, answers)]
    assert result.successes_R.dtype == bool and result.successes_R.tolist() == expected
    assert 20 < sum(expected) < 100                               # both verdicts occur: the check can fail
    np.testing.assert_array_equal(result.rewards_R, np.where(expected, 1.0, -1.0))
    assert result.metrics == {"reward/mean": float(np.where(expected, 1.0, -1.0).mean())}
    empty = ToyOddsReward().score([], [])
    assert empty.rewards_R.size == 0 and empty.metrics == {"reward/mean": 0.0}
    with pytest.raises(ValueError, match=r"^score\(\) got 2 responses and 1 answers: give one gold answer per response$"):
        ToyOddsReward().score(["a", "b"], ["1"])
