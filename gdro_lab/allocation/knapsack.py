"""Knapsack-RL's rollout budget allocation as pure functions (arXiv 2509.25849).

A prompt with success rate p given N rollouts is worth value(N; p) = (1 - p^N - (1 - p)^N) p (1 - p)^2;
the plan maximises the paper's sum of value over every prompt (``objective="paper"``, default) or the
released code's DP objective (``objective="code"``, a prompt left at n_min credited 0), and always spends
exactly ``total`` within [n_min, n_max]. Departs from the code (liziniu/KnapsackRL, read, not copied):
- every share respects n_max (the code's equal shares may exceed it), so the budget is always exact;
- the DP is replaced by the equivalent exact greedy on marginal gains (the code's DP needs numba);
- the fallback's p = 0 prompts are the valid ones (the code also counts prompts without an estimate).
The plan step by step, and how the two objectives differ: docs/core-allocation-notes.md#gdro_lab-allocation-knapsack.
"""

from __future__ import annotations

import numpy as np

from gdro_lab._validate import require_choice
from gdro_lab.allocation.separable import separable_plan
from gdro_lab.checks import as_float_array, check_total

OBJECTIVES = ("paper", "code")
"""The knapsack's objective: the paper's sum over every prompt, or the code's DP (module docstring, step 3)."""


def knapsack_value(p: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
    """value(N; p) = (1 - p^N - (1 - p)^N) p (1 - p)^2, elementwise (broadcasting)."""
    p = np.asarray(p, float)
    return (1.0 - p**n - (1.0 - p) ** n) * p * (1.0 - p) ** 2


def knapsack_cost(p: np.ndarray | float, alpha: float = 0.9) -> np.ndarray:
    """Rollouts for a non-zero gradient with probability alpha: log(1 - alpha) / log(max(p, 1 - p)).

    inf at p = 0 or 1 (never reached); the code's 'probability' cost estimation.
    """
    p = np.asarray(p, float)
    with np.errstate(divide="ignore"):
        return np.where((p > 0) & (p < 1), np.log1p(-alpha) / np.log(np.maximum(p, 1.0 - p)), np.inf)


def spread(n_P: np.ndarray, members: np.ndarray, amount: int, n_max: int) -> int:
    """Add ``amount`` rollouts to the prompts ``members`` of n_P in equal shares (the remainder to
    the first ones), never above n_max; returns what did not fit. Modifies n_P in place."""
    members = np.asarray(members, np.int64)
    while amount > 0:
        room = n_max - n_P[members]
        live = members[room > 0]
        if live.size == 0:
            break
        per, rest = divmod(amount, live.size)
        add = np.minimum(room[room > 0], per + (np.arange(live.size) < rest))
        n_P[live] += add
        amount -= int(add.sum())
    return int(amount)


def knapsack_plan(p_P: np.ndarray, valid_P: np.ndarray, total: int, n_min: int, n_max: int,
                  n_default: int, alpha: float = 0.9, fallback: bool = True,
                  objective: str = "paper") -> np.ndarray:
    """Knapsack-RL's plan n_P (int64), sum exactly ``total``, each in [n_min, n_max] (module docstring).

    ``p_P``: success-rate estimates in [0, 1]; ``valid_P``: whether each estimate is trusted yet;
    ``objective``: 'paper' or 'code' (step 3). Needs P n_min <= total <= P n_max and
    n_min <= n_default <= n_max.
    """
    require_choice("knapsack_plan", "objective", objective, OBJECTIVES)
    p = as_float_array("knapsack_plan", "p_P", p_P, ndim=1)
    valid = np.asarray(valid_P, bool)
    size = p.size
    total = check_total("knapsack_plan", total, size, n_min, n_max)
    effective = valid & (p > 0) & (p < 1)
    zero = valid & (p == 0)
    n_P = np.where(valid, n_min, n_default).astype(np.int64)
    left = total - int(n_P.sum())
    if left < 0:  # more invalid prompts at n_default than the budget allows: lower them evenly
        return _lower(n_P, np.flatnonzero(~valid), -left, n_min)
    eff = np.flatnonzero(effective)
    if eff.size == 0:
        if zero.any():
            left = spread(n_P, np.flatnonzero(zero), left, n_max)
        elif valid.any():
            n_P[:] = n_default
            left = total - int(n_P.sum())
    else:
        cost = int(np.minimum(n_max, knapsack_cost(p[eff], alpha)).astype(np.int64).sum())
        if fallback and cost < left:
            receivers = np.flatnonzero(zero) if zero.any() else np.flatnonzero(~effective)
            surplus = left - cost
            left = cost + (spread(n_P, receivers, surplus, n_max) if receivers.size else surplus)
        room = n_max - n_min
        used = min(left, eff.size * room)
        n_P[eff] = _knapsack_extra(p[eff], used, n_min, room, objective)
        left -= used
    if left > 0:
        left = spread(n_P, eff, left, n_max) if eff.size else left
        left = spread(n_P, np.arange(size), left, n_max)
    elif left < 0:
        n_P = _lower(n_P, np.arange(size), -left, n_min)
    return n_P


def _value_table(p_E: np.ndarray, n_min: int, room: int) -> np.ndarray:
    """knapsack_value(p_i, n_min + k) for k = 0..room, shape (E, room + 1), by running products
    (p^n and (1 - p)^n without a power per entry)."""
    q_E = 1.0 - p_E
    up = np.cumprod(np.concatenate([(p_E ** n_min)[:, None], np.repeat(p_E[:, None], room, axis=1)], axis=1), axis=1)
    down = np.cumprod(np.concatenate([(q_E ** n_min)[:, None], np.repeat(q_E[:, None], room, axis=1)], axis=1), axis=1)
    return (1.0 - up - down) * (p_E * q_E * q_E)[:, None]


def _knapsack_extra(p_E: np.ndarray, budget: int, n_min: int, room: int, objective: str = "paper") -> np.ndarray:
    """n_min + k_i maximising sum_i value(n_min + k_i; p_i) ('paper') or sum_{k_i > 0} of it ('code'),
    sum k_i = budget (both concave in k_i: greedy)."""
    credited = _value_table(p_E, n_min, room)
    if objective == "code":
        credited[:, 0] = 0.0  # the code's DP: a prompt left at n_min is worth 0
    return separable_plan(np.diff(credited, axis=1), p_E.size * n_min + budget, n_min)


def _lower(n_P: np.ndarray, members: np.ndarray, amount: int, n_min: int) -> np.ndarray:
    """Remove ``amount`` rollouts from ``members`` in equal shares, never below n_min."""
    negated = -n_P
    left = spread(negated, members, amount, -n_min)
    if left:
        spread(negated, np.arange(n_P.size), left, -n_min)
    return -negated
