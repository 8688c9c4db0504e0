"""The controller families' interfaces, declared: what :class:`gdro_lab.step.MethodStep` calls on each.

Every controller has the uniform constructor ``cls(config, seed)`` (gdro_lab.controllers.registry), a
``config``, its own ``rng`` and the three calls of :class:`Controller`; each family adds its own:

- :class:`Classifier` (difficulty classifier): ``bins(prompt_ids) -> bins_P``;
- :class:`Weighter` (Prompt-GDRO family): ``bin_weights()``, ``multipliers(bins_P)``; a
  :class:`ScoredWeighter` also names its difficulty ``signal`` and keeps per-bin scores ``score_G``
  (the step record logs both; a weighter without them logs neither);
- :class:`Allocator` (Rollout-GDRO family): ``plan(bins_P, prompt_ids)``, the per-bin variance EMA
  ``variance_G`` and the shadow price ``mu`` (NaN without one) the record logs;
- :class:`Selector` (prompt selection): ``screen(prompt_ids)``, ``accept(feedback)``, ``screens``.

mypy checks MethodStep's calls against them; ``isinstance`` checks a controller at run time (the calls'
presence: runtime_checkable). tests/gdro_lab/test_contracts.py checks every registered controller.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from gdro_lab.controllers.feedback import StepFeedback


@runtime_checkable
class Controller(Protocol):
    """What every family shares: a config, its own RNG, the update and the state (RNG included)."""

    config: Any
    rng: np.random.Generator

    def update(self, feedback: StepFeedback) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class Classifier(Controller, Protocol):
    """Difficulty classifier: a bin per prompt (-1: unassigned), from the prompts' history."""

    def bins(self, prompt_ids: Sequence[str] | np.ndarray) -> np.ndarray: ...


@runtime_checkable
class Weighter(Controller, Protocol):
    """Prompt-GDRO family: normalised bin weights q_t (Eq. 15) and per-prompt advantage multipliers (Eq. 16)."""

    def bin_weights(self) -> np.ndarray: ...

    def multipliers(self, bins_P: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ScoredWeighter(Weighter, Protocol):
    """A weighter with a named difficulty signal (a key of gdro_lab.controllers.signals.SIGNALS) and scores."""

    score_G: np.ndarray

    @property
    def signal(self) -> str: ...


@runtime_checkable
class Allocator(Controller, Protocol):
    """Rollout-GDRO family: rollouts per prompt summing to P n_bar within [n_min, n_max] (config's)."""

    variance_G: np.ndarray
    mu: float

    def plan(self, bins_P: np.ndarray, prompt_ids: Sequence[str] | np.ndarray | None = None) -> np.ndarray: ...


@runtime_checkable
class Selector(Controller, Protocol):
    """Prompt selection: which drawn prompts to generate for (screen) and which groups to train on (accept)."""

    screens: bool

    def screen(self, prompt_ids: Any) -> np.ndarray: ...

    def accept(self, feedback: StepFeedback) -> np.ndarray: ...


#: The Protocol of each family, in MethodStep's build order (gdro_lab.methods.FAMILIES).
PROTOCOLS: dict[str, type] = {"classifier": Classifier, "weighter": Weighter, "allocator": Allocator,
                              "selector": Selector}
