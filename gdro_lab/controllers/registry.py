"""One registry at the seam where research varies: controllers by family and name.

Every controller of a family has the constructor ``cls(config, seed)``, ``update(feedback) -> dict[str,
float]`` and ``state_dict()`` / ``load_state_dict()`` (RNG included), so a loop never branches on a name.
Families and calls: docs/core.md and docs/core-controllers-notes.md#gdro_lab-controllers-registry.
``build(..., prompts=index)`` shares the run's :class:`~gdro_lab.controllers.prompts.PromptIndex`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from gdro_lab._validate import ConfigError
from gdro_lab.controllers.allocators import SqrtAllocator, UniformAllocator
from gdro_lab.controllers.difficulty import BayesDifficultyClassifier, DifficultyClassifier
from gdro_lab.controllers.peer_allocators import CEROAllocator, DUETAllocator, KnapsackAllocator, VIPAllocator
from gdro_lab.controllers.prompt_gdro import PromptGDRO, UniformWeighter
from gdro_lab.controllers.prompt_rollout_gdro import PromptRolloutGDRO
from gdro_lab.controllers.prompts import PromptIndex
from gdro_lab.controllers.rollout_gdro import RolloutGDRO
from gdro_lab.controllers.selection import GRESO, DynamicSampling, NoSelector

REGISTRY: dict[str, dict[str, Any]] = {
    "classifier": {"window": DifficultyClassifier, "bayes": BayesDifficultyClassifier},
    "weighter": {"uniform": UniformWeighter, "gdro": PromptGDRO},
    "allocator": {"uniform": UniformAllocator, "sqrt": SqrtAllocator, "gdro": RolloutGDRO,
                  "gdro_prompt": PromptRolloutGDRO, "knapsack": KnapsackAllocator, "vip": VIPAllocator,
                  "duet": DUETAllocator, "cero": CEROAllocator},
    "selector": {"none": NoSelector, "dynamic_sampling": DynamicSampling, "greso": GRESO},
}


def make_config(config_class: type, values: Mapping[str, Any] | None) -> Any:
    """Build a frozen config from a mapping; unknown keys are a one-line ConfigError."""
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{config_class.__name__} has no field(s) {', '.join(unknown)}: "
                          f"allowed are {', '.join(sorted(known))}")
    if "edges" in values:
        values["edges"] = tuple(values["edges"])
    return config_class(**values)


def build(family: str, name: str, config: Any = None, seed: int | None = None,
          prompts: PromptIndex | None = None) -> Any:
    """Instantiate controller ``name`` of ``family`` with a config object or mapping and a seed;
    ``prompts``: the run's PromptIndex, bound to controllers with per-prompt state (others ignore it)."""
    if family not in REGISTRY:
        raise ConfigError(f"unknown controller family {family!r}: choose one of {', '.join(REGISTRY)}")
    if name not in REGISTRY[family]:
        raise ConfigError(f"unknown {family} {name!r}: choose one of {', '.join(REGISTRY[family])}")
    cls = REGISTRY[family][name]
    if config is None or isinstance(config, Mapping):
        config = make_config(cls.config_class, config)
    return bind_prompts(cls(config, seed), prompts)


def bind_prompts(controller: Any, prompts: PromptIndex | None) -> Any:
    """Share ``prompts`` with ``controller`` when it keeps per-prompt state; returns the controller."""
    if prompts is not None and hasattr(controller, "bind_prompts"):
        controller.bind_prompts(prompts)
    return controller
