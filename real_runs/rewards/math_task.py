"""The math-verify comparison that runs inside a reward worker's main thread.

math-verify's soft timeouts (``signal.alarm``) only log "Timeout during ..."; we turn that record into
:class:`VerifyTimeout`, so the pool counts it. What an alarm cannot interrupt meets the pool's hard timeout.
"""

from __future__ import annotations

import cmath
import functools
import logging

from math_verify import LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException
from math_verify.utils import timeout
from sympy import Expr, UnevaluatedExpr

#: LaTeX extraction only: math-verify's plain-expression fallback hands regex-matched arithmetic
#: to sympy's ``parse_expr`` (which uses ``eval``); the boxed content is LaTeX anyway.
_LATEX_ONLY = [LatexExtractionConfig()]


class VerifyTimeout(Exception):
    """math-verify reported a soft timeout while parsing or comparing."""


class _TimeoutFlag(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.fired = False

    def emit(self, record: logging.LogRecord) -> None:
        if "timeout" in str(record.msg).lower():
            self.fired = True


_FLAG = _TimeoutFlag()
for _name in ("math_verify", "math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addHandler(_FLAG)
    logging.getLogger(_name).propagate = False


@functools.lru_cache(maxsize=4096)
def _parsed(latex: str, soft_timeout: int) -> list:
    """math-verify's parse of ``\\boxed{latex}`` (a gold answer or a response's boxed content: the same
    parse), kept per worker; a soft timeout raises, so it is never kept."""
    _FLAG.fired = False
    parsed = parse(f"\\boxed{{{latex}}}", extraction_config=_LATEX_ONLY, parsing_timeout=soft_timeout)
    if _FLAG.fired:
        raise VerifyTimeout("math-verify timed out parsing")
    return parsed


def _number(parsed: list, soft_timeout: int) -> complex | None:
    """The value of a parse that is one plain number ([expr, its string], expr a sympy number: no free
    symbols, no relation, set, tuple or matrix, no percent), to 30 digits; None for anything else or when
    the evaluation fails or hits the soft timeout."""
    if len(parsed) != 2 or not isinstance(parsed[0], Expr) or not isinstance(parsed[1], str):
        return None
    expr = parsed[0]
    if not expr.is_number or expr.has(UnevaluatedExpr):  # X% is X * UnevaluatedExpr(1/100)
        return None
    try:
        value = complex(timeout(soft_timeout)(expr.evalf)(30))
    except Exception:  # noqa: BLE001 - oo, zoo, nan, an evaluation error: not decided here
        return None
    except TimeoutException:
        return None
    return value if cmath.isfinite(value) else None


def _clearly_different(gold: list, predicted: list, soft_timeout: int) -> bool:
    """Both parses plain numbers whose values differ by more than 1e-4 (relative to the larger, at least 1):
    math-verify then says "not equal" by each of its tests (sympy ``==``; equality after rounding to 6
    decimals when a float is involved; ``simplify(a - b).is_zero``; equal normalised strings), so its
    costly ``simplify`` of a difference that is not zero is skipped (the step's most expensive part on
    wrong numeric answers). Percentages, sets, relations and symbols go to math-verify."""
    a = _number(gold, soft_timeout)
    if a is None:
        return False
    b = _number(predicted, soft_timeout)
    return b is not None and abs(a - b) > 1e-4 * max(1.0, abs(a), abs(b))


def verify_boxed(content: str, answer: str, soft_timeout: int) -> int:
    """1 when ``\\boxed{content}`` equals ``\\boxed{answer}`` under math-verify, 0 when not,
    -1 when the content does not parse (broken LaTeX). Parses are kept per worker (:func:`_parsed`):
    a gold answer is parsed once for all its responses, and an answer seen before costs no parse.
    Two plain numbers that are clearly different are 0 without math-verify's comparison
    (:func:`_clearly_different`)."""
    try:
        gold = _parsed(answer, soft_timeout)
    except VerifyTimeout:
        raise VerifyTimeout("math-verify timed out parsing the gold answer") from None
    try:
        predicted = _parsed(content, soft_timeout)
    except VerifyTimeout:
        raise VerifyTimeout("math-verify timed out parsing the response") from None
    if not predicted:
        return -1
    if _clearly_different(gold, predicted, soft_timeout):
        return 0
    _FLAG.fired = False
    correct = verify(gold, predicted, timeout_seconds=soft_timeout)
    if _FLAG.fired:
        raise VerifyTimeout("math-verify timed out comparing")
    return int(bool(correct))


def verify_boxed_uncached(content: str, answer: str, soft_timeout: int) -> int:
    """:func:`verify_boxed` without the parse cache (the per-response reference of the reward tests)."""
    _FLAG.fired = False
    gold = parse(f"\\boxed{{{answer}}}", extraction_config=_LATEX_ONLY, parsing_timeout=soft_timeout)
    predicted = parse(f"\\boxed{{{content}}}", extraction_config=_LATEX_ONLY, parsing_timeout=soft_timeout)
    if _FLAG.fired:
        raise VerifyTimeout("math-verify timed out parsing")
    if not predicted:
        return -1
    correct = verify(gold, predicted, timeout_seconds=soft_timeout)
    if _FLAG.fired:
        raise VerifyTimeout("math-verify timed out comparing")
    return int(bool(correct))


#: Answer shapes whose first parse and comparison load lazily built parts of the LaTeX parser and of
#: sympy (intervals, sets, matrices, complex numbers, relations, units, text): done once here (a few
#: seconds), since the forkserver preloads this module, every worker and every replacement starts warm.
_WARM_UP = [("\\frac{1}{2}", "0.5"), ("(-\\infty, 3]", "[2, 5)"), ("\\{1, 2\\}", "3, 5, 7"),
            ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
            ("1 - 12i", "2\\sqrt{5}"), ("x = 5", "y = -2x"), ("10 \\text{ cm}", "30^\\circ"),
            ("\\text{(C)}", "x \\in [-2,7]"), ("x^2 + 2x + 1", "(x+1)^2"), ("10\\%", "1,234"),
            ("\\cot x", "\\frac{20000}{\\pi}"), ("(0,9) \\cup (9,36)", "204_5")]
for _gold, _answer in _WARM_UP:
    verify(parse(f"\\boxed{{{_gold}}}", extraction_config=_LATEX_ONLY, parsing_timeout=None),
           parse(f"\\boxed{{{_answer}}}", extraction_config=_LATEX_ONLY, parsing_timeout=None), timeout_seconds=None)
