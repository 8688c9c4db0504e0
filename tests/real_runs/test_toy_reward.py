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
