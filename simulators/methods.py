"""The methods compared in the studies: which gdro_lab controllers each one wires together.

Every method uses the same four controller families (classifier, weighter, allocator, selector)
built through ``gdro_lab.build`` with the same signatures, so the loop never branches on a method's
name. A method is data: registry names, config overrides, and which partition the weighter
sees ('difficulty' = the classifier's online bins, 'groups' = the world's latent groups).

| method        | weighter                                   | allocator                   | selector  |
|---------------|--------------------------------------------|-----------------------------|-----------|
| grpo          | uniform                                    | uniform, n = n_bar          | none      |
| class_gdro    | gdro on latent groups, no EMA, no debias   | uniform                     | none      |
| prompt_gdro   | gdro on difficulty bins, EMA 0.12, debias  | uniform                     | none      |
| prompt_gdro_mean1 | the same, multipliers renormalised to mean 1 | uniform                 | none      |
| rollout_gdro  | uniform                                    | gdro (shadow price + DP)    | none      |
| sqrt_oracle   | uniform                                    | sqrt, true variances        | none      |
| joint         | gdro on difficulty bins, EMA 0.12, debias  | gdro                        | none      |
| knapsack      | uniform                                    | knapsack (Knapsack-RL)      | none      |
| vip           | uniform                                    | vip (Beta posterior + convex) | none    |
| gdro_prompt   | uniform                                    | gdro_prompt (per prompt, EB) | none     |
| prompt_oracle | uniform                                    | per-prompt oracle, true p_i | none      |
| prompt_bayes  | uniform                                    | Bayes reference, true prior | none      |
| prompt_stale  | uniform                                    | oracle on p at previous visit | none    |
| dynamic_sampling | uniform                                 | uniform                     | dynamic_sampling (DAPO) |
| greso         | uniform                                    | uniform                     | greso     |

``knapsack`` was a simulator-only greedy per bin ("Knapsack-style", value p(1-p)) until the arena;
it is now Knapsack-RL from gdro_lab (reports committed before, e.g. reports/sqrt-law, ran the old one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from gdro_lab import ConfigError, PromptIndex, build
from simulators.oracle import PromptBayesAllocator, PromptOracleAllocator, PromptStaleAllocator

#: Controllers that live in the simulator (references that need the world's truth), looked up before
#: gdro_lab's registry.
LOCAL_CONTROLLERS: dict[str, dict[str, Any]] = {"allocator": {"prompt_oracle": PromptOracleAllocator,
                                                              "prompt_bayes": PromptBayesAllocator,
                                                              "prompt_stale": PromptStaleAllocator}}


@dataclass(frozen=True)
class MethodSpec:
    """One method: registry names and config overrides of its weighter, allocator and selector."""

    name: str
    label: str
    weighter: str = "uniform"
    allocator: str = "uniform"
    partition: str = "difficulty"
    weighter_overrides: Mapping[str, Any] = field(default_factory=dict)
    allocator_overrides: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    selector: str = "none"
    selector_overrides: Mapping[str, Any] = field(default_factory=dict)


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("grpo", "GRPO", summary="uniform weights, n = n_bar for every prompt"),
    MethodSpec("class_gdro", "class-based GDRO", weighter="gdro", partition="groups",
               weighter_overrides={"ema_beta": 1.0, "share_normalize": False},
               summary="Prompt-GDRO on the static latent groups, no EMA, no share debiasing"),
    MethodSpec("prompt_gdro", "EMA-debiased Prompt-GDRO", weighter="gdro",
               weighter_overrides={"ema_beta": 0.12, "share_normalize": True},
               summary="Prompt-GDRO on online difficulty bins, EMA beta 0.12, share debiasing"),
    MethodSpec("prompt_gdro_mean1", "Prompt-GDRO, mean-1 weights", weighter="gdro",
               weighter_overrides={"ema_beta": 0.12, "share_normalize": True, "weight_mode": "mean1"},
               summary="EMA-debiased Prompt-GDRO with multipliers renormalised to mean 1 over the batch "
                       "(the released code's mode): same relative weights, no step-size inflation"),
    MethodSpec("rollout_gdro", "Rollout-GDRO", allocator="gdro",
               summary="shadow-price mirror descent over n in [n_min, n_max], exact-budget plan"),
    MethodSpec("sqrt_oracle", "sqrt oracle", allocator="sqrt", allocator_overrides={"oracle": True},
               summary="square-root law on the true per-bin variances (the limit of Rollout-GDRO)"),
    MethodSpec("joint", "joint Prompt+Rollout GDRO", weighter="gdro", allocator="gdro",
               weighter_overrides={"ema_beta": 0.12, "share_normalize": True},
               summary="both adversaries at once (not run in the paper)"),
    MethodSpec("knapsack", "Knapsack-RL", allocator="knapsack",
               summary="Knapsack-RL (arXiv 2509.25849): per-prompt knapsack on (1-p^n-(1-p)^n) p(1-p)^2"),
    MethodSpec("vip", "VIP", allocator="vip",
               summary="VIP (arXiv 2602.01601): Beta posterior per prompt, convex min sum p(1-p)/(n-1)"),
    MethodSpec("gdro_prompt", "per-prompt Rollout-GDRO", allocator="gdro_prompt",
               summary="Rollout-GDRO's price per prompt, variances shrunk to the bin by empirical Bayes"),
    MethodSpec("prompt_oracle", "per-prompt oracle", allocator="prompt_oracle",
               summary="reference: the exact per-prompt square-root law on the true p_i of the batch"),
    MethodSpec("prompt_bayes", "per-prompt Bayes reference", allocator="prompt_bayes",
               summary="reference: posterior-mean variances under the pool's true p distribution (all history)"),
    MethodSpec("prompt_stale", "per-prompt oracle, previous visit", allocator="prompt_stale",
               summary="reference: the per-prompt oracle on each prompt's true p at its previous visit"),
    MethodSpec("dynamic_sampling", "DAPO dynamic sampling", selector="dynamic_sampling",
               summary="DAPO: train only on groups with mixed rewards (same generated rollouts per step)"),
    MethodSpec("greso", "GRESO", selector="greso",
               summary="GRESO (arXiv 2506.02177): skip predicted zero-variance prompts before rollout"),
)}

DEFAULT_METHODS = ("grpo", "class_gdro", "prompt_gdro", "prompt_gdro_mean1", "rollout_gdro", "sqrt_oracle", "joint",
                   "knapsack")
#: The allocation arena's methods (simulators/studies/arena.py).
ARENA_METHODS = ("grpo", "rollout_gdro", "gdro_prompt", "knapsack", "vip", "dynamic_sampling", "greso",
                 "prompt_oracle")


def register_method(spec: MethodSpec, replace: bool = False) -> MethodSpec:
    """Add a user method (a ``--plugin`` module calls this at import). Its weighter, allocator and
    selector are registry names: register new controllers in ``gdro_lab.registry.REGISTRY[family][name]``
    first (constructor ``cls(config, seed)`` with a ``config_class``; see gdro_lab/registry.py)."""
    from gdro_lab.registry import REGISTRY
    if spec.name in METHODS and not replace:
        raise ConfigError(f"method {spec.name!r} already exists: choose another name")
    for family, name in (("weighter", spec.weighter), ("allocator", spec.allocator), ("selector", spec.selector)):
        if name not in REGISTRY[family] and name not in LOCAL_CONTROLLERS.get(family, {}):
            raise ConfigError(f"method {spec.name!r}: unknown {family} {name!r}: register it in "
                              f"gdro_lab.registry.REGISTRY[{family!r}] first")
    if spec.partition not in ("difficulty", "groups"):
        raise ConfigError(f"method {spec.name!r}: partition must be 'difficulty' or 'groups'")
    METHODS[spec.name] = spec
    return spec


def get_method(name: str) -> MethodSpec:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}: choose from {', '.join(METHODS)}")
    return METHODS[name]


def build_controller(family: str, name: str, config: Mapping[str, Any], seed: int,
                     prompts: PromptIndex | None = None) -> Any:
    """gdro_lab.build, with the simulator's peer baselines looked up first (``prompts``: the run's index)."""
    local = LOCAL_CONTROLLERS.get(family, {})
    if name in local:
        cls = local[name]
        from gdro_lab.registry import bind_prompts, make_config
        return bind_prompts(cls(make_config(cls.config_class, config), seed), prompts)
    return build(family, name, dict(config), seed, prompts=prompts)
