"""CERO (arXiv 2606.05606): Fenchel-dual rollout allocation across prompts and epochs, the per-step math.

Reconstructed from the paper's abstract (its body, equation numbers and defaults were not retrievable). Prompt i's
Beta posterior gives v_i = E[p (1 - p)] (``vip.beta_expected_variance``), the value of one more rollout, and the
concave saturating utility of its cumulative rollouts N_i = sum_k n_ik over K epochs (U_i'(0) = v_i, U_i <= v_i c)

    U_i(N) = v_i c (1 - exp(-N / c)),    max_n sum_i U_i(N_i)   s.t.   sum_{i,k} n_ik <= B,  n_ik in [n_min, n_max].

Fenchel, U_i(N) = min_{theta >= 0} theta N - U_i*(theta), leaves step k a Lagrangian linear in n_k, with the
prompt-level duals theta_i and the budget-level dual lambda, and a projected OGD step on each dual:

    n_ik = argmax_n (theta_i - lambda) n = n_max if theta_i > lambda else n_min        (lagrangian_choice)
    theta_i <- [theta_i - eta_t (n_ik - N_i*(theta_i) / K)]_+,
        N_i*(theta) / K = clip(s log(v_i / theta), n_min, n_max),  s = c / K            (dual_target, cero_dual_step)
    lambda <- [lambda + eta_lambda (S_k - B_k) / B_k]_+   (S_k: the step's spend)  (update_rules.dual_step)

Departures:
- budget decision: each step spends exactly B_k = P n_bar (the arena's equal compute per step), so the plan is the
  Lagrangian's maximiser at the price spending B_k exactly (``cero_plan``); lambda is CERO's own price, logged only;
- the utility's form, s, the step sizes and the prior are ours (the paper's were not at hand).
Derivation: docs/core-allocation-notes.md#gdro_lab-allocation-cero.
"""

from __future__ import annotations

import numpy as np

from gdro_lab.allocation.separable import separable_plan
from gdro_lab.checks import as_float_array


def lagrangian_choice(theta_P: np.ndarray, price: float, n_min: int, n_max: int) -> np.ndarray:
    """Per prompt, the integer n in [n_min, n_max] maximising (theta_i - price) n (n_min on a tie), int64."""
    return np.where(np.asarray(theta_P, float) > price, n_max, n_min).astype(np.int64)


def cero_plan(theta_P: np.ndarray, total: int, n_min: int, n_max: int) -> np.ndarray:
    """Integer n_P maximising sum_i theta_i n_i with sum n = total in [n_min, n_max] (the Lagrangian's maximiser at
    the step's exact price): the rollouts above n_min go to the largest theta_i; equal theta_i share them evenly."""
    theta = as_float_array("cero_plan", "theta_P", theta_P, ndim=1)
    return separable_plan(np.repeat(theta[:, None], n_max - n_min, axis=1), total, n_min)


def dual_target(v_P: np.ndarray, theta_P: np.ndarray, saturation: float, n_min: int, n_max: int) -> np.ndarray:
    """N_i*(theta_i) / K: the per-epoch share of argmax_N U_i(N) - theta_i N over N in [K n_min, K n_max]."""
    with np.errstate(divide="ignore"):
        return np.clip(saturation * np.log(np.asarray(v_P, float) / np.asarray(theta_P, float)), n_min, n_max)


def cero_dual_step(theta_P: np.ndarray, n_P: np.ndarray, v_P: np.ndarray, lr_P: np.ndarray | float, saturation: float,
              n_min: int, n_max: int) -> np.ndarray:
    """Projected OGD on the prompt-level duals: theta <- max(theta - lr (n - N*(theta) / K), 0)."""
    theta = np.asarray(theta_P, float)
    return np.maximum(theta - lr_P * (np.asarray(n_P, float) - dual_target(v_P, theta, saturation, n_min, n_max)), 0.0)
