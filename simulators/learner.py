"""Logistic item-response learner of the simulator world (``simulators.world``): its GRPO update,
the price of a step, and exact evaluation on the training pool and the held-out splits.

Shapes: ``P`` prompts, ``K`` latent groups, ``B`` prompts in a batch, ``R`` rollouts (flat, ragged).

    z_i = s0 + s_g(i) + t_i - d_i,  p_i = sigmoid(z_i)   (logistic IRT: shared + group + prompt skill)
    y_ij ~ Bernoulli(p_i),  r_ij = 2 y_ij - 1;  A_ij = grpo_advantages(r, n)     (paper Eq. 3 and 7)
    g_i   = (1/n_i) sum_j A_ij (y_ij - p_i + tau xi_ij),  xi_ij ~ N(0, 1)
    u_i   = m_i a_i g_i   (m_i: Prompt-GDRO multiplier; a_i = 1, or n_i / n_bar for 'rollout')
    s0 += lr_shared mean_i u_i;  s_K += lr_group M h_K;  t_i += lr_prompt u_i   (all x lr_scale)

with M = (1 + c) I - c 1 1^T the interference knob and a price of a step (curvature: forgetting ~ lr^2;
update noise ~ rms(dz)), so accuracy against the learning rate is unimodal. The expected update has a
closed form (``expected_gradient``). Every term, and why it is there: docs/simulator-notes.md#simulators-learner.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit, gammaln

from gdro_lab import ConfigError
from gdro_lab.functional.grpo import group_mean, grpo_advantages
from simulators.world import WorldConfig, WorldInstance


def phi(c: np.ndarray, n: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Per-prompt GRPO estimate given c successes out of n (population std, zero-variance -> 0)."""
    c = np.asarray(c, float)
    n = np.asarray(n, float)
    frac = np.clip(c / n, 0.0, 1.0)  # c > n entries are masked out by the caller's pmf
    sd = np.sqrt(frac * (1.0 - frac))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 2.0 * c * (1.0 - frac) / (n * (2.0 * sd + eps))
    return np.where((c > 0) & (c < n), out, 0.0)


def expected_gradient(p_P: np.ndarray, n_P: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Closed-form E[g_i] = sum_c Bin(c; n_i, p_i) phi(c, n_i) (population-std GRPO advantages)."""
    p = np.asarray(p_P, float)[:, None]
    n = np.asarray(n_P, np.int64)[:, None]
    c = np.arange(int(n.max()) + 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (gammaln(n + 1) - gammaln(c + 1) - gammaln(np.maximum(n - c, 0) + 1)
                   + c * np.log(np.maximum(p, 1e-300)) + (n - c) * np.log(np.maximum(1 - p, 1e-300)))
    pmf = np.where(c <= n, np.exp(log_pmf), 0.0)
    return (pmf * phi(c, n, eps)).sum(axis=1)


class Learner:
    """Skills (s0, s_K, t_P) of the logistic IRT learner, their GRPO update, and exact evaluation."""

    def __init__(self, config: WorldConfig, world: WorldInstance, lr_scale: float = 1.0):
        self.config = config
        self.world = world
        self.lr_scale = float(lr_scale)
        self.shared = 0.0
        self.group_skill_K = np.zeros(config.num_groups)
        self.prompt_skill_P = np.zeros(config.num_prompts)
        K = config.num_groups
        self._coupling = (config.interference - config.transfer) / (K - 1) if K > 1 else 0.0

    def logits(self, index_B: np.ndarray | None = None) -> np.ndarray:
        """z_i = s0 + s_g(i) + t_i - d_i for the given prompts (all when None)."""
        w = self.world
        if index_B is None:
            return self.shared + self.group_skill_K[w.group_P] + self.prompt_skill_P - w.difficulty_P
        return (self.shared + self.group_skill_K[w.group_P[index_B]] + self.prompt_skill_P[index_B]
                - w.difficulty_P[index_B])

    def success_prob(self, index_B: np.ndarray | None = None) -> np.ndarray:
        """p_i = sigmoid(z_i)."""
        return expit(self.logits(index_B))

    def gradient(self, successes_R: np.ndarray, counts_B: np.ndarray, p_B: np.ndarray,
                 noise_R: np.ndarray | None = None, weights_R: np.ndarray | None = None
                 ) -> tuple[np.ndarray, dict[str, float]]:
        """Per-prompt g_i = (1/n_i) sum_j w_ij A_ij (y_ij - p_i + tau xi_ij) with gdro_lab's GRPO advantages.

        ``noise_R`` are the standard normal xi_ij (None: no score noise); ``weights_R`` the early stopping's
        importance weights w_ij (None: all 1).
        """
        cfg = self.config
        y = np.asarray(successes_R, float)
        advantages, metrics = grpo_advantages(2.0 * y - 1.0, counts_B, std=cfg.advantage_std,
                                              normalize_std=cfg.normalize_std)
        score = y - np.repeat(p_B, counts_B)
        if noise_R is not None and cfg.score_noise > 0:
            score = score + cfg.score_noise * np.asarray(noise_R, float)
        if weights_R is not None:
            score = score * np.asarray(weights_R, float)
        return group_mean(advantages * score, counts_B), metrics

    def step_direction(self, index_B: np.ndarray, counts_B: np.ndarray, gradient_B: np.ndarray,
                       multipliers_B: np.ndarray, n_bar: float) -> tuple[float, np.ndarray, np.ndarray]:
        """(delta s0, delta s_K, u_B) of one update: u_i = m_i a_i g_i, coupling M applied, lr_scale included."""
        cfg = self.config
        weight = multipliers_B * (counts_B / n_bar if cfg.aggregation == "rollout" else 1.0)
        u_B = weight * gradient_B
        size = max(index_B.size, 1)
        h_K = np.bincount(self.world.group_P[index_B], weights=u_B, minlength=cfg.num_groups) / size
        c = self._coupling
        delta_K = self.lr_scale * cfg.lr_group * ((1.0 + c) * h_K - c * h_K.sum())
        return self.lr_scale * cfg.lr_shared * float(u_B.sum()) / size, delta_K, u_B

    def step_price(self, delta_shared: float, delta_K: np.ndarray, index_B: np.ndarray,
                   update_B: np.ndarray) -> tuple[float, float]:
        """(forgetting, rms dz) of a step: curvature * mean_i dz_i^2 and sqrt(mean_i dz_i^2), i in the batch."""
        dz_B = delta_shared + delta_K[self.world.group_P[index_B]] + self.lr_scale * self.config.lr_prompt * update_B
        mean_sq = float(np.mean(dz_B * dz_B)) if dz_B.size else 0.0
        return self.config.curvature * mean_sq, float(np.sqrt(mean_sq))

    def apply(self, delta_shared: float, delta_K: np.ndarray, index_B: np.ndarray | None = None,
              update_B: np.ndarray | None = None, noise_K: np.ndarray | None = None) -> float:
        """Add the shared and group steps and lr_prompt u_i to the batch prompts' own skills, then
        pay the step's price (forgetting on s0, noise ``noise_K`` ~ N(0, 1) scaled by rms dz on s_K).

        Returns the forgetting charged to s0.
        """
        cfg = self.config
        forgetting = 0.0
        if index_B is not None and update_B is not None:
            forgetting, rms = self.step_price(delta_shared, delta_K, index_B, update_B)
            if noise_K is not None and cfg.update_noise > 0:
                delta_K = delta_K + cfg.update_noise * rms * np.asarray(noise_K, float)
            if cfg.lr_prompt > 0:
                np.add.at(self.prompt_skill_P, index_B, self.lr_scale * cfg.lr_prompt * update_B)
        self.shared += delta_shared - forgetting
        self.group_skill_K += delta_K
        return forgetting

    def heldout_prob(self) -> np.ndarray:
        """p on the held-out prompts: sigmoid(s0 + s_g - d) (no prompt skill: never trained on)."""
        w = self.world
        return expit(self.shared + self.group_skill_K[w.heldout_group_H] - w.heldout_difficulty_H)

    def evaluate(self, k: int = 8) -> dict[str, float]:
        """Exact metrics: pass@1 = mean p, pass@k = mean 1 - (1-p)^k, worst groups; on the training pool
        (no prefix) and on the held-out splits (``val/``, ``test/``), plus the memorisation gap."""
        w = self.world
        p = self.success_prob()
        K = self.config.num_groups
        out = _pool_metrics(p, w.group_P, K, k, "")
        out["mean_group_accuracy"] = float(np.mean(np.bincount(w.group_P, weights=p, minlength=K)
                                                   / np.maximum(w.sizes_K, 1)))
        out["unsolved_frac"] = float(np.mean(p < 0.01))
        out["solved_frac"] = float(np.mean(p > 0.99))
        if w.heldout_group_H.size:
            held = self.heldout_prob()
            for split, prefix in ((0, "val/"), (1, "test/")):
                mask = w.heldout_split_H == split
                out.update(_pool_metrics(held[mask], w.heldout_group_H[mask], K, k, prefix))
            out["memorisation_gap"] = out["accuracy"] - out["test/accuracy"]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"shared": float(self.shared), "group_skill": self.group_skill_K.copy(),
                "prompt_skill": self.prompt_skill_P.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.shared = float(state["shared"])
        skill = np.asarray(state["group_skill"], float)
        if skill.shape != self.group_skill_K.shape:
            raise ConfigError(f"snapshot has {skill.size} group skills, the world has {self.group_skill_K.size}")
        self.group_skill_K = skill.copy()
        prompt = np.asarray(state["prompt_skill"], float)
        if prompt.shape != self.prompt_skill_P.shape:
            raise ConfigError(f"snapshot has {prompt.size} prompt skills, the world has {self.prompt_skill_P.size}")
        self.prompt_skill_P = prompt.copy()


def _pool_metrics(p: np.ndarray, group: np.ndarray, K: int, k: int, prefix: str) -> dict[str, float]:
    """Mean and worst-group pass@1 and pass@k of success probabilities ``p`` (groups with no prompt skipped)."""
    sizes = np.bincount(group, minlength=K)
    seen = sizes > 0
    acc_K = np.bincount(group, weights=p, minlength=K)[seen] / sizes[seen]
    passk = 1.0 - (1.0 - p) ** k
    passk_K = np.bincount(group, weights=passk, minlength=K)[seen] / sizes[seen]
    return {f"{prefix}accuracy": float(p.mean()), f"{prefix}worst_group_accuracy": float(acc_K.min()),
            f"{prefix}pass@{k}": float(passk.mean()), f"{prefix}worst_group_pass@{k}": float(passk_K.min())}
