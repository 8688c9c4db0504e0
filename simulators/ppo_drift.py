"""The paper's surrogate-loss signal (Eq. 6-7) with PPO mini-batch drift, so Prompt-GDRO can run as published.

    dz_i(j) = sum_{j' < j} (ds0(j') + ds_{g(i)}(j'))          (drift of prompt i's logit)
    rho_ij  = sigma(z_i + dz_i) / sigma(z_i)  if y_ij = 1, else the (1 - .) ratio
    l_ij    = -min(rho_ij A_ij, clip(rho_ij, 1 - eps, 1 + eps) A_ij)  (Eq. 6 with beta KL = 0)

l(x_i) = mean_j l_ij, used only when ``prompt_gdro.signal = "surrogate"`` and ``run.ppo_minibatches > 1``.
Departure (approximation): the drift is that of the unweighted GRPO mini-batch steps, because the
weighter needs the losses before it produces this step's multipliers. Detail:
docs/simulator-notes.md#simulators-ppo_drift.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from gdro_lab.functional.grpo import grpo_advantages
from simulators.learner import Learner


def surrogate_losses(learner: Learner, index_B: np.ndarray, counts_B: np.ndarray, successes_R: np.ndarray,
                     p_B: np.ndarray, noise_R: np.ndarray | None, minibatches: int, clip: float,
                     n_bar: float) -> np.ndarray:
    """Per-rollout l_ij (flat, ragged like ``successes_R``) under PPO mini-batch drift (module docstring)."""
    cfg = learner.config
    B = index_B.size
    y = np.asarray(successes_R, float)
    advantages, _ = grpo_advantages(2.0 * y - 1.0, counts_B, std=cfg.advantage_std, normalize_std=cfg.normalize_std)
    gradient_B, _ = learner.gradient(successes_R, counts_B, p_B, noise_R)
    groups_B = learner.world.group_P[index_B]
    drift_B = np.zeros(B)
    shared, group_K = 0.0, np.zeros(cfg.num_groups)
    for part in np.array_split(np.arange(B), max(1, min(minibatches, B))):
        drift_B[part] = shared + group_K[groups_B[part]]
        d_shared, d_K, _ = learner.step_direction(index_B[part], counts_B[part], gradient_B[part],
                                                  np.ones(part.size), n_bar)
        shared += d_shared
        group_K = group_K + d_K
    z_B = np.log(np.maximum(p_B, 1e-300)) - np.log(np.maximum(1.0 - p_B, 1e-300))
    p_new_R = np.repeat(expit(z_B + drift_B), counts_B)
    p_old_R = np.repeat(p_B, counts_B)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(y > 0, p_new_R / np.maximum(p_old_R, 1e-300),
                       (1.0 - p_new_R) / np.maximum(1.0 - p_old_R, 1e-300))
    rho = np.nan_to_num(rho, nan=1.0, posinf=1.0)
    objective = np.minimum(rho * advantages, np.clip(rho, 1.0 - clip, 1.0 + clip) * advantages)
    return -objective
