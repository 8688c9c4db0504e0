"""Heavy-tailed bandit world: latent groups, a logistic item-response learner, Bernoulli rollouts.

Shapes: ``P`` prompts, ``K`` latent groups, ``B`` prompts in a batch, ``R`` rollouts (flat, ragged).

World (fixed per seed)::

    group sizes   |D_k| ∝ (k + 1)^(-s)  (Zipf)  or  Pareto(alpha) draws, k = 0..K-1
    difficulty    d_i = d0 + c_g H_g(i) + c_p E_i,   H_k = Lomax(alpha_g) quantile (k+1/2)/K, E_i ~ Lomax(alpha_p)
                  (Lomax = Pareto II from 0: many easy prompts, a long hard tail); H is matched to
                  group size rank with correlation rho (rho > 0: rare groups are hard)

Learner (the parameters a step changes)::

    z_i = s0 + s_g(i) + t_i - d_i,  p_i = sigmoid(z_i)   (logistic IRT: shared + group + prompt skill)
    y_ij ~ Bernoulli(p_i), j = 1..n_i,  r_ij = 2 y_ij - 1      (rewards +-1 as in the paper)

Update (GRPO-style score-function estimate, paper Eq. 3 and 7)::

    A_ij  = gdro_lab.grpo.grpo_advantages(r, n)                (group-normalised, ragged)
    g_i   = (1/n_i) sum_j A_ij (y_ij - p_i + tau xi_ij),  xi_ij ~ N(0, 1)
    u_i   = m_i a_i g_i   (m_i: Prompt-GDRO multiplier; a_i = 1, or n_i / n_bar for 'rollout')
    s0   += lr_shared (1/B) sum_i u_i
    s_K  += lr_group M h_K,  h_k = (1/B) sum_{i in k} u_i,  M = (1 + c) I - c 1 1^T,  c = (kappa - T)/(K-1)
    t_i  += lr_prompt u_i                                      (prompt-specific skill, batch prompts only)
    (all three step sizes are multiplied by the run's lr_scale)

The price of a step (world v2; this is what makes each method's learning rate have an optimum)::

    dz_i  = ds0 + ds_g(i) + dt_i                               (the step's change of prompt i's logit)
    s0   -= curvature * mean_{i in B} dz_i^2                   (second-order loss: forgetting, ~ lr^2)
    s_K  += update_noise * rms(dz) * zeta_K,  zeta ~ N(0, 1)    (update noise that grows with the step)

so the expected gain of a step grows like lr and its cost like lr^2: accuracy against the
learning rate is unimodal, and a method whose advantage multipliers average above 1 pays for
the larger step. T = ``transfer`` is positive cross-group transfer (a gain h on group k raises
every other group by T h / (K-1)); kappa = ``interference`` is the negative kind.

Held-out prompts (``heldout_frac``): per group, prompts drawn like the training pool but never
trained on, z = s0 + s_g - d (no prompt skill). Half of them ("val") choose learning rates, the
other half ("test") report: held-out accuracy measures generalisation, train minus held-out
accuracy measures memorisation (the prompt skills t_i).

y - p is d log pi(y)/dz. tau xi is the part of a response's log-prob gradient unrelated to its
correctness (token-level credit noise): it has mean zero and is independent of y, so it leaves
the expected update unchanged, but it makes the *sign* of g_i noisy, with variance tau^2 / n_i on
prompts with mixed outcomes (sum_j A_ij^2 = n_i) -- the v_b / n_b form of the paper's Eq. 28.
Without it a one-logit Bernoulli model has g_i = sample std of y >= 0, an update that can never
point the wrong way. The prompt skill t makes the per-prompt signal matter (each prompt is
visited ~18 times in 1,000 steps), so rollout counts change what is learned, not only the noise.

M is the interference knob: a gain h on group k lowers every other group by c h. Its
eigenvalues are 1 + c and 1 - kappa, so for kappa <= 1 the step is still an ascent direction
(a preconditioned gradient) and kappa = 1 makes group learning zero-sum.

The estimate is unbiased for its own expectation, which has a closed form (``expected_gradient``):
E[g_i] = sum_c Bin(c; n_i, p_i) phi(c, n_i) with phi(c, n) = 2 c (1 - c/n) / (n (2 sd_c + eps)),
sd_c = sqrt(c/n (1 - c/n)) (population std; 0 when c is 0 or n). It is not the gradient of the
expected reward, 2 p (1 - p): GRPO's std normalisation turns it into E[sample std of y], and
n_i changes the *mean* of the update (fewer all-equal groups as n grows) as well as its noise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.special import expit, gammaln

from gdro_lab import ConfigError
from gdro_lab._validate import require, require_choice, require_range
from gdro_lab.grpo import group_mean, grpo_advantages


HELDOUT_MIN = 40
"""Smallest number of held-out prompts per group and split (worst-group metrics of tiny groups are noise)."""


@dataclass(frozen=True)
class WorldConfig:
    """The world and the learner.

    Defaults were calibrated on GRPO alone (never on a GDRO method) to a base model at ~33% mean
    accuracy whose worst latent group ends near the paper's GRPO toy level (~30%) after 1,000 steps.
    """

    num_prompts: int = 14116
    """P: prompts in the training pool (the paper's DAPO 14.1k)."""
    num_groups: int = 32
    """K: latent groups (topics) the prompts belong to."""
    group_sizes: str = "zipf"
    """'zipf' (|D_k| ∝ (k+1)^-s, deterministic) or 'pareto' (i.i.d. Pareto(alpha) draws)."""
    size_exponent: float = 1.0
    """s for 'zipf' sizes; alpha for 'pareto' sizes (smaller = heavier tail)."""
    difficulty_offset: float = -0.25
    """d0: logit difficulty of the easiest prompts (p = sigmoid(-d0) at the start)."""
    group_difficulty_scale: float = 0.3
    """c_g: scale of the group-level Lomax hardness."""
    group_difficulty_tail: float = 2.5
    """alpha_g: Lomax shape of group hardness, taken at the K stratified quantiles (k + 1/2)/K."""
    prompt_difficulty_scale: float = 1.0
    """c_p: scale of the prompt-level Lomax hardness."""
    prompt_difficulty_tail: float = 1.5
    """alpha_p: Lomax shape of prompt hardness."""
    size_difficulty_corr: float = 0.5
    """rho in [-1, 1]: rank correlation between rarity and group hardness (1: rarest = hardest)."""
    lr_shared: float = 0.01
    """Step size of the shared skill s0."""
    lr_group: float = 0.2
    """Step size of the group skills s_K."""
    interference: float = 0.0
    """kappa in [0, 1]: a gain on one group lowers each other group by kappa/(K-1) of it (negative transfer)."""
    transfer: float = 0.5
    """T in [0, 1]: a gain on one group raises each other group by T/(K-1) of it (positive transfer)."""
    curvature: float = 0.15
    """Price of a step: the shared skill loses curvature * mean_i dz_i^2 per step (0 = steps are free)."""
    update_noise: float = 0.05
    """Group skills get N(0, (update_noise * rms dz)^2) noise per step (noise that grows with the step)."""
    heldout_frac: float = 0.2
    """Held-out prompts per group as a fraction of its training prompts, at least 2 x HELDOUT_MIN
    (half val, half test; 0 = none)."""
    unsolvable_frac: float = 0.0
    """Fraction of prompts (train and held-out) made practically never solvable (difficulty + 12)."""
    lr_prompt: float = 0.15
    """Step size of the prompt-specific skill t_i (0 = prompts learn only through shared/group skills)."""
    score_noise: float = 2.0
    """tau: std of the correctness-unrelated part of each rollout's score (0 = the exact Bernoulli score)."""
    aggregation: str = "prompt"
    """'prompt' (Eq. 7: each prompt's rollouts averaged, prompts equal) or 'rollout' (each rollout equal)."""
    advantage_std: str = "population"
    """'population' (paper Eq. 3) or 'bessel' (verl's torch.std) in the GRPO advantages."""
    normalize_std: bool = True
    """Divide advantages by the group std (GRPO); False gives Dr.GRPO's r - mean."""

    def __post_init__(self) -> None:
        owner = "WorldConfig"
        require(isinstance(self.num_prompts, int) and self.num_prompts >= 16, owner, "num_prompts",
                self.num_prompts, "an integer >= 16")
        require(isinstance(self.num_groups, int) and 1 <= self.num_groups <= self.num_prompts // 4, owner,
                "num_groups", self.num_groups, f"an integer in [1, num_prompts/4={self.num_prompts // 4}]")
        require_choice(owner, "group_sizes", self.group_sizes, ("zipf", "pareto"))
        require_range(owner, "size_exponent", self.size_exponent, 0.0, 10.0)
        require_range(owner, "difficulty_offset", self.difficulty_offset, -20.0, 20.0)
        for name in ("group_difficulty_scale", "prompt_difficulty_scale"):
            require_range(owner, name, getattr(self, name), 0.0, 20.0)
        for name in ("group_difficulty_tail", "prompt_difficulty_tail"):
            require_range(owner, name, getattr(self, name), 0.1, 100.0)
        require_range(owner, "size_difficulty_corr", self.size_difficulty_corr, -1.0, 1.0)
        require_range(owner, "lr_shared", self.lr_shared, 0.0, 100.0)
        require_range(owner, "lr_group", self.lr_group, 0.0, 1000.0)
        require_range(owner, "interference", self.interference, 0.0, 1.0)
        require_range(owner, "transfer", self.transfer, 0.0, 1.0)
        require_range(owner, "curvature", self.curvature, 0.0, 1000.0)
        require_range(owner, "update_noise", self.update_noise, 0.0, 100.0)
        require_range(owner, "heldout_frac", self.heldout_frac, 0.0, 1.0)
        require_range(owner, "unsolvable_frac", self.unsolvable_frac, 0.0, 0.99)
        require_range(owner, "lr_prompt", self.lr_prompt, 0.0, 100.0)
        require_range(owner, "score_noise", self.score_noise, 0.0, 100.0)
        require_choice(owner, "aggregation", self.aggregation, ("prompt", "rollout"))
        require_choice(owner, "advantage_std", self.advantage_std, ("population", "bessel"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def group_sizes(config: WorldConfig, rng: np.random.Generator) -> np.ndarray:
    """Sizes of the K groups, heavy-tailed, each >= 1, summing exactly to P (largest first for zipf)."""
    K, P = config.num_groups, config.num_prompts
    if config.group_sizes == "zipf":
        raw = (np.arange(K) + 1.0) ** (-config.size_exponent)
    else:
        raw = np.sort(rng.pareto(max(config.size_exponent, 1e-3), K) + 1.0)[::-1]
    share = raw / raw.sum()
    sizes = np.maximum(np.floor(share * (P - K)).astype(np.int64), 0) + 1
    remainder = share * (P - K) - np.floor(share * (P - K))
    extra = P - int(sizes.sum())
    sizes[np.argsort(-remainder, kind="stable")[:extra]] += 1
    return sizes


def lomax(rng: np.random.Generator, tail: float, size: int) -> np.ndarray:
    """Pareto II (Lomax) draws on [0, inf): P(X > x) = (1 + x)^(-tail)."""
    return rng.pareto(tail, size)


def lomax_quantile(u: np.ndarray, tail: float) -> np.ndarray:
    """Inverse CDF of Lomax(tail): (1 - u)^(-1/tail) - 1."""
    return (1.0 - np.asarray(u, float)) ** (-1.0 / tail) - 1.0


@dataclass
class WorldInstance:
    """One sampled world: group of each prompt and prompt difficulties (fixed during training)."""

    group_P: np.ndarray
    difficulty_P: np.ndarray
    group_hardness_K: np.ndarray
    sizes_K: np.ndarray
    heldout_group_H: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    heldout_difficulty_H: np.ndarray = field(default_factory=lambda: np.zeros(0))
    heldout_split_H: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """0 = val (chooses learning rates), 1 = test (reported)."""


def _difficulty(config: WorldConfig, rng: np.random.Generator, hardness_G: np.ndarray) -> np.ndarray:
    """d = d0 + c_g H_g + c_p E, E ~ Lomax(alpha_p); unsolvable_frac of them get + 12."""
    d = (config.difficulty_offset + config.group_difficulty_scale * hardness_G
         + config.prompt_difficulty_scale * lomax(rng, config.prompt_difficulty_tail, hardness_G.size))
    if config.unsolvable_frac > 0:
        d = d + 12.0 * (rng.random(hardness_G.size) < config.unsolvable_frac)
    return d


def make_world(config: WorldConfig, rng: np.random.Generator) -> WorldInstance:
    """Sample group memberships and heavy-tailed difficulties (see the module docstring)."""
    sizes = group_sizes(config, rng)
    K = config.num_groups
    # Stratified Lomax quantiles: the heavy-tailed shape without 32-draw extremes (an instance whose
    # worst group is hopeless would make worst-group metrics identical for every method).
    hardness = lomax_quantile((np.arange(K) + 0.5) / K, config.group_difficulty_tail)
    # Rank-match hardness to rarity: key = rho * rarity_z + sqrt(1 - rho^2) * noise.
    rarity = np.argsort(np.argsort(-sizes, kind="stable"), kind="stable").astype(float)
    rarity_z = (rarity - rarity.mean()) / max(rarity.std(), 1e-12)
    rho = config.size_difficulty_corr
    key = rho * rarity_z + np.sqrt(max(1.0 - rho**2, 0.0)) * rng.standard_normal(K)
    hardness_K = np.empty(K)
    hardness_K[np.argsort(key, kind="stable")] = hardness
    group_P = rng.permutation(np.repeat(np.arange(K), sizes))
    difficulty = _difficulty(config, rng, hardness_K[group_P])
    world = WorldInstance(group_P=group_P, difficulty_P=difficulty, group_hardness_K=hardness_K, sizes_K=sizes)
    if config.heldout_frac > 0:
        # A separate stream, so the training pool is the same whatever heldout_frac is.
        held_rng = np.random.default_rng(rng.integers(2**63))
        per_group = 2 * np.maximum(np.round(sizes * config.heldout_frac / 2).astype(np.int64), HELDOUT_MIN)
        world.heldout_group_H = np.repeat(np.arange(K), per_group)
        world.heldout_split_H = np.tile([0, 1], per_group.sum() // 2)
        world.heldout_difficulty_H = _difficulty(config, held_rng, hardness_K[world.heldout_group_H])
    return world


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
                 noise_R: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, float]]:
        """Per-prompt g_i = (1/n_i) sum_j A_ij (y_ij - p_i + tau xi_ij) with gdro_lab's GRPO advantages.

        ``noise_R`` are the standard normal xi_ij (None: no score noise).
        """
        cfg = self.config
        y = np.asarray(successes_R, float)
        advantages, metrics = grpo_advantages(2.0 * y - 1.0, counts_B, std=cfg.advantage_std,
                                              normalize_std=cfg.normalize_std)
        score = y - np.repeat(p_B, counts_B)
        if noise_R is not None and cfg.score_noise > 0:
            score = score + cfg.score_noise * np.asarray(noise_R, float)
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

    def group_accuracy(self) -> np.ndarray:
        w = self.world
        return np.bincount(w.group_P, weights=self.success_prob(), minlength=self.config.num_groups) / np.maximum(
            w.sizes_K, 1)

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


class BatchSampler:
    """Epochs of shuffled prompts, fixed-size batches, the last partial batch dropped (drop_last)."""

    def __init__(self, num_prompts: int, batch_size: int, rng: np.random.Generator):
        if not 1 <= batch_size <= num_prompts:
            raise ConfigError(f"batch={batch_size} is invalid: must be in [1, prompts={num_prompts}]")
        self.num_prompts = num_prompts
        self.batch_size = batch_size
        self.rng = rng
        self.order = rng.permutation(num_prompts)
        self.position = 0
        self.epoch = 0

    def next(self) -> np.ndarray:
        if self.position + self.batch_size > self.num_prompts:
            self.order = self.rng.permutation(self.num_prompts)
            self.position = 0
            self.epoch += 1
        batch = self.order[self.position:self.position + self.batch_size]
        self.position += self.batch_size
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"order": self.order.copy(), "position": self.position, "epoch": self.epoch,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order = np.asarray(state["order"], np.int64).copy()
        self.position = int(state["position"])
        self.epoch = int(state["epoch"])
        self.rng.bit_generator.state = state["rng"]


def _pool_metrics(p: np.ndarray, group: np.ndarray, K: int, k: int, prefix: str) -> dict[str, float]:
    """Mean and worst-group pass@1 and pass@k of success probabilities ``p`` (groups with no prompt skipped)."""
    sizes = np.bincount(group, minlength=K)
    seen = sizes > 0
    acc_K = np.bincount(group, weights=p, minlength=K)[seen] / sizes[seen]
    passk = 1.0 - (1.0 - p) ** k
    passk_K = np.bincount(group, weights=passk, minlength=K)[seen] / sizes[seen]
    return {f"{prefix}accuracy": float(p.mean()), f"{prefix}worst_group_accuracy": float(acc_K.min()),
            f"{prefix}pass@{k}": float(passk.mean()), f"{prefix}worst_group_pass@{k}": float(passk_K.min())}


def sample_rollouts(rng: np.random.Generator, p_B: np.ndarray, counts_B: np.ndarray) -> np.ndarray:
    """Flat ragged Bernoulli successes: prompt i owns the next counts_B[i] draws of y ~ Bern(p_i)."""
    return rng.random(int(counts_B.sum())) < np.repeat(p_B, counts_B)
