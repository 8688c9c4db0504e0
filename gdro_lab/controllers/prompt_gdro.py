"""Prompt-GDRO: an EMA-debiased exponential-weights adversary over difficulty bins (§3.2).

Per step t, for each bin b present in the batch (paper Eq. 12-16):
    l_bar_t(b) = mean over the bin's prompts of the difficulty signal          (Eq. 13)
    x_t(b)     = l_bar_t(b) / max(B q_hat_t(b), floor)   if share_normalize     (debiasing)
    S_t(b)     = (1 - beta) S_{t-1}(b) + beta x_t(b)                            (Eq. 12)
    omega_t(b) = exp(eta clip(S_t(b), -C, C))                                   (Eq. 14)
    q_t(b)     = (1 - gamma) omega_t(b) / sum_j omega_t(j) + gamma / B          (Eq. 15)
and prompt i's advantages are multiplied by m_i (Eq. 16), in one of two named modes:
    paper: m_i = min(omega_t(b_i), cap)                      (raw capped omega, as Eq. 16)
    mean1: m_i = min(q_t(b_i) / mean_j q_t(b_j), cap)        (the released code: mean 1 over the batch)

Departures, and why:
- Debiasing divides by B q_hat, not q_hat as the code does, so C and eta mean the same with it on or off.
- The clip at C (absent in the code) is applied; C = 5 by default (the paper gives none).
- The EMA starts at a bin's first observation (as the code); absent bins keep their score.
- The gamma mixing runs over all B bins (the code mixes over bins present in the batch).
- Unassigned prompts (never seen by the classifier) get multiplier 1 and feed no bin.
- Default signal is the failure rate (see gdro_lab.controllers.signals for why the surrogate is ~0).
Rules: gdro_lab.functional.update_rules. Detail: docs/core-controllers-notes.md#gdro_lab-controllers-prompt_gdro.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdro_lab._validate import require_choice, require_int, require_range
from gdro_lab.checks import check_bins
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.signals import SIGNALS
from gdro_lab.functional.diagnostics import support_of_distribution
from gdro_lab.functional.update_rules import debiased_signal, ema_from_first, entropic_weights, omega

__all__ = ["PromptGDRO", "UniformWeighter", "WeighterConfig"]


@dataclass(frozen=True)
class WeighterConfig:
    """Configuration of a prompt weighter (Prompt-GDRO and its uniform baseline)."""

    num_bins: int = 10
    """B: number of difficulty bins (or static groups)."""
    eta: float = 0.65
    """eta_q: exponential-weights step on the EMA score (Eq. 14)."""
    gamma: float = 0.01
    """Uniform mixing of the bin distribution (Eq. 15)."""
    ema_beta: float = 0.12
    """beta: weight of the newest observation in the EMA (Eq. 12); 1.0 = no EMA."""
    share_normalize: bool = True
    """Divide the bin signal by its share relative to uniform, B q_hat (debiasing)."""
    share_floor: float = 0.1
    """Floor on B q_hat when share_normalize is on (0.1 = a bin at a tenth of its uniform share)."""
    clip: float = 5.0
    """C: the EMA score is clipped to [-C, C] before the exponential (Eq. 14)."""
    max_weight: float = 15.0
    """omega_max: cap on the multiplier applied to a prompt's advantages (Eq. 16)."""
    weight_mode: str = "paper"
    """'paper' (raw capped omega, Eq. 16) or 'mean1' (released code: renormalised to batch mean 1)."""
    signal: str = "failure_rate"
    """Difficulty signal, a name in gdro_lab.controllers.signals.SIGNALS."""

    def __post_init__(self) -> None:
        owner = "WeighterConfig"
        require_int(owner, "num_bins", self.num_bins, 1)
        require_range(owner, "eta", self.eta, 0.0)
        require_range(owner, "gamma", self.gamma, 0.0, 1.0)
        require_range(owner, "ema_beta", self.ema_beta, 0.0, 1.0, lo_open=True)
        require_range(owner, "share_floor", self.share_floor, 0.0, 1.0, lo_open=True)
        require_range(owner, "clip", self.clip, 0.0, lo_open=True)
        require_range(owner, "max_weight", self.max_weight, 1.0)
        require_choice(owner, "weight_mode", self.weight_mode, ("paper", "mean1"))
        require_choice(owner, "signal", self.signal, tuple(SIGNALS))


class UniformWeighter:
    """GRPO baseline (registry name ``uniform``): every multiplier is 1, bin weights uniform.

    Still tracks the EMA scores so the logs show what an adversary would have seen (on Python floats:
    docs/core-controllers-notes.md#gdro_lab-controllers-prompt_gdro).
    """

    config_class = WeighterConfig

    def __init__(self, config: WeighterConfig | None = None, seed: int | None = None):
        self.config = config or WeighterConfig()
        self.rng = np.random.default_rng(seed)
        self.seen_G = np.zeros(self.config.num_bins, bool)
        self._set_score(np.zeros(self.config.num_bins))

    def _set_score(self, score_G: np.ndarray) -> None:
        """The scores and what follows from them: the weights (once per step for update(), multipliers()
        and bin_weights()) and, on first use, the multiplier table."""
        self.score_G = score_G
        self._weights = self._compute_weights()
        self._table: np.ndarray | None = None

    @property
    def num_bins(self) -> int:
        return self.config.num_bins

    @property
    def signal(self) -> str:
        """The difficulty signal its scores follow (config.signal, a key of SIGNALS)."""
        return self.config.signal

    def _compute_weights(self) -> list[float]:
        return [1.0 / self.num_bins] * self.num_bins

    def bin_weights(self) -> np.ndarray:
        """Normalised bin weights q_t(b) (Eq. 15)."""
        return np.array(self._weights)

    def multipliers(self, bins_P: np.ndarray) -> np.ndarray:
        """Advantage multiplier per prompt (Eq. 16)."""
        return np.ones(check_bins(type(self).__name__, "bins_P", bins_P, self.num_bins).size)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        """Fold this step's per-bin signal into the EMA scores (Eq. 12-13)."""
        cfg = self.config
        G = cfg.num_bins
        signal_P = SIGNALS[cfg.signal](feedback)
        sums = feedback.bin_sums(signal_P, G)
        counts = feedback.bin_count_list(G)
        assigned = feedback.num_assigned
        mean = [total / count if count else math.nan for total, count in zip(sums, counts)]     # Eq. 13
        if cfg.share_normalize:
            mean = debiased_signal(mean, [count / assigned if count else 0.0 for count in counts],
                                   cfg.share_floor).tolist()
        old, seen = self.score_G.tolist(), self.seen_G.tolist()
        blended = ema_from_first([s if ok else math.nan for s, ok in zip(old, seen)], mean, cfg.ema_beta).tolist()
        score = [new if count else s for new, s, count in zip(blended, old, counts)]  # absent bins keep theirs
        if not all(ok or not count for ok, count in zip(seen, counts)):  # a bin seen for the first time
            self.seen_G = np.array([ok or count > 0 for ok, count in zip(seen, counts)])
        self._set_score(np.array(score))
        weights = self._weights
        signal_sum = float(np.add.reduce(signal_P))
        signal_mean = signal_sum / signal_P.size if math.isfinite(signal_sum) else float(np.nanmean(signal_P))
        return {"prompt_gdro/effective_support": support_of_distribution(weights),
                "prompt_gdro/max_weight": max(weights),
                "prompt_gdro/score_max": max(score),
                "prompt_gdro/signal_mean": signal_mean}

    def state_dict(self) -> dict[str, Any]:
        return {"score": self.score_G.copy(), "seen": self.seen_G.copy(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._set_score(np.asarray(state["score"], float).copy())
        self.seen_G = np.asarray(state["seen"], bool).copy()
        self.rng.bit_generator.state = state["rng"]


class PromptGDRO(UniformWeighter):
    """EMA-debiased exponential-weights adversary over bins (registry name ``gdro``)."""

    def omega(self) -> np.ndarray:
        """Eq. 14: unnormalised omega_t(b) = exp(eta clip(S_t(b), -C, C))."""
        return omega(self.score_G.tolist(), self.config.eta, self.config.clip)

    def _compute_weights(self) -> list[float]:
        cfg = self.config
        return entropic_weights(self.score_G.tolist(), cfg.eta, cfg.gamma, cfg.clip).tolist()

    def _multiplier_table(self) -> np.ndarray:
        """min(omega_b, cap) per bin, then 1 for unassigned prompts (bin -1 reads the last entry)."""
        if self._table is None:
            cap = self.config.max_weight
            self._table = np.array([min(value, cap) for value in self.omega().tolist()] + [1.0])
        return self._table

    def multipliers(self, bins_P: np.ndarray) -> np.ndarray:
        cfg = self.config
        bins = check_bins(type(self).__name__, "bins_P", bins_P, self.num_bins)
        if cfg.weight_mode == "paper":
            return self._multiplier_table().take(bins)  # one gather
        assigned = bins >= 0
        out = np.ones(bins.size)
        if not assigned.any():
            return out
        per_prompt = self.bin_weights()[bins[assigned]]
        if np.ptp(per_prompt) > 0:  # equal weights give exactly 1, not 1 +- rounding
            out[assigned] = np.minimum(per_prompt / per_prompt.mean(), cfg.max_weight)
        return out
