"""The simulator's side of the methods: the table itself is gdro_lab.methods (one table for every
loop, the method list is there); here are the reference allocators that need the world's truth,
the study method lists, and the lookups that know both, through :func:`build_controller`.
History of ``knapsack``: docs/design-notes.md#simulators-methods.
"""

from __future__ import annotations

from typing import Any, Mapping

from gdro_lab import PromptIndex, build
from gdro_lab import methods as core
from gdro_lab.methods import MethodSpec
from simulators.oracle import PromptBayesAllocator, PromptOracleAllocator, PromptStaleAllocator

__all__ = ["ARENA_METHODS", "DEFAULT_METHODS", "LOCAL_CONTROLLERS", "build_controller", "register_method"]

#: Controllers that live in the simulator (references that need the world's truth), looked up before
#: gdro_lab's registry.
LOCAL_CONTROLLERS: dict[str, dict[str, Any]] = {"allocator": {"prompt_oracle": PromptOracleAllocator,
                                                              "prompt_bayes": PromptBayesAllocator,
                                                              "prompt_stale": PromptStaleAllocator}}

DEFAULT_METHODS = ("grpo", "class_gdro", "prompt_gdro", "prompt_gdro_mean1", "rollout_gdro", "sqrt_oracle", "joint",
                   "knapsack")
#: The allocation arena's methods (simulators/studies/arena.py).
ARENA_METHODS = ("grpo", "rollout_gdro", "gdro_prompt", "knapsack", "knapsack_code", "vip", "duet", "cero",
                 "dynamic_sampling", "greso", "prompt_oracle")


def register_method(spec: MethodSpec, replace: bool = False) -> MethodSpec:
    """Add a user method (a ``--plugin`` module calls this at import) to gdro_lab's table. Its weighter,
    allocator and selector are registry names: register new controllers in
    ``gdro_lab.controllers.registry.REGISTRY[family][name]`` first (constructor ``cls(config, seed)`` with a
    ``config_class``; see gdro_lab/controllers/registry.py); the simulator's references are known too."""
    return core.register_method(spec, replace, controllers=LOCAL_CONTROLLERS)


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
