"""The simulator's side of the methods: the table itself is gdro_lab.methods (one table for every
loop); here the simulator registers its own methods there through the one public registration,
:func:`gdro_lab.methods.register_method` (:data:`SIMULATOR_METHODS`: they need the world's truth: the
latent groups, true variances or p_i), with the reference allocators behind them,
and keeps the study method lists and :func:`build_controller`, the lookup that knows both.
History of ``knapsack``: docs/simulator-notes.md#simulators-simulator_methods.
"""

from __future__ import annotations

from typing import Any, Mapping

from gdro_lab import PromptIndex, build
from gdro_lab import methods as core
from gdro_lab.methods import MethodSpec
from simulators.oracle import PromptBayesAllocator, PromptOracleAllocator, PromptStaleAllocator

__all__ = ["ARENA_METHODS", "DEFAULT_METHODS", "GROUP_METHODS", "LOCAL_CONTROLLERS", "SIMULATOR_METHODS",
           "build_controller", "method_names"]

#: Controllers that live in the simulator (references that need the world's truth), looked up before
#: gdro_lab's registry.
LOCAL_CONTROLLERS: dict[str, dict[str, Any]] = {"allocator": {"prompt_oracle": PromptOracleAllocator,
                                                              "prompt_bayes": PromptBayesAllocator,
                                                              "prompt_stale": PromptStaleAllocator}}

#: The simulator's own methods, registered in gdro_lab.methods.METHODS at import (loop "simulator": no real
#: loop lists them).
SIMULATOR_METHODS = (
    MethodSpec("class_gdro", "class-based GDRO", weighter="gdro", loop="simulator",
               weighter_overrides={"ema_beta": 1.0, "share_normalize": False},
               summary="Prompt-GDRO on the static latent groups, no EMA, no share debiasing"),
    MethodSpec("sqrt_oracle", "sqrt oracle", allocator="sqrt", allocator_overrides={"oracle": True}, loop="simulator",
               summary="square-root law on the true per-bin variances (the limit of Rollout-GDRO)"),
    MethodSpec("prompt_oracle", "per-prompt oracle", allocator="prompt_oracle", loop="simulator",
               summary="reference: the exact per-prompt square-root law on the true p_i of the batch"),
    MethodSpec("prompt_bayes", "per-prompt Bayes reference", allocator="prompt_bayes", loop="simulator",
               summary="reference: posterior-mean variances under the pool's true p distribution (all history)"),
    MethodSpec("prompt_stale", "per-prompt oracle, previous visit", allocator="prompt_stale", loop="simulator",
               summary="reference: the per-prompt oracle on each prompt's true p at its previous visit"),
)
#: Methods whose weighter runs on the world's latent groups, not the difficulty bins.
GROUP_METHODS = ("class_gdro",)
#: The order the simulator lists methods in (its own among the table's, as its studies and reports show them).
_ORDER = ("grpo", "class_gdro", "prompt_gdro", "prompt_gdro_mean1", "rollout_gdro", "sqrt_oracle", "joint", "knapsack",
          "knapsack_code", "vip", "duet", "cero", "gdro_prompt", "prompt_oracle", "prompt_bayes", "prompt_stale",
          "dynamic_sampling", "greso")

DEFAULT_METHODS = ("grpo", "class_gdro", "prompt_gdro", "prompt_gdro_mean1", "rollout_gdro", "sqrt_oracle", "joint",
                   "knapsack")
#: The allocation arena's methods (simulators/studies/allocation_arena.py).
ARENA_METHODS = ("grpo", "rollout_gdro", "gdro_prompt", "knapsack", "knapsack_code", "vip", "duet", "cero",
                 "dynamic_sampling", "greso", "prompt_oracle")


def build_controller(family: str, name: str, config: Mapping[str, Any], seed: int,
                     prompts: PromptIndex | None = None) -> Any:
    """gdro_lab.build, with the simulator's peer baselines looked up first (``prompts``: the run's index)."""
    local = LOCAL_CONTROLLERS.get(family, {})
    if name in local:
        cls = local[name]
        from gdro_lab.controllers.registry import bind_prompts, make_config
        made = make_config(cls.config_class, config) if isinstance(config, Mapping) else config
        return bind_prompts(cls(made, seed), prompts)
    return build(family, name, config, seed, prompts=prompts)


def method_names() -> list[str]:
    """Every method the simulator runs, in its listing order (a user's registered ones last)."""
    return [name for name in _ORDER if name in core.METHODS] + [name for name in core.METHODS if name not in _ORDER]


for _spec in SIMULATOR_METHODS:
    core.register_method(_spec, replace=True, controllers=LOCAL_CONTROLLERS)
