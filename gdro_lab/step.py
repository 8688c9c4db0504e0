"""One controller step of a method: the part of a training step that *is* the method, written once.

A :class:`MethodStep` owns a method's four controllers (classifier, weighter, allocator, prompt
selector); every training loop (the simulator, ``gdro train``, the verl plugin) draws, generates,
scores and trains around its calls ``choose``, ``plan``, ``observe`` and ``record`` (each:
docs/core-step.md). ``state_dict`` / ``load_state_dict`` save and restore the four controllers (RNG
included). The step as a diagram: docs/core-step.md#gdro_lab-step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.allocation import duet
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompts import PromptIndex
from gdro_lab.controllers.protocols import Allocator, Classifier, ScoredWeighter, Selector, Weighter
from gdro_lab.controllers.registry import build
from gdro_lab.controllers.selection import compute_metrics, fill_batch
from gdro_lab.controllers.signals import SIGNALS
from gdro_lab.functional import diagnostics as diag
from gdro_lab.methods import FAMILIES, MethodSpec, configure
from gdro_lab.runformat.record import step_record

Builder = Callable[..., Any]
"""``builder(family, name, config, seed=..., prompts=...)`` -> controller (``gdro_lab.controllers.registry.build``)."""


class BudgetError(ConfigError):
    """An allocator's plan breaks the equal-compute budget (sum B n_bar, each count in [n_min, n_max])."""


@dataclass(frozen=True)
class Plan:
    """The step's plan: prompt ids (the loop's ints or strings), their bins and rollout counts (int64)."""

    ids_P: Any
    bins_P: np.ndarray
    counts_P: np.ndarray


@dataclass(frozen=True)
class Outcome:
    """What the controllers made of a step's feedback.

    ``train_P``: the groups trained on (selector.accept); ``multipliers_P``: the advantage multipliers
    (Eq. 16); ``metrics``: the controllers' update metrics and compute/*; ``weighter_feedback``: the
    feedback on the weighter's partition (``feedback`` itself on difficulty bins).
    """

    feedback: StepFeedback
    weighter_feedback: StepFeedback
    train_P: np.ndarray
    multipliers_P: np.ndarray
    metrics: dict[str, float]


def budget_problem(name: str, counts_P: Any, num_prompts: int, n_bar: int, n_min: int, n_max: int) -> str | None:
    """Why ``counts_P`` is not a plan of exactly ``num_prompts`` x n_bar rollouts with every count in
    [n_min, n_max] (one integer per prompt), in one line; None when it is."""
    counts = np.asarray(counts_P)
    budget = num_prompts * n_bar
    if counts.shape == (num_prompts,) and np.issubdtype(counts.dtype, np.integer):
        if num_prompts == 0 or (int(counts.sum()) == budget and counts.min() >= n_min and counts.max() <= n_max):
            return None
        got = f"{int(counts.sum())} rollouts in [{counts.min()}, {counts.max()}]"
    else:
        got = f"an array of shape {counts.shape} and dtype {counts.dtype}"
    return (f"allocator {name!r} planned {got} for {num_prompts} prompts, not {budget} in [{n_min}, {n_max}] "
            f"(n_bar = {n_bar} per prompt, one integer each): every step must spend exactly the budget")


class MethodStep:
    """A method's controllers and its controller step (module docstring).

    ``configs``: per family a config object or a mapping; ``seed``: one int (the controllers get seed ..
    seed + 3) or four ints; ``prompts``: the run's PromptIndex; ``builder``: the loop's controller factory
    (default ``gdro_lab.controllers.registry.build``). :meth:`from_method` resolves ``configs`` from
    the loop's values, the method's and the user's (gdro_lab.methods.configure) first.
    """

    def __init__(self, method: MethodSpec, configs: Mapping[str, Any], seed: int | Sequence[int],
                 prompts: PromptIndex | None = None, *, builder: Builder | None = None):
        seed_list = [int(seed) + i for i in range(4)] if isinstance(seed, (int, np.integer)) else list(seed)
        if len(seed_list) != len(FAMILIES):
            raise ConfigError(f"MethodStep needs one seed or {len(FAMILIES)} seeds, got {len(seed_list)}")
        make = builder or build
        self.method = method
        self.prompts = prompts
        built = [make(family, method.controller(family), configs.get(family, {}), seed=one, prompts=prompts)
                 for family, one in zip(FAMILIES, seed_list)]
        self.classifier: Classifier
        self.weighter: Weighter
        self.allocator: Allocator
        self.selector: Selector
        self.classifier, self.weighter, self.allocator, self.selector = built
        # the weighter the record takes a signal and scores from (gdro_lab.controllers.protocols), if it has them
        self.scored_weighter = self.weighter if isinstance(self.weighter, ScoredWeighter) else None
        limits = self.allocator.config
        self.n_bar, self.n_min, self.n_max = int(limits.n_bar), int(limits.n_min), int(limits.n_max)
        k = int(getattr(self.classifier.config, "k", 1))
        if k > self.n_min:
            raise ConfigError(f"classifier k={k} exceeds n_min={self.n_min}: pass@k needs k <= n_min")
        self.num_bins = int(self.classifier.config.num_bins)

    @classmethod
    def from_method(cls, method: MethodSpec, seed: int | Sequence[int], prompts: PromptIndex | None = None, *,
                    builder: Builder | None = None, **settings: Any) -> "MethodStep":
        """The step of ``method`` with the configuration :func:`gdro_lab.methods.configure` resolves from
        ``settings`` (n_bar=, num_bins=, n_min=, n_max=, user=, base=, names=, controllers=)."""
        return cls(method, configure(method, **settings).configs, seed, prompts, builder=builder)

    def controllers(self) -> dict[str, Any]:
        """The four controllers by family, in build order."""
        return dict(zip(FAMILIES, (self.classifier, self.weighter, self.allocator, self.selector)))

    # ------------------------------------------------------------------ the step

    def choose(self, first: np.ndarray, draw: Callable[[int], np.ndarray],
               ids_of: Callable[[np.ndarray], Any]) -> np.ndarray:
        """The step's len(first) items of the loop's order that the selector keeps (selection.fill_batch:
        ``first`` the drawn candidates, ``draw(k)`` the next k, ``ids_of`` their prompt ids)."""
        return fill_batch(self.selector, draw, ids_of, len(first), first=first)

    def plan(self, ids_P: Any) -> Plan:
        """Bins, then the allocator's rollout counts, checked: exactly len(ids) x n_bar, each in
        [n_min, n_max] (:class:`BudgetError` otherwise, :func:`budget_problem`'s one line)."""
        bins_P = self.classifier.bins(ids_P)
        counts = self.allocator.plan(bins_P, ids_P)
        problem = budget_problem(self.method.allocator, counts, len(bins_P), self.n_bar, self.n_min, self.n_max)
        if problem:
            raise BudgetError(problem)
        return Plan(ids_P, bins_P, np.asarray(counts).astype(np.int64, copy=False))

    def feedback(self, plan: Plan, rewards_R: np.ndarray, successes_R: np.ndarray,
                 weights_R: np.ndarray | None = None) -> tuple[StepFeedback | None, np.ndarray, np.ndarray]:
        """The step's feedback under early stopping's filter (duet.scored_rows: the prompts with at least
        max(2, k) scored rollouts, ``weights_R`` > 0, and those rollouts; all of them when ``weights_R`` is
        None) -> (feedback, seen_P, rows_R); feedback None when no prompt was scored enough (then the
        step has no controller or learner update, and :meth:`empty_record` is its record)."""
        seen_P, rows_R, scored_P = duet.scored_rows(plan.counts_P, weights_R, duet.min_scored(self.classifier.config))
        if not seen_P.any():
            return None, seen_P, rows_R
        feedback = StepFeedback(plan.ids_P[seen_P], plan.bins_P[seen_P], scored_P, np.asarray(rewards_R)[rows_R],
                                np.asarray(successes_R)[rows_R], prompts=self.prompts)
        return feedback, seen_P, rows_R

    @staticmethod
    def empty_record() -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """The record of a step whose feedback was None (nothing scored): nothing trained, no bins."""
        return {"compute/rollouts_trained": 0.0, "compute/prompts_trained": 0.0}, {}

    def observe(self, feedback: StepFeedback, *, weighter_bins: np.ndarray | None = None,
                tokens_R: np.ndarray | None = None) -> Outcome:
        """Update the controllers from the step's feedback (module docstring). ``weighter_bins``: the
        weighter's partition of the prompts when it is not the difficulty bins (a loop's own, e.g. the
        simulator's latent groups); ``tokens_R``: generated tokens per rollout, for compute/tokens_*."""
        weighter_feedback = feedback if weighter_bins is None else dataclasses.replace(feedback, bins_P=weighter_bins)
        train_P = self.selector.accept(feedback)
        metrics: dict[str, float] = {}
        metrics.update(self.classifier.update(feedback))
        metrics.update(self.weighter.update(weighter_feedback))
        multipliers_P = self.weighter.multipliers(feedback.bins_P if weighter_bins is None else weighter_bins)
        metrics.update(self.allocator.update(feedback))
        metrics.update(self.selector.update(feedback))
        metrics.update(compute_metrics(feedback, train_P, tokens_R=tokens_R))
        return Outcome(feedback, weighter_feedback, train_P, multipliers_P, metrics)

    def record(self, outcome: Outcome) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """The step record (gdro_lab.runformat.record.step_record: weights, multipliers, signal and score per bin,
        the allocator's sigma and mu) with the outcome's metrics. When the weighter ran on the loop's own
        partition (``observe(weighter_bins=...)``) the logged weights are the mean multiplier per difficulty
        bin and there is no score per bin. A weighter that is not a
        :class:`~gdro_lab.controllers.protocols.ScoredWeighter` (``signal`` and ``score_G``) logs no signal or score."""
        feedback = outcome.feedback
        G = self.num_bins
        scored = self.scored_weighter
        if outcome.weighter_feedback is not feedback:  # the weighter ran on the loop's own partition
            per_bin = np.nan_to_num(diag.bin_mean(outcome.multipliers_P, feedback.bins_P, G))
            weights, score = (per_bin if per_bin.sum() > 0 else None), None
        else:
            weights, score = self.weighter.bin_weights(), (None if scored is None else scored.score_G)
        signal = None if scored is None else SIGNALS[scored.signal](outcome.weighter_feedback)
        scalars, rows = step_record(feedback, G, n_bar=self.n_bar, n_min=self.n_min, n_max=self.n_max,
                                    weights_G=weights, multipliers_P=outcome.multipliers_P, signal_P=signal,
                                    score_G=score, sigma_G=np.sqrt(self.allocator.variance_G), mu=self.allocator.mu)
        scalars.update(outcome.metrics)
        return scalars, rows

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """Every controller's state_dict (RNG included), by family."""
        return {family: controller.state_dict() for family, controller in self.controllers().items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; a state without ``selector`` leaves the selector fresh."""
        missing = [family for family in FAMILIES[:3] if family not in state]
        if missing:
            raise ConfigError(f"controller state lacks {', '.join(missing)}: the file is damaged or not a "
                              "controller state")
        for family, controller in self.controllers().items():
            if family in state:
                controller.load_state_dict(state[family])
