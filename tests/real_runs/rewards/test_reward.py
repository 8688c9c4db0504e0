"""Rewards: right on real data (MATH-500), a table of formats, and never hanging on bad output."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from real_runs.data import load_dataset_records
from real_runs.rewards.choice import ChoiceReward, extract_choice, reward_kind
from real_runs.rewards.math import MathReward, extract_last_boxed
from real_runs.rewards.pool import PoolStartError, TimedPool
from real_runs.types import Reward

#: (gold answer, response, accepted?)
FORMATS = [
    ("\\frac{1}{2}", "so \\boxed{\\dfrac{1}{2}}", True),
    ("\\frac{1}{2}", "\\boxed{0.5}", True),
    ("\\frac{1}{2}", "\\boxed{1/2}", True),
    ("\\frac{1}{2}", "\\boxed{\\frac12}", True),
    ("\\frac{1}{2}", "\\boxed{\\frac{1}{3}}", False),
    ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\tfrac{\\sqrt3}{2}}", True),
    ("(-\\infty, 3]", "\\boxed{(-\\infty,3]}", True),
    ("(-\\infty, 3]", "\\boxed{(-\\infty,3)}", False),
    ("[2, 5)", "\\boxed{[2,5)}", True),
    ("30^\\circ", "\\boxed{30}", True),
    ("30", "\\boxed{30^{\\circ}}", True),
    ("336^\\circ", "\\boxed{336}", True),  # the AIME25 caveat in its README
    ("5", "\\boxed{x = 5}", True),
    ("5", "\\boxed{x=6}", False),
    ("x=5", "\\boxed{5}", True),
    ("10", "\\boxed{10 \\text{ cm}}", True),
    ("10", "\\boxed{10\\,\\mathrm{cm}}", True),
    ("1234", "\\boxed{1,234}", True),
    ("1234567", "\\boxed{1{,}234{,}567}", True),
    ("1234", "\\boxed{1,235}", False),
    ("3", "First \\boxed{2}, then corrected: \\boxed{3}", True),  # the last box counts
    ("2", "First \\boxed{2}, then corrected: \\boxed{3}", False),
    ("23", "\\boxed{023}", True),
    ("\\text{(C)}", "\\boxed{\\text{(C)}}", True),
    ("2, 3", "\\boxed{3, 2}", True),
    ("\\pi", "\\boxed{3.14}", False),
    ("2\\sqrt{2}", "\\boxed{\\sqrt{8}}", True),
    ("x^2+2x+1", "\\boxed{(x+1)^2}", True),
    ("-1", "\\boxed{1}", False),
    ("10\\%", "\\boxed{10}", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{(3,\\frac{\\pi}{2})}", True),
    ("5", "The answer is 5.", False),  # no box: no answer
    ("5", "\\fbox{5}", True),
]


def test_reward_classes_fit_the_protocol(math_reward: MathReward) -> None:
    assert isinstance(math_reward, Reward) and isinstance(ChoiceReward(), Reward)
    assert reward_kind("gpqa") == "choice" and reward_kind("math500") == "math"


@pytest.mark.parametrize("shortcut", [True, False])
def test_table_of_formats(math_reward: MathReward, shortcut: bool) -> None:
    if shortcut:
        result = math_reward.score([r for _, r, _ in FORMATS], [g for g, _, _ in FORMATS])
    else:
        with MathReward(timeout_s=math_reward.timeout_s, exact_match_shortcut=False) as plain:
            result = plain.score([r for _, r, _ in FORMATS], [g for g, _, _ in FORMATS])
    expected = np.array([ok for _, _, ok in FORMATS])
    wrong = [FORMATS[i] for i in np.flatnonzero(result.successes_R != expected)]
    assert wrong == []
    assert np.array_equal(result.rewards_R, np.where(expected, 1.0, -1.0))
    assert result.metrics["reward/no_answer"] == 1
    assert result.metrics["reward/mean"] == pytest.approx(np.where(expected, 1.0, -1.0).mean())


def test_integer_shortcut_skips_math_verify(math_reward: MathReward) -> None:
    result = math_reward.score(["\\boxed{042}", "\\boxed{41}", "\\boxed{-7}", "\\boxed{7}", "\\boxed{6/3}"],
                               ["42", "42", "-7", "-7", "2"])
    assert result.successes_R.tolist() == [True, False, True, False, True]
    assert result.metrics["reward/shortcut"] == 4  # the fraction went to math-verify


def test_extract_last_boxed() -> None:
    assert extract_last_boxed("a \\boxed{1} b \\boxed{\\frac{2}{3}} c") == "\\frac{2}{3}"
    assert extract_last_boxed("\\boxed{{a}{b}}") == "{a}{b}"
    assert extract_last_boxed("no box") is None
    assert extract_last_boxed("\\boxed{unclosed") is None
    assert extract_last_boxed("\\boxed{" + "x" * 2000 + "}", max_chars=1000) is None


def _normalised(answer: str) -> str:
    """An independent, crude equality: spaces, \\left/\\right, "x=" and \\text removed."""
    text = re.sub(r"\\(left|right|text|mbox)", "", answer)
    text = re.sub(r"^[a-z]\s*=", "", text.replace(" ", ""))
    return text.replace("{", "").replace("}", "").replace("\\!", "")


@pytest.mark.slow
def test_math500_reference_solutions(shared_data: Path) -> None:
    """Each reference solution is accepted against its own answer (>= 99%) and rejected against
    the next row's answer except where the two answers are genuinely equal. math-verify does all
    the work here (no exact-match shortcut)."""
    problems = load_dataset_records("math500")
    solutions = [json.loads(line)["solution"] for line in open(shared_data / "math500/test.jsonl")]
    answers = [p.answer for p in problems]
    next_answers = answers[1:] + answers[:1]
    with MathReward(timeout_s=10.0, num_workers=2, exact_match_shortcut=False) as reward:
        own = reward.score(solutions, answers)
        other = reward.score(solutions, next_answers)
    assert own.successes_R.mean() >= 0.99, own.metrics
    accepted = {i for i in np.flatnonzero(other.successes_R)}
    genuinely_equal = {i for i in range(500) if _normalised(answers[i]) == _normalised(next_answers[i])}
    assert accepted == genuinely_equal
    assert 0 < len(genuinely_equal) < 10  # (5 vs x=5, 7 vs 7, 3 vs 3)


def _timed_score(reward: MathReward, responses: list[str], answers: list[str]):
    start = time.monotonic()
    result = reward.score(responses, answers)
    return result, time.monotonic() - start


def _bounded(reward: MathReward) -> float:
    """A wall-clock bound that shows a call was cut off by the hard timeout, never a hang or a task run to
    its end (a power tower never ends), yet holds on a loaded machine: four times the hard timeout plus
    the start of a replacement worker (these asserts used the timeout + 1 s and flaked under load)."""
    return 4 * reward.timeout_s + 10.0


@pytest.mark.parametrize("name,response,counter", [
    ("nested braces", "\\boxed{" + "{" * 100_000 + "1" + "}" * 100_000 + "}", "reward/no_answer"),
    ("nested braces, no box", "{" * 100_000 + "}" * 100_000, "reward/no_answer"),
    ("power tower", "\\boxed{9^{9^{9^{9^{9}}}}}", "reward/timeouts"),
    ("1 MB without a box", "x" * 1_000_000, "reward/no_answer"),
    ("1 MB inside a box", "\\boxed{" + "1+" * 500_000 + "1}", "reward/no_answer"),
    ("broken LaTeX", "\\boxed{\\frac{1}{", "reward/no_answer"),
    ("broken LaTeX, balanced", "\\boxed{\\frac{{1}{2}}\\left( \\sqrt[}", None),
    ("empty text box", "\\boxed{\\text{}}", "reward/unparsed"),
])
def test_pathological_outputs_return_in_time(math_reward: MathReward, name: str, response: str,
                                             counter: str) -> None:
    result, elapsed = _timed_score(math_reward, [response], ["5"])
    assert elapsed <= _bounded(math_reward), name
    assert result.rewards_R.tolist() == [-1.0] and result.successes_R.tolist() == [False]
    if counter is None:  # math-verify falls back to a string that matches nothing
        assert result.metrics["reward/timeouts"] + result.metrics["reward/errors"] == 0
    else:
        assert result.metrics[counter] == 1, result.metrics


def test_huge_response_with_a_right_answer_is_scored(math_reward: MathReward) -> None:
    result, elapsed = _timed_score(math_reward, ["x" * 1_000_000 + " so \\boxed{\\dfrac{10}{4}}"],
                                   ["\\frac{5}{2}"])
    assert result.successes_R.tolist() == [True] and elapsed <= _bounded(math_reward)


def test_worker_killed_mid_call_is_replaced(math_reward: MathReward) -> None:
    """Kill a worker while it scores: that response counts as an error, the pool recovers."""
    import os
    import signal

    before = set(math_reward._pool.pids)
    timer = threading.Timer(0.3, lambda: os.kill(sorted(before)[0], signal.SIGKILL))
    timer.start()
    towers = ["\\boxed{9^{9^{9^{9^{9}}}}}", "\\boxed{8^{8^{8^{8^{8}}}}}"]  # two distinct pairs: one per worker
    result, elapsed = _timed_score(math_reward, towers, ["5", "5"])
    timer.join()
    assert elapsed <= _bounded(math_reward)
    assert result.successes_R.tolist() == [False, False]
    assert result.metrics["reward/errors"] == 1
    assert result.metrics["reward/errors"] + result.metrics["reward/timeouts"] == 2
    assert sorted(before)[0] not in math_reward._pool.pids
    again = math_reward.score(["\\boxed{\\frac{2}{4}}"] * 4, ["\\frac{1}{2}"] * 4)
    assert again.successes_R.all()


def test_pool_hard_timeout_crash_and_exception() -> None:
    with TimedPool("real_runs.rewards.pool:probe", num_workers=2, timeout_s=1.0) as pool:
        first = set(pool.pids)
        start = time.monotonic()
        out = pool.map([("sleep", 120.0), ("raise",), ("exit",), ("pid",), ("pid",)])
        elapsed = time.monotonic() - start
        assert [status for status, _ in out] == ["timeout", "error", "error", "ok", "ok"]
        assert out[1][1].startswith("RuntimeError") and out[2][1] == "worker process died"
        # The sleeping task alone would take 120 s: finishing in under half of that shows it was killed
        # at its 1 s timeout. The slack covers two replacement workers starting on a loaded machine
        # (5.2 s measured beside CI's installs, 13.1 s on a loaded 2-core machine, where a 10 s bound flaked).
        assert elapsed < 60.0
        assert pool.restarts == 2
        assert {int(v) for _, v in out[3:]} <= first | set(pool.pids)  # answered by this pool's workers
        assert pool.map([]) == []


def test_pool_chunks_keep_each_tasks_own_deadline() -> None:
    """Tasks go to a worker four at a time: a chunk may take longer than the timeout as long as each of its
    tasks does not; a task that hangs mid-chunk is killed at its own deadline, and the tasks queued behind
    it on that worker are run again (on the replacement), not lost."""
    with TimedPool("real_runs.rewards.pool:probe", num_workers=1, timeout_s=1.5) as pool:
        pool.map([("pid",)])  # started
        out = pool.map([("sleep", 0.4)] * 8, chunk=4)  # 1.6 s per chunk, 0.4 s per task
        assert [status for status, _ in out] == ["ok"] * 8 and pool.restarts == 0
        start = time.monotonic()
        out = pool.map([("pid",), ("sleep", 120.0), ("pid",), ("pid",), ("pid",), ("pid",)], chunk=4)
        elapsed = time.monotonic() - start
        assert [status for status, _ in out] == ["ok", "timeout", "ok", "ok", "ok", "ok"]
        assert pool.restarts == 1 and elapsed < 60.0  # killed near its 1.5 s deadline, not after 120 s
        first, rerun = int(out[0][1]), {int(value) for _, value in out[2:]}
        assert rerun == set(pool.pids) and first not in rerun  # the queued tasks ran on the replacement


def test_pool_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="num_workers=0"):
        TimedPool("real_runs.rewards.pool:probe", num_workers=0)
    with pytest.raises(ValueError, match="timeout_s=0"):
        TimedPool("real_runs.rewards.pool:probe", timeout_s=0)


def test_mismatched_lengths_raise(math_reward: MathReward) -> None:
    with pytest.raises(ValueError, match="2 responses and 1 answers"):
        math_reward.score(["a", "b"], ["1"])


@pytest.mark.slow
def test_ten_thousand_responses_without_a_hang(data_dir: Path, math_reward: MathReward) -> None:
    problems = load_dataset_records("math500")
    responses, answers, kinds = [], [], []
    for i in range(10_000):
        problem, other = problems[i % len(problems)], problems[(i + 7) % len(problems)]
        kind = i % 4 if i % 1000 else 4
        responses.append([f"so \\boxed{{{problem.answer}}}", f"... \\boxed{{{other.answer}}}",
                          "I give up.", f"\\boxed{{{problem.answer}", "\\boxed{9^{9^{9^{9^{9}}}}}"][kind])
        answers.append(problem.answer if kind < 4 else "5")
        kinds.append(kind)
    kinds_R = np.array(kinds)
    result = math_reward.score(responses, answers)
    assert result.successes_R[kinds_R == 0].all()
    assert not result.successes_R[kinds_R >= 2].any()
    assert result.successes_R[kinds_R == 1].mean() < 0.02
    assert result.metrics["reward/no_answer"] == np.sum((kinds_R == 2) | (kinds_R == 3))
    # The 10 power towers hit the timeout; ordinary responses almost never do.
    assert 10 <= result.metrics["reward/timeouts"] + result.metrics["reward/errors"] <= 20


def test_choice_reward() -> None:
    reward = ChoiceReward()
    responses = ["... so \\boxed{B}", "ANSWER: c", "The answer is (D).", "I think A) but \\boxed{C}",
                 "\\boxed{E}", "no letter", "x" * 1_000_000 + "ANSWER: A", "\\boxed{\\text{A}}"]
    answers = ["B) foo", "C) bar", "D) baz", "A) qux", "B) x", "A) y", "A) z", "A) w"]
    result = reward.score(responses, answers)
    assert result.successes_R.tolist() == [True, True, True, False, False, False, True, True]
    assert result.metrics["reward/no_answer"] == 2
    assert extract_choice("ANSWER: A then \\boxed{C}") == "C"


def test_choice_reward_letters_tail_and_metrics() -> None:
    """Only A-D count by default (an "X" is no answer), a ChoiceReward's own letters reach the
    extraction, only the last 2,000 characters are searched, and the metrics are exactly these."""
    assert extract_choice("ANSWER: X") is None and extract_choice("ANSWER: E") is None
    assert extract_choice("ANSWER: E", letters="ABCDE") == "E"
    tail = "x" * 1992
    assert extract_choice("\\boxed{B}" + tail) is None               # the box starts 2,001 characters from the end
    assert extract_choice("\\boxed{B}" + tail[1:]) == "B"            # exactly 2,000: found
    five = ChoiceReward(letters="ABCDE").score(["\\boxed{E}", "ANSWER: X", "\\boxed{A}"], ["E) five", "A) one", "B) two"])
    assert five.successes_R.tolist() == [True, False, False] and five.rewards_R.tolist() == [1.0, -1.0, -1.0]
    assert five.metrics == {"reward/timeouts": 0.0, "reward/errors": 0.0, "reward/no_answer": 1.0,
                            "reward/mean": pytest.approx(-1 / 3)}


def test_pool_interrupted_call_leaves_no_stale_answers(monkeypatch) -> None:
    """A call aborted mid-way (e.g. Ctrl-C) replaces its busy workers; the next call is clean."""
    with TimedPool("real_runs.rewards.pool:probe", num_workers=2, timeout_s=5.0) as pool:
        deadline = time.monotonic() + 60
        while not all(w.ready for w in pool._workers) and time.monotonic() < deadline:
            pool.map([("sleep", 0.05)])  # until both workers have started
        before = set(pool.pids)
        real_wait = pool._wait_and_collect
        calls = {"n": 0}

        def interrupt(results, slots):
            calls["n"] += 1
            raise KeyboardInterrupt

        monkeypatch.setattr(pool, "_wait_and_collect", interrupt)
        with pytest.raises(KeyboardInterrupt):
            pool.map([("sleep", 0.5), ("sleep", 0.5)])
        monkeypatch.setattr(pool, "_wait_and_collect", real_wait)
        assert calls["n"] == 1 and not before & set(pool.pids) and pool.restarts == 2
        out = pool.map([("pid",)] * 4)
        assert [status for status, _ in out] == ["ok"] * 4
        assert {int(v) for _, v in out} <= set(pool.pids)


def test_pool_with_a_module_that_does_not_import() -> None:
    pool = TimedPool("real_runs.no_such_module:task", num_workers=1, timeout_s=1.0)
    try:
        with pytest.raises(PoolStartError, match="exited while starting"):
            pool.map([("x",)])
    finally:
        pool.close()


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LATEXISH = st.text(alphabet=list("\\{}()[]^_$0123456789xyz+-*/=,. boxedfracsqrtlefightinfty"),
                    max_size=120)


@settings(max_examples=25, deadline=None)
@given(responses=st.lists(_LATEXISH.map(lambda t: "\\boxed{" + t), min_size=1, max_size=6),
       answer=st.sampled_from(["5", "\\frac{1}{2}", "(-\\infty, 3]", "x^2+1"]))
def test_random_latex_never_raises(math_reward: MathReward, responses: list[str], answer: str) -> None:
    start = time.monotonic()
    result = math_reward.score(responses, [answer] * len(responses))
    assert set(result.rewards_R.tolist()) <= {-1.0, 1.0}
    assert np.array_equal(result.rewards_R == 1.0, result.successes_R)
    # Each response is bounded by the hard timeout; two workers share the list (slack as in _bounded).
    assert time.monotonic() - start <= math_reward.timeout_s * len(responses) + _bounded(math_reward)


def test_model_output_is_never_run_as_code(math_reward: MathReward, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payloads = [f"\\boxed{{__import__('os').system('touch {marker}')}}",
                f"\\boxed{{exec(\"open('{marker}', 'w')\")}}",
                f"so 1 + __import__('pathlib').Path('{marker}').touch() \\boxed{{2**3}}"]
    result = math_reward.score(payloads, ["0", "0", "0"])
    assert result.successes_R.tolist() == [False, False, False]
    assert not marker.exists()


# ----------------------------------------------------------------------------- deciding each pair once (issue 23)

from real_runs.rewards.realistic import realistic_batch, variants  # noqa: E402
from real_runs.rewards.verdicts import VerdictCache, decide_numbers, numeric_literal, verdict_key  # noqa: E402

#: (answer, gold, what math-verify says): the numeric decisions must agree; None = left to math-verify
NUMERIC = [
    ("0.5", "\\frac{1}{2}", True), ("\\frac12", "0.5", True), ("-\\dfrac{3}{4}", "-0.75", True),
    ("\\frac{-3}{4}", "-\\frac{3}{4}", True), ("1.50", "\\frac{3}{2}", True), (".25", "\\frac14", True),
    ("6/3", "2", True), ("0.25", "\\frac{1}{2}", False), ("\\frac{2}{3}", "\\frac{3}{2}", False),
    ("0.333333", "\\frac{1}{3}", None), ("0.3333", "\\frac{1}{3}", False), ("5.0", "5", True), ("4.9", "5", False),
    ("\\frac{1}{0}", "1", None), ("1,5", "1.5", None), ("10\\%", "10", None), ("x=5", "5", True),
    ("x = 6", "5", False), ("90^\\circ", "90", True), ("12 \\text{ cm}", "12", True), ("\\$36", "13", False),
    ("5 \\text{ and }", "5", None), ("x = 2y", "2", None), ("5 \\text{ percent}", "5", None),
]

#: Decorated literals decided without math-verify (verdicts.decorated_literal): prefix x decoration x core, and
#: every unit word once; each is checked against math-verify below (a larger sweep of the same grammar, 63,648
#: pairs, found no disagreement when the rule was written).
_CORES = ["5", "-2", "3.5", "\\frac{1}{2}", "\\dfrac{7}{2}", "1/4"]
_DECORATED = ([f"{prefix}{core}{suffix}" for prefix in ("", "x = ", "\\$") for core in _CORES
               for suffix in ("", "^\\circ", "^{\\circ}", " \\text{ cm}", "\\,\\mbox{m}") if prefix or suffix]
              + [f"12 \\text{{ {unit} }}" for unit in __import__("real_runs.rewards.verdicts", fromlist=["_UNITS"])._UNITS.split("|")])
_DECORATED_GOLDS = ["5", "-2", "3.5", "\\frac{1}{2}", "0.25", "12", "7"]


def test_numeric_literals_and_keys() -> None:
    assert numeric_literal("-\\dfrac{6}{4}") == (numeric_literal("-1.5")[0], False)
    assert numeric_literal("1 / 2") is None and numeric_literal("\\frac{a}{2}") is None
    for answer, gold, expected in NUMERIC:
        assert decide_numbers(answer, gold) is expected, (answer, gold)
    assert verdict_key("  \\dfrac{1}{2} ") == "\\frac{1}{2}"
    assert verdict_key("\\left( 1, \\tfrac{\\pi}{2} \\right)") == "( 1, \\frac{\\pi}{2} )"
    assert verdict_key("\\left. x \\right|") == "\\left. x |"  # \left. is not one of math-verify's pairs


def test_numeric_decisions_agree_with_math_verify(math_reward: MathReward) -> None:
    """Every pair the numeric rule decides gets the same verdict from math-verify itself."""
    decided = [(a, g, e) for a, g, e in NUMERIC if e is not None]
    with MathReward(timeout_s=math_reward.timeout_s, num_workers=2, exact_match_shortcut=False, cache_size=0) as plain:
        result = plain.score([f"\\boxed{{{a}}}" for a, _, _ in decided], [g for _, g, _ in decided])
    assert result.successes_R.tolist() == [e for _, _, e in decided]


def test_decorated_literals_agree_with_math_verify(math_reward: MathReward) -> None:
    """Every decorated literal ("x = 5", "\\$5", "5^\\circ", "5 \\text{ cm}") the numeric rule decides gets the
    verdict math-verify gives the raw answer."""
    pairs = [(answer, gold) for answer in _DECORATED for gold in _DECORATED_GOLDS]
    decided = [(a, g, decide_numbers(a, g)) for a, g in pairs]
    decided = [(a, g, e) for a, g, e in decided if e is not None]
    assert len(decided) > 0.9 * len(pairs) and any(e for _, _, e in decided)
    with MathReward(timeout_s=math_reward.timeout_s, num_workers=2, exact_match_shortcut=False, cache_size=0) as plain:
        result = plain.score([f"\\boxed{{{a}}}" for a, _, _ in decided], [g for _, g, _ in decided])
    assert result.metrics["reward/timeouts"] + result.metrics["reward/errors"] == 0
    assert result.successes_R.tolist() == [e for _, _, e in decided]


#: (answer, gold): plain numbers, percentages, floats near and far, constants, radicals, complex numbers, sets
_NUMBER_PAIRS = [("22", "1 - 12i"), ("\\frac{5}{13}", "\\frac{\\sqrt{3}}{3}"), ("100", "2\\sqrt{5}"), ("-120", "\\pi"),
                 ("3.14", "\\pi"), ("3.1415927", "\\pi"), ("0.333333", "\\frac{1}{3}"), ("0.3333", "\\frac13"),
                 ("10", "10\\%"), ("0.1", "10\\%"), ("9\\%", "9"), ("\\sqrt{8}", "2\\sqrt{2}"), ("2.8284", "2\\sqrt2"),
                 ("1+274i", "1 + 274i"), ("3, 5", "3"), ("\\{3\\}", "3"), ("(1, 2)", "1"), ("12\\pi", "480"),
                 ("11,111,111,100", "(15,-29)"), ("10^{10}", "10000000000"), ("\\infty", "5"), ("e", "2.718281828"),
                 ("\\sin 1", "0.84"), ("\\sin 1", "0.841471"), ("-\\frac{\\pi}{6}", "\\dfrac{17}{50}"), ("0", "0.00001")]


def test_plain_numbers_decided_in_the_worker_agree_with_math_verify(monkeypatch) -> None:
    """The worker skips math-verify's comparison for two clearly different plain numbers: every verdict
    equals math-verify's own (its uncached call), and the shortcut is taken for some of them."""
    from real_runs.rewards import math_task

    taken = []
    clearly_different = math_task._clearly_different
    monkeypatch.setattr(math_task, "_clearly_different", lambda *a: taken.append(clearly_different(*a)) or taken[-1])
    for answer, gold in _NUMBER_PAIRS:
        assert math_task.verify_boxed(answer, gold, 5) == math_task.verify_boxed_uncached(answer, gold, 5), (answer, gold)
    assert 5 <= sum(taken) < len(_NUMBER_PAIRS)


def test_verdict_cache_is_bounded_and_least_recently_used() -> None:
    cache = VerdictCache(maxsize=2)
    cache.put(("a", "1"), 1)
    cache.put(("b", "1"), 0)
    assert cache.get(("a", "1")) == 1  # a is now the most recent
    cache.put(("c", "1"), -1)
    assert cache.get(("b", "1")) is None and cache.get(("a", "1")) == 1 and len(cache) == 2
    off = VerdictCache(maxsize=0)
    off.put(("a", "1"), 1)
    assert off.get(("a", "1")) is None
    with pytest.raises(ValueError, match="cache size"):
        VerdictCache(-1)


def test_each_distinct_pair_is_verified_once_then_cached(math_reward: MathReward) -> None:
    responses = ["so \\boxed{\\dfrac{\\sqrt{3}}{2}}", "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\boxed{\\sqrt{3}/2}",
                 "\\boxed{\\frac{\\sqrt{2}}{2}}", "\\boxed{\\frac{\\sqrt{3}}{2}}.", "\\boxed{0.5}"]
    golds = ["\\frac{\\sqrt3}{2}"] * 5 + ["\\frac{1}{2}"]
    with MathReward(timeout_s=math_reward.timeout_s, num_workers=2) as reward:
        first = reward.score(responses, golds)
        assert first.successes_R.tolist() == [True, True, True, False, True, True]
        # \dfrac and \frac share a key; the decimal is decided without math-verify
        assert first.metrics["reward/verified"] == 3 and first.metrics["reward/numeric"] == 1
        second = reward.score(responses, golds)
        assert second.successes_R.tolist() == first.successes_R.tolist()
        assert second.metrics["reward/verified"] == 0 and second.metrics["reward/cached"] == 5


def test_realistic_batch_is_seeded_and_repeats_like_a_policy(shared_data: Path) -> None:
    golds = [p.answer for p in load_dataset_records("math500")]
    batch = realistic_batch(golds, 64, seed=3)
    assert batch.responses == realistic_batch(golds, 64, seed=3).responses
    assert batch.responses != realistic_batch(golds, 64, seed=4).responses
    per_prompt = np.bincount(batch.prompt_R)
    assert per_prompt.min() >= 4 and per_prompt.max() <= 12 and per_prompt.size == 64
    answers = [extract_last_boxed(r) for r in batch.responses]
    distinct = {(a, g) for a, g in zip(answers, batch.answers)}
    assert len(distinct) < 0.5 * len(answers)  # final answers repeat within a prompt
    assert sum(a is None for a in answers) > 0  # some responses are cut off before the box closes
    assert variants("\\frac{1}{2}")[:1] == ["\\frac{1}{2}"] and "0.5" in variants("\\frac{1}{2}")


def _reference_verdicts(pool: TimedPool, responses: list[str], golds: list[str], soft: int) -> list[bool]:
    """The path of commit 1b2c5da, written out: extraction, its two shortcuts, else math-verify on each response."""
    from real_runs.rewards.math import _shortcut

    out, tasks, rows = [False] * len(responses), [], []
    for row, (response, gold) in enumerate(zip(responses, golds)):
        content, gold = extract_last_boxed(response), gold.strip()
        if content is None or not gold:
            continue
        if (decided := _shortcut(content, gold)) is not None:
            out[row] = decided
        else:
            tasks.append((content, gold, soft))
            rows.append(row)
    for row, (status, value) in zip(rows, pool.map(tasks)):
        out[row] = status == "ok" and value == 1
    return out


@pytest.mark.slow
def test_verdicts_identical_to_the_uncached_path(shared_data: Path) -> None:
    """MATH-500's self-check (each solution against its own and the next row's answer) and the realistic
    batch: the deduplicated, cached, numeric-shortcut path gives every verdict the per-response path gives,
    on a cold cache and again on a warm one."""
    problems = load_dataset_records("math500")
    solutions = [json.loads(line)["solution"] for line in open(shared_data / "math500/test.jsonl")]
    answers = [p.answer for p in problems]
    batch = realistic_batch(answers, 256, seed=1)
    cases = [(solutions, answers), (solutions, answers[1:] + answers[:1]), (batch.responses, batch.answers)]
    with TimedPool("real_runs.rewards.math_task:verify_boxed_uncached", num_workers=2, timeout_s=20.0) as pool, \
            MathReward(timeout_s=20.0, num_workers=2) as reward:
        for responses, golds in cases:
            expected = _reference_verdicts(pool, responses, golds, reward.soft_timeout)
            cold = reward.score(responses, golds)
            assert cold.metrics["reward/timeouts"] + cold.metrics["reward/errors"] == 0
            assert cold.successes_R.tolist() == expected
            warm = reward.score(responses, golds)
            assert warm.successes_R.tolist() == expected and warm.metrics["reward/verified"] == 0
