"""Heavy-tailed bandit world: latent groups, a logistic item-response learner, Bernoulli rollouts.

Shapes: ``P`` prompts, ``K`` latent groups, ``B`` prompts in a batch, ``R`` rollouts (flat, ragged).

    group sizes   |D_k| ∝ (k + 1)^(-s)  (Zipf)  or  Pareto(alpha) draws, k = 0..K-1
    difficulty    d_i = d0 + c_g H_g(i) + c_p E_i,   H_k = Lomax(alpha_g) quantile (k+1/2)/K, E_i ~ Lomax(alpha_p)
    length        L = min(max(round(e^z), 1), max_new_tokens),  z ~ N(a + b (1 - p) + c (1 - y), s^2)

Lengths (``lengths``, off by default): a rollout's generated tokens, y its success, p its prompt's true
success probability, from an RNG stream of their own. Held-out prompts (``heldout_frac``) are never
trained on; with ``heldout_split="groups"`` (default) val and test hold different latent groups. The
learner: ``simulators.learner``. Detail, the split's history and why this length model:
docs/simulator-notes.md#simulators-world.
"""


from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gdro_lab import ConfigError
from gdro_lab._validate import require, require_choice, require_range


HELDOUT_MIN = 40
"""Smallest number of held-out prompts per group and split (worst-group metrics of tiny groups are noise)."""


@dataclass(frozen=True)
class WorldConfig:
    """The world and the learner.

    Defaults were calibrated on GRPO alone (never on a GDRO method) to a base model at ~33% mean
    accuracy whose worst latent group ends near the paper's GRPO toy level (~30%) after 1,000 steps;
    the length model's are its maximum-likelihood fit (``simulators.calibrate.lengths``) to the CPU LM
    study's seed-0 warm start sampled 8 times on its 3,200 training prompts (25,600 responses).
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
    (0 = none)."""
    heldout_split: str = "groups"
    """'groups': val and test hold different latent groups (half each, paired by size, drawn per
    seed; one group: as 'prompts'); 'prompts': every group's held-out prompts alternate val/test."""
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
    always_solved_frac: float = 0.0
    """Fraction of prompts (train and held-out) made practically always solved (difficulty - 12);
    with ``unsolvable_frac`` the never- and always-solved masses of a calibrated world."""
    group_shares: tuple[float, ...] = ()
    """Relative sizes of the K groups, in group order (a calibrated world: the data's label shares);
    empty = drawn from ``group_sizes`` / ``size_exponent``."""
    group_hardness_rank: tuple[int, ...] = ()
    """Hardness rank of each group (0 = easiest; a permutation of 0..K-1): group k gets the rank's
    stratified Lomax hardness; empty = ranks drawn with ``size_difficulty_corr``."""
    lengths: bool = False
    """Draw each rollout's generated tokens (logged as compute/tokens_*); off: rollouts have no length and
    runs replay those from before the length model bit-identically."""
    length_log_mean: float = 2.39
    """a: log tokens of a success on a prompt solved surely (p = 1), before rounding and the cap."""
    length_hardness: float = 0.103
    """b: added log tokens per unit of 1 - p (hard prompts get longer answers)."""
    length_failure: float = -0.0183
    """c: added log tokens of a failed rollout."""
    length_log_sd: float = 0.0785
    """s: std of the log tokens around their mean."""
    max_new_tokens: int = 16
    """Cap of a rollout's tokens (generation's max_new_tokens: a longer response is cut there)."""

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
        require_choice(owner, "heldout_split", self.heldout_split, ("groups", "prompts"))
        require_range(owner, "unsolvable_frac", self.unsolvable_frac, 0.0, 0.99)
        require_range(owner, "always_solved_frac", self.always_solved_frac, 0.0, 0.99 - self.unsolvable_frac)
        require_range(owner, "lr_prompt", self.lr_prompt, 0.0, 100.0)
        require_range(owner, "score_noise", self.score_noise, 0.0, 100.0)
        require_choice(owner, "aggregation", self.aggregation, ("prompt", "rollout"))
        require_choice(owner, "advantage_std", self.advantage_std, ("population", "bessel"))
        require(isinstance(self.lengths, bool), owner, "lengths", self.lengths, "true or false")
        for name in ("length_log_mean", "length_hardness", "length_failure"):
            require_range(owner, name, getattr(self, name), -20.0, 20.0)
        require_range(owner, "length_log_sd", self.length_log_sd, 0.0, 10.0)
        require(isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1, owner, "max_new_tokens",
                self.max_new_tokens, "an integer >= 1")
        self._check_groups()

    def _check_groups(self) -> None:
        """The explicit group shares and hardness ranks (lists from TOML/JSON become tuples)."""
        owner, K = "WorldConfig", self.num_groups
        for name in ("group_shares", "group_hardness_rank"):
            value = getattr(self, name)
            require(isinstance(value, (list, tuple)) and len(value) in (0, K), owner, name, value,
                    f"a list of num_groups={K} numbers, or empty")
            object.__setattr__(self, name, tuple(value))
        require(all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")
                    for v in self.group_shares), owner, "group_shares", self.group_shares, "positive numbers")
        require(not self.group_hardness_rank or sorted(self.group_hardness_rank) == list(range(K)), owner,
                "group_hardness_rank", self.group_hardness_rank, f"a permutation of 0..{K - 1}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def group_sizes(config: WorldConfig, rng: np.random.Generator) -> np.ndarray:
    """Sizes of the K groups, heavy-tailed, each >= 1, summing exactly to P (largest first for zipf;
    in the given order for explicit ``group_shares``)."""
    K, P = config.num_groups, config.num_prompts
    if config.group_shares:
        raw = np.asarray(config.group_shares, float)
    elif config.group_sizes == "zipf":
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


def lomax_quantile(u: np.ndarray, tail: float | np.ndarray) -> np.ndarray:
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
    split_K: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Split of each latent group's held-out prompts under heldout_split='groups' (empty otherwise)."""


def _difficulty(config: WorldConfig, rng: np.random.Generator, hardness_G: np.ndarray) -> np.ndarray:
    """d = d0 + c_g H_g + c_p E, E ~ Lomax(alpha_p); unsolvable_frac of them get + 12, always_solved_frac
    of them - 12 (one uniform draw per prompt decides both, so the two masses never overlap)."""
    d = (config.difficulty_offset + config.group_difficulty_scale * hardness_G
         + config.prompt_difficulty_scale * lomax(rng, config.prompt_difficulty_tail, hardness_G.size))
    if config.unsolvable_frac > 0 or config.always_solved_frac > 0:
        draw = rng.random(hardness_G.size)
        d = d + 12.0 * (draw < config.unsolvable_frac) - 12.0 * (draw >= 1.0 - config.always_solved_frac)
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
    if config.group_hardness_rank:
        hardness_K = hardness[np.asarray(config.group_hardness_rank, np.int64)]
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
        if config.heldout_split == "groups" and K >= 2:  # drawn after the difficulties: same prompts either way
            world.split_K = split_groups(sizes, held_rng)
            world.heldout_split_H = world.split_K[world.heldout_group_H]
    return world


def split_groups(sizes_K: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """0 (val) or 1 (test) per group: groups paired by size (largest first), one of each pair to each
    split at random; an odd last group goes to a random split. Both splits get large and rare groups."""
    order = np.argsort(-np.asarray(sizes_K), kind="stable")
    split = np.zeros(order.size, np.int64)
    for start in range(0, order.size, 2):
        pair = order[start:start + 2]
        first = int(rng.integers(2))
        split[pair[0]] = first
        if pair.size > 1:
            split[pair[1]] = 1 - first
    return split


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
        return self.take(self.batch_size)

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` prompts (a new epoch when fewer are left; ``next`` = take(batch_size))."""
        if self.position + count > self.num_prompts:
            self.order = self.rng.permutation(self.num_prompts)
            self.position = 0
            self.epoch += 1
        batch = self.order[self.position:self.position + count]
        self.position += count
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"order": self.order.copy(), "position": self.position, "epoch": self.epoch,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order = np.asarray(state["order"], np.int64).copy()
        self.position = int(state["position"])
        self.epoch = int(state["epoch"])
        self.rng.bit_generator.state = state["rng"]


def sample_rollouts(rng: np.random.Generator, p_B: np.ndarray, counts_B: np.ndarray) -> np.ndarray:
    """Flat ragged Bernoulli successes: prompt i owns the next counts_B[i] draws of y ~ Bern(p_i)."""
    return rng.random(int(counts_B.sum())) < np.repeat(p_B, counts_B)



def sample_lengths(rng: np.random.Generator, p_B: np.ndarray, counts_B: np.ndarray, successes_R: np.ndarray,
                   config: WorldConfig) -> np.ndarray:
    """Generated tokens of each rollout (flat, as ``sample_rollouts``): the model of the module docstring."""
    z = config.length_log_sd * rng.standard_normal(successes_R.size) + length_log_mu(config, np.repeat(p_B, counts_B),
                                                                                     successes_R)
    return np.clip(np.rint(np.exp(np.minimum(z, 50.0))), 1, config.max_new_tokens).astype(np.int64)


def length_log_mu(config: WorldConfig, p: np.ndarray, success: np.ndarray) -> np.ndarray:
    """Mean of the log tokens: a + b (1 - p) + c (1 - y)."""
    return (config.length_log_mean + config.length_hardness * (1.0 - np.asarray(p, float))
            + config.length_failure * (1.0 - np.asarray(success, float)))


def mean_length(config: WorldConfig, p: np.ndarray, success: np.ndarray) -> np.ndarray:
    """E[min(e^z, cap)] = e^(mu + s^2/2) Phi((log cap - mu - s^2)/s) + cap Phi(-(log cap - mu)/s): the mean
    tokens before rounding (which moves it by well under a token)."""
    from scipy.special import ndtr

    mu, s, cap = length_log_mu(config, p, success), max(config.length_log_sd, 1e-12), config.max_new_tokens
    return (np.exp(mu + s * s / 2) * ndtr((np.log(cap) - mu - s * s) / s) + cap * ndtr((mu - np.log(cap)) / s))
