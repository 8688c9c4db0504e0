"""Plain GRPO in the simulator world for many learner settings at once (the calibration's inner loop).

Reproduces ``simulators.loop.Simulation``'s learner with method ``grpo`` exactly for one setting; M
settings advance together as arrays of shape (M, ...) sharing every random draw (common random numbers).
Per step (``simulators.learner``)::

    p_MB = sigmoid(s0_M + s_MK[g_B] + t_MP[i_B] - d_B);  y_MBn = u_Bn < p_MB  (u shared)
    A = GRPO advantages of r = 2y - 1 per prompt;  g_MB = mean_n A (y - p + tau_M xi_Bn)
    s0 += lr_shared g.sum/B - curvature mean_B dz^2;  s_K += lr_group M_c h + update_noise rms(dz) zeta_K
    t[i_B] += lr_prompt g_MB            (all step sizes times lr_scale_M)

Shapes: M settings, B prompts per step, n rollouts per prompt, K groups, P prompts, E evaluations.
Detail: docs/calibration-notes.md#simulators-calibrate-fastsim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.special import expit

from gdro_lab import ConfigError
from simulators.world import BatchSampler, WorldConfig, WorldInstance, make_world

#: Learner settings that may differ between the M settings of one batch (everything else is the world's).
SETTINGS = ("lr_shared", "lr_group", "lr_prompt", "curvature", "update_noise", "score_noise", "transfer",
            "interference", "lr_scale")


@dataclass
class Curves:
    """What a calibration compares with a real run, per setting.

    success_MT: expected success of step t's batch before its update (mean p over the batch);
    observed_MT: the batch's sampled success (what a trainer logs as ``mean_success``);
    heldout_MEK: exact held-out accuracy per group after each evaluation step (``eval_steps``; step 0
    = before training); heldout_ME: pooled over the held-out prompts; train_ME: training-pool accuracy.
    """

    eval_steps: np.ndarray
    success_MT: np.ndarray
    observed_MT: np.ndarray
    heldout_MEK: np.ndarray
    heldout_ME: np.ndarray
    train_ME: np.ndarray


def _settings(world: WorldConfig, values: Mapping[str, np.ndarray | float], count: int) -> dict[str, np.ndarray]:
    out = {}
    for name in SETTINGS:
        default = 1.0 if name == "lr_scale" else getattr(world, name)
        value = np.asarray(values.get(name, default), float)
        out[name] = np.broadcast_to(value, (count,)).astype(float) if value.ndim == 0 else value.astype(float)
        if out[name].shape != (count,):
            raise ConfigError(f"fastsim: setting {name} has shape {out[name].shape}, expected ({count},)")
    return out


def _advantage_scores(y_MBn: np.ndarray, p_MB: np.ndarray, noise_Bn: np.ndarray | None, tau_M: np.ndarray,
                      world: WorldConfig) -> np.ndarray:
    """g_MB = (1/n) sum_j A_j (y_j - p + tau xi_j) with gdro_lab's GRPO advantages (dense groups)."""
    n = y_MBn.shape[-1]
    frac = y_MBn.mean(axis=-1, keepdims=True)
    centered = 2.0 * (y_MBn - frac)
    if world.normalize_std:
        var = 4.0 * frac * (1.0 - frac) * (n / (n - 1.0) if world.advantage_std == "bessel" else 1.0)
        advantages = centered / (np.sqrt(var) + 1e-6)
    else:
        advantages = centered
    constant = (frac == 0.0) | (frac == 1.0) | (n == 1)
    advantages = np.where(constant, 0.0, advantages)
    score = y_MBn - p_MB[..., None]
    if noise_Bn is not None:
        score = score + tau_M[:, None, None] * noise_Bn[None]
    return (advantages * score).mean(axis=-1)


def run_grpo(world: WorldConfig, seed: int, *, batch: int, n: int, steps: int, eval_steps: Sequence[int],
             values: Mapping[str, np.ndarray | float], count: int) -> Curves:
    """Plain GRPO for ``count`` learner settings (``values``: SETTINGS as scalars or (count,) arrays).

    The world instance, batch order and rollouts are those of ``Simulation(SimConfig(method='grpo',
    seed=seed, batch=batch, n_bar=n, world=world))``.
    """
    settings = _settings(world, values, count)
    seeds = np.random.SeedSequence(seed).spawn(4)
    instance = make_world(world, np.random.default_rng(seeds[0]))
    sampler = BatchSampler(world.num_prompts, batch, np.random.default_rng(seeds[1]))
    rng = np.random.default_rng(seeds[2])
    state = _State(world, instance, count)
    K = world.num_groups
    coupling = (settings["interference"] - settings["transfer"]) / (K - 1) if K > 1 else np.zeros(count)
    scale = settings["lr_scale"]
    eval_set = set(int(s) for s in eval_steps)
    records: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    if 0 in eval_set:
        records.append(state.evaluate())
    success = np.empty((count, steps))
    observed = np.empty((count, steps))
    for t in range(1, steps + 1):
        index = sampler.next()
        groups = instance.group_P[index]
        p = expit(state.shared[:, None] + state.group_skill[:, groups] + state.prompt_skill[:, index]
                  - instance.difficulty_P[index])
        y = rng.random(index.size * n).reshape(index.size, n)[None] < p[..., None]
        noise = rng.standard_normal(index.size * n).reshape(index.size, n) if world.score_noise > 0 else None
        g = _advantage_scores(y, p, noise, settings["score_noise"], world)
        success[:, t - 1] = p.mean(axis=1)
        observed[:, t - 1] = y.mean(axis=(1, 2))
        h = np.zeros((count, K))
        np.add.at(h.T, groups, g.T)
        h /= index.size
        delta_K = (scale * settings["lr_group"])[:, None] * ((1.0 + coupling)[:, None] * h
                                                             - coupling[:, None] * h.sum(axis=1, keepdims=True))
        delta_shared = scale * settings["lr_shared"] * g.sum(axis=1) / index.size
        prompt_step = (scale * settings["lr_prompt"])[:, None] * g
        dz = delta_shared[:, None] + delta_K[:, groups] + prompt_step
        mean_sq = np.mean(dz * dz, axis=1)
        if world.update_noise > 0:
            zeta = rng.standard_normal(K)
            delta_K = delta_K + (settings["update_noise"] * np.sqrt(mean_sq))[:, None] * zeta[None, :]
        state.prompt_skill[:, index] += prompt_step
        state.shared += delta_shared - settings["curvature"] * mean_sq
        state.group_skill += delta_K
        if t in eval_set:
            records.append(state.evaluate())
    steps_E = np.array(sorted(eval_set), np.int64)
    held_K = np.stack([r[0] for r in records], axis=1) if records else np.zeros((count, 0, K))
    held = np.stack([r[1] for r in records], axis=1) if records else np.zeros((count, 0))
    train = np.stack([r[2] for r in records], axis=1) if records else np.zeros((count, 0))
    return Curves(steps_E, success, observed, held_K, held, train)


class _State:
    """Skills of M learners in one world instance, and their exact evaluation."""

    def __init__(self, world: WorldConfig, instance: WorldInstance, count: int):
        self.world = world
        self.instance = instance
        self.shared = np.zeros(count)
        self.group_skill = np.zeros((count, world.num_groups))
        self.prompt_skill = np.zeros((count, world.num_prompts))
        K = world.num_groups
        self.held_sizes_K = np.bincount(instance.heldout_group_H, minlength=K).astype(float)

    def evaluate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(held-out accuracy per group (M, K), pooled held-out (M,), training pool (M,))."""
        w = self.instance
        K = self.world.num_groups
        train = expit(self.shared[:, None] + self.group_skill[:, w.group_P] + self.prompt_skill
                      - w.difficulty_P).mean(axis=1)
        if not w.heldout_group_H.size:
            nan = np.full(self.shared.size, np.nan)
            return np.full((self.shared.size, K), np.nan), nan, train
        held = expit(self.shared[:, None] + self.group_skill[:, w.heldout_group_H] - w.heldout_difficulty_H)
        per_group = np.zeros((self.shared.size, K))
        np.add.at(per_group.T, w.heldout_group_H, held.T)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_group = per_group / self.held_sizes_K
        return per_group, held.mean(axis=1), train
