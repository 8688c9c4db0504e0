"""Prompt selectors (registry family ``selector``): which prompts are rolled out, which are trained on.

Interface (uniform constructor ``cls(config, seed)``, state dicts with the RNG): ``screen(prompt_ids)
-> keep_P`` before generation (a skipped prompt costs nothing; :func:`fill_batch` draws the next);
``accept(feedback) -> train_P`` after it (a dropped group's rollouts count as spent);
``update(feedback) -> metrics`` with every generated group. Equal compute: a step generates exactly
P n_bar rollouts and what ``accept`` drops is not refilled (``compute/*``: :func:`compute_metrics`).
Selectors: ``none``; ``dynamic_sampling`` (DAPO, arXiv 2503.14476: train only on groups with mixed
successes); ``greso`` (GRESO, arXiv 2506.02177: skip prompts with long all-correct / all-wrong
streaks, then DAPO's filter). Departures (no regeneration within the step, to keep compute equal; a
fixed metric; per-step targets): docs/core-controllers-notes.md#gdro_lab-controllers-selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gdro_lab._validate import require_int, require_range
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_stats import PromptStats
from gdro_lab.functional.grpo import group_is_constant, group_sum


@dataclass(frozen=True)
class SelectorConfig:
    """Configuration of a prompt selector (GRESO's fields; GRESO's released defaults)."""

    p_easy: float = 0.5
    """GRESO: initial base of the keep probability p_easy^k of a prompt all correct in its last k visits."""
    p_hard: float = 0.5
    """GRESO: the same for prompts all wrong in their last k visits."""
    target_zero_variance: float = 0.25
    """GRESO: target share of zero-variance groups (one third all correct, two thirds all wrong)."""
    adapt_step: float = 0.01
    """GRESO: change of p_easy / p_hard per step."""
    p_floor: float = 0.05
    """GRESO: smallest p_easy / p_hard (the code's min_p)."""
    p_ceiling: float = 0.95
    """GRESO: largest p_easy / p_hard (the code's max_p)."""
    min_keep: float = 0.01
    """GRESO: smallest keep probability of any prompt (the code's max(p^k, 0.01))."""
    easy_rate: float = 0.98
    """A visit counts as all correct at this success rate or above (the code: reward >= 0.98)."""
    hard_rate: float = 0.11
    """A visit counts as all wrong at this success rate or below (the code: reward <= 0.11)."""
    max_draw_factor: int = 8
    """fill_batch: draw at most this many times the batch before filling it with skipped prompts."""

    def __post_init__(self) -> None:
        owner = "SelectorConfig"
        for name in ("p_easy", "p_hard", "target_zero_variance", "min_keep", "easy_rate", "hard_rate"):
            require_range(owner, name, getattr(self, name), 0.0, 1.0)
        require_range(owner, "adapt_step", self.adapt_step, 0.0, 1.0)
        require_range(owner, "p_floor", self.p_floor, 0.0, 1.0)
        require_range(owner, "p_ceiling", self.p_ceiling, self.p_floor, 1.0)
        require_int(owner, "max_draw_factor", self.max_draw_factor, 1)


def greso_keep_probability(easy_streak_P: np.ndarray, hard_streak_P: np.ndarray, p_easy: float, p_hard: float,
                           min_keep: float = 0.01) -> np.ndarray:
    """GRESO's keep probability before rollout: max(p_easy^k_e, min_keep) for an easy streak k_e > 0,
    max(p_hard^k_h, min_keep) for a hard streak k_h > 0, 1 otherwise (unseen prompts included)."""
    easy = np.asarray(easy_streak_P, np.int64)
    hard = np.asarray(hard_streak_P, np.int64)
    keep = np.ones(easy.size)
    keep = np.where(easy > 0, np.maximum(p_easy ** easy, min_keep), keep)
    return np.where((easy == 0) & (hard > 0), np.maximum(p_hard ** hard, min_keep), keep)


class NoSelector:
    """Every prompt rolled out and trained on (registry ``none``)."""

    config_class = SelectorConfig
    screens = False
    """Whether ``screen`` may skip prompts (loops skip the refill machinery when it never does)."""

    def __init__(self, config: SelectorConfig | None = None, seed: int | None = None):
        self.config = config or SelectorConfig()
        self.rng = np.random.default_rng(seed)
        self._screened = self._skipped = 0

    def screen(self, prompt_ids: Any) -> np.ndarray:
        """Keep (True) or skip each prompt before generation (string ids or PromptIndex indices)."""
        self._screened += len(prompt_ids)
        return np.ones(len(prompt_ids), bool)

    def accept(self, feedback: StepFeedback) -> np.ndarray:
        return np.ones(feedback.num_prompts, bool)

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        metrics = {"select/screened": float(self._screened), "select/skipped": float(self._skipped)}
        self._screened = self._skipped = 0
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


class DynamicSampling(NoSelector):
    """DAPO's dynamic sampling (registry ``dynamic_sampling``): train only on groups with mixed successes."""

    def accept(self, feedback: StepFeedback) -> np.ndarray:
        """True for a group whose successes are not all equal (DAPO's acc metric; the rewards are not read)."""
        return ~group_is_constant(feedback.successes_R, feedback.counts_P)


class GRESO(DynamicSampling):
    """GRESO's probabilistic pre-rollout skip plus DAPO's filter (registry ``greso``)."""

    screens = True

    def __init__(self, config: SelectorConfig | None = None, seed: int | None = None):
        super().__init__(config, seed)
        self.p_easy, self.p_hard = float(self.config.p_easy), float(self.config.p_hard)
        self.stats = PromptStats(easy_rate=self.config.easy_rate, hard_rate=self.config.hard_rate, track=("streaks",))

    @property
    def prompts(self) -> Any:
        return self.stats.prompts

    def bind_prompts(self, prompts: Any) -> None:
        """Share the run's PromptIndex (before the first update)."""
        self.stats.bind_prompts(prompts)

    def screen(self, prompt_ids: Any) -> np.ndarray:
        rows = self.stats.rows(prompt_ids)
        keep_p = greso_keep_probability(self.stats.take("easy_streak", rows), self.stats.take("hard_streak", rows),
                                        self.p_easy, self.p_hard, self.config.min_keep)
        keep = self.rng.random(len(prompt_ids)) < keep_p
        self._screened += len(prompt_ids)
        self._skipped += int((~keep).sum())
        return keep

    def update(self, feedback: StepFeedback) -> dict[str, float]:
        cfg = self.config
        metrics = super().update(feedback)
        self.stats.record(feedback)
        rate = group_sum(np.asarray(feedback.successes_R, float), feedback.counts_P) / feedback.counts_P
        easy_share, hard_share = float(np.mean(rate >= cfg.easy_rate)), float(np.mean(rate <= cfg.hard_rate))
        move = cfg.adapt_step
        self.p_easy = float(np.clip(self.p_easy + (-move if easy_share >= cfg.target_zero_variance / 3 else move),
                                    cfg.p_floor, cfg.p_ceiling))
        self.p_hard = float(np.clip(self.p_hard + (-move if hard_share >= 2 * cfg.target_zero_variance / 3 else move),
                                    cfg.p_floor, cfg.p_ceiling))
        metrics.update({"select/p_easy": self.p_easy, "select/p_hard": self.p_hard,
                        "select/easy_share": easy_share, "select/hard_share": hard_share})
        return metrics

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update({"p_easy": self.p_easy, "p_hard": self.p_hard, "prompts": self.stats.state_dict()})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self.stats.load_state_dict(state["prompts"])


def fill_batch(selector: Any, draw: Callable[[int], np.ndarray], ids_of: Callable[[np.ndarray], Any],
               batch_size: int, first: np.ndarray | None = None) -> np.ndarray:
    """The next ``batch_size`` items of a loop's data order that pass ``selector.screen``.

    ``draw(k)`` returns the next k items of the loop's order, ``ids_of`` their prompt ids; ``first``
    (optional) is an already drawn candidate batch. After max_draw_factor x batch_size candidates, or
    when ``draw`` returns nothing, the remaining slots take the earliest skipped candidates.
    """
    candidates = draw(batch_size) if first is None else np.asarray(first)
    if not getattr(selector, "screens", False):
        return candidates
    kept, skipped, drawn = [], [], 0
    while True:
        drawn += len(candidates)
        keep = np.asarray(selector.screen(ids_of(candidates)), bool)
        kept.append(candidates[keep])
        skipped.append(candidates[~keep])
        have = sum(len(k) for k in kept)
        if have >= batch_size or drawn >= selector.config.max_draw_factor * batch_size:
            break
        candidates = np.asarray(draw(batch_size - have))
        if candidates.size == 0:
            break
    chosen = np.concatenate(kept)[:batch_size]
    if chosen.size < batch_size:
        chosen = np.concatenate([chosen, np.concatenate(skipped)[: batch_size - chosen.size]])
    return chosen


def compute_metrics(feedback: StepFeedback, train_P: np.ndarray, tokens_R: np.ndarray | None = None
                    ) -> dict[str, float]:
    """compute/* of a step: rollouts (and tokens, when known) generated and trained on, prompts trained."""
    counts = np.asarray(feedback.counts_P, np.int64)
    train = np.asarray(train_P, bool)
    out = {"compute/rollouts_generated": float(counts.sum()), "compute/rollouts_trained": float(counts[train].sum()),
           "compute/prompts_trained": float(train.sum()), "compute/prompts_generated": float(counts.size)}
    if tokens_R is not None:
        tokens = np.asarray(tokens_R, float)
        out["compute/tokens_generated"] = float(tokens.sum())
        out["compute/tokens_trained"] = float(tokens[np.repeat(train, counts)].sum())
    return out
