"""The math-verify comparison that runs inside a reward worker's main thread.

math-verify bounds its own parsing and each comparison with ``signal.alarm`` (main thread only);
those soft timeouts make it return "no match" and log "Timeout during ...". We catch that log
record and raise :class:`VerifyTimeout`, so the pool counts it as a timeout. Anything that an
alarm cannot interrupt (a long C-level computation such as a huge integer power) is stopped by
the pool's hard timeout instead.
"""

from __future__ import annotations

import functools
import logging

from math_verify import parse, verify


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


@functools.lru_cache(maxsize=8192)
def _gold(answer: str, soft_timeout: int) -> list:
    return parse(f"\\boxed{{{answer}}}", parsing_timeout=soft_timeout)


def verify_boxed(content: str, answer: str, soft_timeout: int) -> int:
    """1 when ``\\boxed{content}`` equals ``\\boxed{answer}`` under math-verify, 0 when not,
    -1 when the content does not parse (broken LaTeX)."""
    _FLAG.fired = False
    gold = _gold(answer, soft_timeout)
    if _FLAG.fired:
        _gold.cache_clear()
        raise VerifyTimeout("math-verify timed out parsing the gold answer")
    predicted = parse(f"\\boxed{{{content}}}", parsing_timeout=soft_timeout)
    if _FLAG.fired:
        raise VerifyTimeout("math-verify timed out parsing the response")
    if not predicted:
        return -1
    correct = verify(gold, predicted, timeout_seconds=soft_timeout)
    if _FLAG.fired:
        raise VerifyTimeout("math-verify timed out comparing")
    return int(bool(correct))


# Warm math-verify's lazily built LaTeX parser once (~1 s): the forkserver preloads this module,
# so every worker and every replacement starts warm.
verify(parse("\\boxed{\\frac{1}{2}}", parsing_timeout=None), parse("\\boxed{0.5}", parsing_timeout=None),
       timeout_seconds=None)
