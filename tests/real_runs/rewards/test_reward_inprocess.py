"""The reward worker's code called in-process: math_task against math-verify itself, the worker loop over a
pipe, and the numeric rule's edges. The pool runs these in worker processes, where mutation testing's call
tracing (scripts/mutation.sh) does not see them; here they run in pytest's main thread (math-verify's soft
timeouts use signal.alarm, which needs it)."""

from __future__ import annotations

import logging
import time
from fractions import Fraction

import pytest
from math_verify import LatexExtractionConfig, parse, verify
from sympy import Expr, Float, Integer

from real_runs.data import load_dataset_records
from real_runs.rewards import math_task, pool
from real_runs.rewards.verdicts import VerdictCache, decide_numbers, decorated_literal, numeric_literal, verdict_key

SOFT = 60  # the soft timeout of the real parses here: a hang guard far above their milliseconds on a loaded machine


def _math_verify(content: str, gold: str) -> int:
    """The reference: math-verify's own parse and verify of the two boxed strings, LaTeX extraction only."""
    config = [LatexExtractionConfig()]
    expected = parse(f"\\boxed{{{gold}}}", extraction_config=config, parsing_timeout=SOFT)
    predicted = parse(f"\\boxed{{{content}}}", extraction_config=config, parsing_timeout=SOFT)
    if not predicted:
        return -1
    return int(bool(verify(expected, predicted, timeout_seconds=SOFT)))


#: (boxed content, gold): equal and different forms, plain numbers (the worker's shortcut), sets, intervals,
#: percentages, relations, text, complex numbers and contents that do not parse.
PAIRS = [("\\dfrac{1}{2}", "\\frac{1}{2}"), ("0.5", "\\frac{1}{2}"), ("\\frac{1}{3}", "\\frac{1}{2}"),
         ("(-\\infty,3]", "(-\\infty, 3]"), ("(-\\infty,3)", "(-\\infty, 3]"), ("30^{\\circ}", "30"),
         ("x = 5", "5"), ("x=6", "5"), ("10 \\text{ cm}", "10"), ("1,234", "1234"), ("3, 2", "2, 3"),
         ("3.14", "\\pi"), ("\\sqrt{8}", "2\\sqrt{2}"), ("(x+1)^2", "x^2+2x+1"), ("10", "10\\%"), ("1", "-1"),
         ("1 - 12i", "1-12i"), ("1 + 12i", "1-12i"), ("\\text{(C)}", "\\text{(C)}"), ("\\text{}", "5"),
         ("\\frac{", "5"), ("100", "99.99999"), ("7", "7.00001"), ("2.718281828", "e"), ("10^{10}", "10000000000"),
         ("\\infty", "\\infty"), ("3", "\\{3\\}"), ("(1, 2)", "(1,2)"), ("x \\in [-2,7]", "[-2, 7]")]


def _math500_pairs(limit: int = 24) -> list[tuple[str, str]]:
    """MATH-500's answers (the full set or the shipped fixture rows): each against itself, with \\dfrac for
    \\frac, and against the next row's answer."""
    answers = [p.answer for p in load_dataset_records("math500")][:limit]
    own = [(a.replace("\\frac", "\\dfrac"), a) for a in answers]
    return own + list(zip(answers[1:] + answers[:1], answers))


def test_verify_boxed_gives_math_verifys_verdict_cold_and_cached(data_dir) -> None:
    """Every pair: the worker's verdict (cold parse cache, then warm) and the uncached path equal math-verify's."""
    math_task._parsed.cache_clear()
    pairs = PAIRS + _math500_pairs()
    expected = [_math_verify(c, g) for c, g in pairs]
    assert {-1, 0, 1} <= set(expected)  # the table covers all three verdicts
    for attempt in ("cold", "warm"):
        got = [math_task.verify_boxed(c, g, SOFT) for c, g in pairs]
        assert [p for p, a, b in zip(pairs, got, expected) if a != b] == [], attempt
    assert [p for p, e in zip(pairs, expected) if math_task.verify_boxed_uncached(*p, SOFT) != e] == []


def _parsed(latex: str) -> list:
    return parse(f"\\boxed{{{latex}}}", extraction_config=[LatexExtractionConfig()], parsing_timeout=SOFT)


def test_number_takes_plain_numbers_only() -> None:
    """_number: the value of a parse that is one finite plain number; None for percentages, symbols,
    relations, sets, infinities and anything that is not [expression, its string]."""
    assert math_task._number(_parsed("\\frac{1}{3}"), SOFT) == pytest.approx(1 / 3, rel=1e-15)
    assert math_task._number(_parsed("\\frac{\\pi}{2}"), SOFT) == pytest.approx(1.5707963267948966, rel=1e-15)
    assert math_task._number(_parsed("2\\sqrt{2}"), SOFT) == pytest.approx(2 * 2 ** 0.5, rel=1e-15)
    assert math_task._number(_parsed("-0.25"), SOFT) == -0.25
    for latex in ("10\\%", "1 - 12i", "x + 1", "x = 5", "\\{3, 5\\}", "(1, 2)", "\\infty", "-\\infty", "[0, 1]"):
        assert math_task._number(_parsed(latex), SOFT) is None, latex
    assert math_task._number([Integer(2), "2", "2"], SOFT) is None  # three entries
    assert math_task._number([Integer(2)], SOFT) is None
    assert math_task._number([Integer(2), Integer(2)], SOFT) is None  # no string beside the expression
    assert math_task._number(["2", "2"], SOFT) is None  # no expression
    assert math_task._number([Integer(2), "2"], SOFT) == 2


class _SlowNumber(Expr):
    """A number whose evaluation takes 5 s (interruptible: time.sleep returns to Python on a signal), then is 1."""

    def evalf(self, *args, **kwargs):  # type: ignore[override]
        time.sleep(5)
        return Float(1)


def test_number_gives_up_at_the_soft_timeout() -> None:
    """An evaluation that outlasts the soft timeout (1 s) is "not decided here" (None), not waited for, on
    either side of the shortcut: the pair goes to math-verify's own comparison."""
    assert math_task._number([_SlowNumber(), "slow"], 1) is None
    assert math_task._clearly_different([_SlowNumber(), "slow"], _parsed("5"), 1) is False
    assert math_task._clearly_different(_parsed("5"), [_SlowNumber(), "slow"], 1) is False


def test_the_soft_timeout_reaches_the_numeric_shortcut(monkeypatch) -> None:
    seen = []
    clearly_different = math_task._clearly_different
    monkeypatch.setattr(math_task, "_clearly_different", lambda g, p, t: seen.append(t) or clearly_different(g, p, t))
    assert math_task.verify_boxed("7", "8", 3) == 0 and seen == [3]


@pytest.mark.parametrize("gold,answer,different", [
    ("1", "1.0002", True), ("1", "1.00005", False),              # |a - b| against 1e-4 x 1 (at least 1)
    ("0", "0.0002", True), ("0", "0.00005", False),              # near 0 the scale is still 1
    ("10000", "10002", True), ("10000", "10000.5", False),      # against 1e-4 x the larger value
    ("10000", "10001.00005", False),                            # 1e-4 x 10001.00005 > 1.00005 > 1e-4 x 10000
    ("10001.00005", "10000", False),                            # the same either way round
    ("-10000", "-10001.00005", False), ("-10000", "-10002", True),
    ("5", "x", False), ("x", "5", False), ("10\\%", "0.5", False),  # not both plain numbers: math-verify decides
])
def test_clearly_different_is_relative_to_the_larger_value(gold: str, answer: str, different: bool) -> None:
    assert math_task._clearly_different(_parsed(gold), _parsed(answer), SOFT) is different


def test_soft_timeouts_while_parsing_and_comparing_raise_verify_timeout(monkeypatch) -> None:
    """math-verify turns its own alarm into a logged warning and "no match"; the worker raises instead, so the
    pool counts a timeout, and nothing is cached: the same pair is verified normally once parsing is fast.
    The slow steps take 3 s: past the 1 s soft timeout given, within math-verify's default of 5 s."""
    import math_verify.grader
    import math_verify.parser

    real_extract = math_verify.parser.extract_target_from_pred
    monkeypatch.setattr(math_verify.parser, "extract_target_from_pred", lambda *a, **k: time.sleep(3))
    math_task._parsed.cache_clear()
    with pytest.raises(math_task.VerifyTimeout, match="parsing the gold answer"):
        math_task.verify_boxed("\\frac{2}{4}", "\\frac{1}{2}", 1)
    with pytest.raises(math_task.VerifyTimeout, match="parsing"):
        math_task.verify_boxed_uncached("\\frac{2}{4}", "\\frac{1}{2}", 1)
    monkeypatch.setattr(math_verify.parser, "extract_target_from_pred", real_extract)
    math_task._parsed("\\frac{1}{2}", 1)  # the gold parses; the answer times out
    monkeypatch.setattr(math_verify.parser, "extract_target_from_pred", lambda *a, **k: time.sleep(3))
    with pytest.raises(math_task.VerifyTimeout, match="parsing the response"):
        math_task.verify_boxed("\\frac{2}{4}", "\\frac{1}{2}", 1)
    monkeypatch.setattr(math_verify.parser, "extract_target_from_pred", real_extract)

    monkeypatch.setattr(math_verify.grader, "sympy_expr_eq", lambda *a, **k: time.sleep(3))
    with pytest.raises(math_task.VerifyTimeout, match="comparing"):
        math_task.verify_boxed("\\frac{2}{4}", "\\frac{1}{2}", 1)
    with pytest.raises(math_task.VerifyTimeout, match="comparing"):
        math_task.verify_boxed_uncached("\\frac{2}{4}", "\\frac{1}{2}", 1)
    monkeypatch.undo()
    assert math_task.verify_boxed("\\frac{2}{4}", "\\frac{1}{2}", 1) == 1
    assert math_task.verify_boxed_uncached("\\frac{2}{4}", "\\frac{1}{2}", 1) == 1


def test_timeout_flag_fires_on_timeout_warnings_only() -> None:
    """The flag catches math-verify's "Timeout during ..." warnings (any case), not other warnings nor
    lower-level records that mention a timeout."""
    log = logging.getLogger("math_verify.grader")
    level = log.level
    log.setLevel(logging.DEBUG)  # as under an application that logs everything: the handler's own level filters
    try:
        _check_flag(log)
    finally:
        log.setLevel(level)
        math_task._FLAG.fired = False


def test_a_fresh_timeout_flag_is_down_and_ignores_records_below_warning() -> None:
    flag = math_task._TimeoutFlag()
    log = logging.getLogger("test_reward_inprocess.flag")
    log.setLevel(logging.DEBUG)
    log.addHandler(flag)
    try:
        assert flag.fired is False
        log.debug("timeout")
        log.info("timeout")
        assert flag.fired is False
        log.warning("Timeout during parsing")
        assert flag.fired is True
    finally:
        log.removeHandler(flag)


def _check_flag(log: logging.Logger) -> None:
    for record, fires in ((lambda: log.warning("Timeout during comparison"), True),
                          (lambda: log.warning("TIMEOUT"), True),
                          (lambda: log.error("timeout while parsing"), True),
                          (lambda: log.warning("Error during comparison"), False),
                          (lambda: log.info("timeout set to 5 s"), False),
                          (lambda: log.debug("Error parsing: \\text{timeout}"), False)):
        math_task._FLAG.fired = False
        record()
        assert math_task._FLAG.fired is fires


def test_worker_loop_answers_each_task_in_order_over_its_pipe(monkeypatch) -> None:
    """pool._worker_main, run here on a pipe with two chunks queued: "ready", then one (id, (status, value),
    time) per task in order (a raised exception is an "error", an exception named like a timeout a
    "timeout", with its class and message), and it returns at the None that ends the work."""
    import multiprocessing as mp
    import os

    def task(kind: str) -> str:
        if kind == "timeout":
            raise math_task.VerifyTimeout("x" * 300)
        return pool.probe(kind)

    monkeypatch.setattr(pool, "probe_for_test", task, raising=False)
    parent, child = mp.Pipe()
    parent.send([(0, ("pid",)), (1, ("raise",))])
    parent.send([(7, ("timeout",)), (3, ("sleep",))])
    parent.send(None)
    before = time.monotonic()
    pool._worker_main(child, "real_runs.rewards.pool:probe_for_test")
    after = time.monotonic()
    messages = []
    while parent.poll():
        messages.append(parent.recv())
    assert messages[0] == ("ready", None, 0.0)
    assert [(m[0], m[1]) for m in messages[1:]] == [
        (0, ("ok", str(os.getpid()))), (1, ("error", "RuntimeError: probe failure")),
        (7, ("timeout", "VerifyTimeout: " + "x" * 200)), (3, ("ok", str(os.getpid())))]
    assert all(before <= m[2] <= after for m in messages[1:])

    class Closed:  # the parent went away: recv sees the end of the pipe
        def __init__(self, error: type[BaseException]) -> None:
            self.error, self.sent = error, []

        def send(self, message) -> None:
            self.sent.append(message)

        def recv(self):
            raise self.error

    for error in (EOFError, OSError):
        conn = Closed(error)
        pool._worker_main(conn, "real_runs.rewards.pool:probe")  # type: ignore[arg-type]
        assert conn.sent == [("ready", None, 0.0)]


def test_probe_sleeps_then_answers_its_pid() -> None:
    import os

    start = time.monotonic()
    assert pool.probe("sleep", 0.2) == str(os.getpid())
    assert time.monotonic() - start >= 0.2  # a lower bound on a sleep, not a speed claim
    with pytest.raises(RuntimeError, match="probe failure"):
        pool.probe("raise")


# ----------------------------------------------------------------------------- the numeric rule's edges

def test_numeric_literal_values_against_fractions() -> None:
    """Each literal form against its value written with Fraction; the decimal flag as math-verify's rounding
    needs it."""
    cases = {"0": (Fraction(0), False), "-17": (Fraction(-17), False), "+3": (Fraction(3), False),
             "2.50": (Fraction(5, 2), True), "-.5": (Fraction(-1, 2), True), "+0.125": (Fraction(1, 8), True),
             "10.": None, "1.2.3": None, "\\frac{3}{4}": (Fraction(3, 4), False),
             "-\\frac{3}{4}": (Fraction(-3, 4), False), "\\frac{-3}{4}": (Fraction(-3, 4), False),
             "+\\tfrac{6}{-4}": (Fraction(-3, 2), False), "\\frac34": (Fraction(3, 4), False),
             "-\\dfrac12": (Fraction(-1, 2), False), "\\frac{1}{0}": None, "\\frac10": None,
             "-6/4": (Fraction(-3, 2), False), "6/0": None, "6/-4": None, "1e5": None, "\\frac{1}{2}x": None,
             "1" * 100: (Fraction(int("1" * 100)), False), "1" * 101: None}
    for text, expected in cases.items():
        assert numeric_literal(text) == expected, text


def test_decide_numbers_rounding_margin() -> None:
    """Rationals are decided exactly; a decimal within 2e-6 of the other value goes to math-verify (its
    6-decimal rounding may merge them); further apart it is "different"."""
    assert decide_numbers("0.500001", "\\frac{1}{2}") is None      # 1e-6 apart, a decimal: undecided
    assert decide_numbers("0.500002", "\\frac{1}{2}") is None      # exactly the margin: undecided
    assert decide_numbers("0.5000021", "\\frac{1}{2}") is False    # beyond it
    assert decide_numbers("\\frac{1}{2}", "0.500001") is None      # the decimal on the gold's side
    assert decide_numbers("\\frac{1000001}{2000000}", "\\frac{1}{2}") is False  # rationals: exact
    assert decide_numbers("0.4999985", "\\frac{1}{2}") is None     # below, within the margin
    assert decide_numbers("0.4999979", "\\frac{1}{2}") is False
    assert decide_numbers("x = 0.5", "\\frac{1}{2}") is True and decide_numbers("x = y", "1") is None
    assert decide_numbers("5", "x") is None and decide_numbers("\\$5", "\\$5") is None


def test_decorated_literal_cores() -> None:
    assert decorated_literal("x = 5") == "5" and decorated_literal("\\$ 36") == "36"
    assert decorated_literal("90^{\\circ}") == "90" and decorated_literal("12\\,\\text{ cm }") == "12"
    assert decorated_literal("-\\frac{1}{2} \\mbox{m}") == "-\\frac{1}{2}"
    assert decorated_literal("5") is None  # nothing to strip: not decorated
    assert decorated_literal("x = y") is None and decorated_literal("12 \\text{ furlongs}") is None


def test_verdict_key_applies_math_verifys_first_rewrites_only() -> None:
    assert verdict_key("\\cfrac{1}{2}") == "\\frac{1}{2}" and verdict_key("\\tfrac12") == "\\frac12"
    assert verdict_key("\\left[\\begin{matrix} 1 \\end{matrix}\\right]") == "\\begin{bmatrix} 1 \\end{bmatrix}"
    assert verdict_key("\\left\\{ 1 \\right\\}") == "\\{ 1 \\}" and verdict_key("\\mleft( 2 \\mright)") == "( 2 )"
    assert verdict_key("\\right) only") == ") only" and verdict_key("\\left( only") == "( only"
    assert verdict_key("x  +  1") == "x  +  1"  # inner spaces kept


def test_verdict_cache_refreshes_on_put_and_keeps_the_newest_verdict() -> None:
    cache = VerdictCache(maxsize=2)
    assert cache.maxsize == 2 and len(VerdictCache()) == 0 and VerdictCache().maxsize == 16384
    cache.put(("a", "1"), 1)
    cache.put(("b", "1"), 0)
    cache.put(("a", "1"), -1)  # a put refreshes: b is now the oldest
    cache.put(("c", "1"), 1)
    assert cache.get(("b", "1")) is None and cache.get(("a", "1")) == -1 and cache.get(("c", "1")) == 1
    cache.put(("d", "1"), 0)  # get refreshed c after a: a goes
    assert cache.get(("a", "1")) is None and len(cache) == 2
    assert cache.get(("x", "1")) is None
    cache.clear()
    assert len(cache) == 0 and cache.get(("c", "1")) is None


def test_workers_start_from_a_forkserver_on_linux_never_by_fork() -> None:
    """Plain fork is unsafe once the parent holds torch/CUDA or threads (pool module doc); the forkserver
    preloads math-verify so a replacement worker starts warm."""
    import sys

    assert pool._context().get_start_method() == ("forkserver" if sys.platform.startswith("linux") else "spawn")
