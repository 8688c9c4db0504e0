"""Deciding (gold, answer) pairs cheaply without changing a single verdict of math-verify.

Three parts, used by :class:`real_runs.rewards.math.MathReward`: :func:`decide_numbers` (plain numeric
literals, decided only where math-verify's comparison cannot go the other way), :func:`verdict_key`
(math-verify's own first rewrites) and :class:`VerdictCache` (LRU; timeouts and errors never cached).
Checked against the uncached math-verify path by tests/real_runs/rewards/test_reward.py. Detail:
docs/eval-notes.md#real_runs-rewards-verdicts.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from fractions import Fraction

_INTEGER = re.compile(r"[+-]?\d{1,100}")
_DECIMAL = re.compile(r"([+-]?)(\d{0,50})\.(\d{1,50})")
_FRAC = re.compile(r"([+-]?)\\[dt]?frac(?:\{([+-]?\d{1,50})\}\{([+-]?\d{1,50})\}|(\d)(\d))")
_SLASH = re.compile(r"([+-]?\d{1,50})/(\d{1,50})")

#: math-verify's rounding of decimals (``verify(float_rounding=6)``): rationals closer than twice
#: its half-unit could round to the same 6-decimal value, so they go to math-verify.
_ROUNDING_MARGIN = Fraction(2, 10**6)


def numeric_literal(text: str) -> tuple[Fraction, bool] | None:
    """(exact value, written as a decimal) of a plain numeric literal, else None (not decided here)."""
    if _INTEGER.fullmatch(text):
        return Fraction(int(text)), False
    if match := _DECIMAL.fullmatch(text):
        sign, whole, fraction = match.groups()
        value = Fraction(int(whole or "0") * 10 ** len(fraction) + int(fraction), 10 ** len(fraction))
        return (-value if sign == "-" else value), True
    if match := _FRAC.fullmatch(text):
        sign, top, bottom, top_digit, bottom_digit = match.groups()
        top, bottom = (top, bottom) if top is not None else (top_digit, bottom_digit)
        if int(bottom) == 0:
            return None
        value = Fraction(int(top), int(bottom))
        return (-value if sign == "-" else value), False
    if match := _SLASH.fullmatch(text):
        top, bottom = match.groups()
        if int(bottom) == 0:
            return None
        return Fraction(int(top), int(bottom)), False
    return None


def decide_numbers(content: str, gold: str) -> bool | None:
    """math-verify's verdict on two numeric literals (the answer possibly decorated, :func:`decorated_literal`)
    where it is certain; None otherwise (see module doc)."""
    answer = numeric_literal(content)
    if answer is None:
        core = decorated_literal(content)
        if core is None:
            return None
        answer = numeric_literal(core)
    if answer is None:
        return None
    expected = numeric_literal(gold)
    if expected is None:
        return None
    (value, decimal), (target, target_decimal) = answer, expected
    if value == target:
        return True
    if not (decimal or target_decimal) or abs(value - target) > _ROUNDING_MARGIN:
        return False
    return None


#: A numeric literal with the decorations a model adds: "x = " (one letter), a dollar sign, a degree sign,
#: or a unit in \\text{}/\\mbox{} from a fixed list of words (none of which math-verify rewrites: no "and",
#: "or", "percent", "inf"). math-verify drops each of them before it compares (its to_remove_regex drops
#: "\\$", its units step the trailing \\text{...}, its parser unwraps "x = N" when the gold is not an
#: equation, and "^\\circ" is not converted: convert_degrees=False), which
#: tests/real_runs/rewards/test_reward.py checks against math-verify on every decorated form here.
_UNITS = ("cm|mm|km|m|in|inch|inches|ft|feet|foot|yd|yard|yards|mi|mile|miles|meter|meters|metre|metres|"
          "unit|units|square units|sq units|cubic units|degree|degrees|dollar|dollars|cent|cents|hour|hours|"
          "minute|minutes|second|seconds|day|days|week|weeks|year|years|kg|g|gram|grams|pound|pounds|lb|lbs|"
          "mph|ways|people|students|apples|cookies|marbles|points|games|boxes|pages|sheets")
_DECORATED = re.compile(r"(?:[a-zA-Z]\s*=\s*)?(?:\\\$\s*)?(?P<core>[^\s$^\\]+|[+-]?\\[dt]?frac(?:\{[^{}]*\}\{[^{}]*\}|\d\d))"
                        r"(?:\s*\^\s*(?:\\circ|\{\\circ\})"
                        r"|\s*(?:\\,\s*)?\\(?:text|mbox)\{\s*(?:" + _UNITS + r")\s*\})?")


def decorated_literal(content: str) -> str | None:
    """The numeric literal inside a decorated answer ("x = 5", "\\$36", "90^\\circ", "12 \\text{ cm}"), else None."""
    match = _DECORATED.fullmatch(content)
    if match is None or match.group("core") == content:
        return None
    core = match.group("core")
    return core if numeric_literal(core) is not None else None


_FRAC_VARIANT = re.compile(r"\\[dtc]frac")
# latex2sympy2_extended.math_normalization.r_left / r_right, verbatim
_LEFT = re.compile(r"\\m?left(\\\{|\{|\\\||\||\[|\(|\\rbracl|\\lgroup|\\lbrace|\\lbrack|\\vert|\\lvert|\\lceil|\\lfloor"
                   r"|\\vert|\\lvert|\\langle|\\llcorner|\\ulcorner)")
_RIGHT = re.compile(r"\\m?right(\\\}|\}|\\\||\||\]|\)|\\rbrack|\\rgroup|\\rbrace|\\rbrack|\\vert|\\rvert|\\rceil"
                    r"|\\rfloor|\\vert|\\rvert|\\rangle|\\lrcorner|\\urcorner)")


def verdict_key(content: str) -> str:
    """The key a boxed content's verdict is cached by (see module doc)."""
    key = content.strip()
    if "frac" in key:
        key = _FRAC_VARIANT.sub(r"\\frac", key)
    if "left" in key or "right" in key:
        if "matrix" in key:  # math-verify turns these two into bmatrix before it drops \left and \right
            key = key.replace(r"\left[\begin{matrix}", r"\begin{bmatrix}").replace(r"\end{matrix}\right]", r"\end{bmatrix}")
        key = _RIGHT.sub(r"\1", _LEFT.sub(r"\1", key))
    return key


class VerdictCache:
    """Least-recently-used map (key, gold) -> verdict, at most ``maxsize`` entries."""

    def __init__(self, maxsize: int = 16384):
        if maxsize < 0:
            raise ValueError(f"cache size {maxsize}: use 0 (no cache) or a positive number of verdicts")
        self.maxsize = maxsize
        self._items: OrderedDict[tuple[str, str], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[str, str]) -> int | None:
        verdict = self._items.get(key)
        if verdict is not None:
            self._items.move_to_end(key)
        return verdict

    def put(self, key: tuple[str, str], verdict: int) -> None:
        if not self.maxsize:
            return
        self._items[key] = verdict
        self._items.move_to_end(key)
        while len(self._items) > self.maxsize:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
