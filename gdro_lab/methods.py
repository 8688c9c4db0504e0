"""The methods: which controllers each one wires together. One table for every training loop (the
simulator, ``gdro train`` and the verl plugin build a :class:`gdro_lab.step.MethodStep` from it).

A method is data: its four controllers' registry names and their config overrides. A loop registers
its own methods (the simulator's references, which need its ground truth) through
:func:`register_method` with ``loop`` set. The table: docs/core-step.md#the-method-table-gdro_labmethodsmethods.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from gdro_lab._validate import ConfigError
from gdro_lab.controllers.registry import REGISTRY, make_config

FAMILIES = ("classifier", "weighter", "allocator", "selector")
"""The four controller families of a method, in the order a step builds (and seeds) them."""


@dataclass(frozen=True)
class MethodSpec:
    """One method: registry names and config overrides of its controllers."""

    name: str
    label: str
    weighter: str = "uniform"
    allocator: str = "uniform"
    weighter_overrides: Mapping[str, Any] = field(default_factory=dict)
    allocator_overrides: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    selector: str = "none"
    selector_overrides: Mapping[str, Any] = field(default_factory=dict)
    classifier: str = "window"
    classifier_overrides: Mapping[str, Any] = field(default_factory=dict)
    loop: str = ""
    """The one loop that can run the method ("" = every loop): a loop's own methods name it (the simulator's,
    which need its ground truth, say "simulator")."""

    def controller(self, family: str) -> str:
        """Registry name of the method's controller of ``family``."""
        return str(getattr(self, family))

    def overrides(self, family: str) -> Mapping[str, Any]:
        """The method's config overrides of ``family`` (on top of the loop's values, under the user's)."""
        return getattr(self, f"{family}_overrides")

    def config(self, family: str, base: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
        """Config values of ``family``: the loop's ``base``, then the method's overrides, then ``user``'s."""
        return {**dict(base), **dict(self.overrides(family)), **dict(user)}


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("grpo", "GRPO", summary="uniform weights, n = n_bar for every prompt"),
    MethodSpec("prompt_gdro", "EMA-debiased Prompt-GDRO", weighter="gdro",
               weighter_overrides={"ema_beta": 0.12, "share_normalize": True},
               summary="Prompt-GDRO on online difficulty bins, EMA beta 0.12, share debiasing"),
    MethodSpec("prompt_gdro_mean1", "Prompt-GDRO, mean-1 weights", weighter="gdro",
               weighter_overrides={"ema_beta": 0.12, "share_normalize": True, "weight_mode": "mean1"},
               summary="EMA-debiased Prompt-GDRO with multipliers renormalised to mean 1 over the batch "
                       "(the released code's mode): same relative weights, no step-size inflation"),
    MethodSpec("rollout_gdro", "Rollout-GDRO", allocator="gdro",
               summary="shadow-price mirror descent over n in [n_min, n_max], exact-budget plan"),
    MethodSpec("joint", "joint Prompt+Rollout GDRO", weighter="gdro", allocator="gdro",
               weighter_overrides={"ema_beta": 0.12, "share_normalize": True},
               summary="both adversaries at once (not run in the paper)"),
    MethodSpec("knapsack", "Knapsack-RL", allocator="knapsack", allocator_overrides={"objective": "paper"},
               summary="Knapsack-RL (arXiv 2509.25849): per-prompt knapsack, max sum_i (1-p^n-(1-p)^n) p(1-p)^2 "
                       "over every prompt (the paper's objective)"),
    MethodSpec("knapsack_code", "Knapsack-RL (code's DP)", allocator="knapsack",
               allocator_overrides={"objective": "code"},
               summary="Knapsack-RL as its released DP (liziniu/KnapsackRL): a prompt left at n_min is credited 0, "
                       "not its value"),
    MethodSpec("vip", "VIP", allocator="vip",
               summary="VIP (arXiv 2602.01601): Beta posterior per prompt, convex min sum p(1-p)/(n-1)"),
    MethodSpec("duet", "DUET", allocator="duet",
               summary="DUET's counts (arXiv 2605.08441): n proportional to a pre-rollout surrogate, here E[p(1-p)] "
                       "under a Beta posterior per prompt (no early stopping)"),
    MethodSpec("cero", "CERO", allocator="cero",
               summary="CERO (arXiv 2606.05606): Beta posterior per prompt, Fenchel duals of a saturating utility "
                       "over epochs by projected OGD, exact budget per step"),
    MethodSpec("gdro_prompt", "per-prompt Rollout-GDRO", allocator="gdro_prompt",
               summary="Rollout-GDRO's price per prompt, variances shrunk to the bin by empirical Bayes"),
    MethodSpec("dynamic_sampling", "DAPO dynamic sampling", selector="dynamic_sampling",
               summary="DAPO: train only on groups with mixed successes (same generated rollouts per step)"),
    MethodSpec("greso", "GRESO", selector="greso",
               summary="GRESO (arXiv 2506.02177): skip predicted zero-variance prompts before rollout"),
)}


def even_edges(num_bins: int) -> tuple[float, ...]:
    """Inner edges b/G, b = 1..G-1 (G = 10 gives the paper's 0.1..0.9)."""
    return tuple(round(b / num_bins, 10) for b in range(1, num_bins))


@dataclass(frozen=True)
class StepConfig:
    """A method's resolved configuration (:func:`configure`): per family the merged values and the
    validated config objects, and the box every step spends in."""

    method: MethodSpec
    values: dict[str, dict[str, Any]]
    """Per family: the loop's values, then the method's overrides, then the user's (as merged, for config.json)."""
    configs: dict[str, Any]
    """Per family: the validated config object (what :class:`gdro_lab.step.MethodStep` builds from)."""
    num_bins: int
    n_bar: int
    n_min: int
    n_max: int


def configure(spec: MethodSpec, *, n_bar: int, num_bins: int | None = None, n_min: int | None = None,
              n_max: int | None = None, user: Mapping[str, Mapping[str, Any]] | None = None,
              base: Mapping[str, Mapping[str, Any]] | None = None, names: Mapping[str, str] | None = None,
              controllers: Mapping[str, Mapping[str, Any]] | None = None) -> StepConfig:
    """The one configuration step of every loop: per family the loop's values, then the method's
    overrides, then ``user``'s (the user's value wins, e.g. ``ema_beta``), checked once.

    The loop's values: the classifier's ``k = min(2, n_min)`` and, with ``num_bins``, evenly spaced edges
    (:func:`even_edges`; ``exclude_extremes`` adds one class); the weighter's and allocator's ``num_bins``
    (None: the classifier's edges decide); the allocator's box ``n_bar`` (and ``n_min``, ``n_max`` where
    given; None: the allocator's config decides). ``base``: more loop values per family (the simulator's
    latent groups). A user value that restates one of the loop's box or bin counts differently is a
    one-line ConfigError; so is a classifier with another number of bins. ``names``: how the loop spells
    a family's section or a loop value in its messages (default: the bare name); ``controllers``: the
    loop's own controllers ({family: {name: class}}), looked up before the registry.
    """
    users = {family: dict((user or {}).get(family, {})) for family in FAMILIES}
    bases = {family: dict((base or {}).get(family, {})) for family in FAMILIES}
    where = {**{family: family for family in FAMILIES}, **{key: key for key in ("num_bins", "n_bar", "n_min", "n_max")},
             **dict(names or {})}
    classifier_values = dict(bases["classifier"])
    if n_min is not None:
        classifier_values["k"] = min(2, n_min)
    if num_bins is not None:
        extremes = {**classifier_values, **spec.overrides("classifier"), **users["classifier"]}.get("exclude_extremes")
        classifier_values = {"edges": even_edges(num_bins - int(extremes is True)), **classifier_values}
    values = {"classifier": spec.config("classifier", classifier_values, users["classifier"])}
    classifier = _make_config("classifier", spec, values["classifier"], controllers)
    bins = int(classifier.num_bins)
    if num_bins is not None and bins != num_bins:
        extra = " (exclude_extremes adds one class)" if getattr(classifier, "exclude_extremes", False) else ""
        raise ConfigError(f"{where['classifier']}.edges={list(classifier.edges)!r} is invalid: must be "
                          f"{num_bins - 1 - int(bool(extra))} edges for {where['num_bins']} = {num_bins}{extra}")
    box = {"num_bins": bins, "n_bar": n_bar, "n_min": n_min, "n_max": n_max}
    for family, keys in (("weighter", ("num_bins",)), ("allocator", ("num_bins", "n_bar", "n_min", "n_max"))):
        loop = {key: box[key] for key in keys if box[key] is not None and key not in bases[family]}
        for key, value in loop.items():
            if key in users[family] and users[family][key] != value:
                raise ConfigError(f"{where[family]}.{key}={users[family][key]!r} is invalid: must be left out "
                                  f"(it differs from {where[key]}={value}, which sets it)")
        values[family] = spec.config(family, {**loop, **bases[family]}, users[family])
    values["selector"] = spec.config("selector", bases["selector"], users["selector"])
    configs = {"classifier": classifier, **{family: _make_config(family, spec, values[family], controllers)
                                            for family in FAMILIES[1:]}}
    allocator = configs["allocator"]
    return StepConfig(spec, values, configs, bins, int(allocator.n_bar), int(allocator.n_min), int(allocator.n_max))


def _make_config(family: str, spec: MethodSpec, values: Mapping[str, Any],
                 controllers: Mapping[str, Mapping[str, Any]] | None) -> Any:
    """``values`` as the config object of the method's controller of ``family`` (loop's own first)."""
    name = spec.controller(family)
    cls = (controllers or {}).get(family, {}).get(name) or REGISTRY[family].get(name)
    if cls is None:
        raise ConfigError(f"method {spec.name!r}: unknown {family} {name!r}: choose one of {', '.join(REGISTRY[family])}")
    return make_config(cls.config_class, values)


def real_methods() -> tuple[str, ...]:
    """Names of the methods every loop can run (a loop's own, e.g. the simulator's, left out)."""
    return tuple(name for name, spec in METHODS.items() if not spec.loop)


def get_method(name: str, listing: Sequence[str] | None = None) -> MethodSpec:
    """The method ``name`` of the table; a one-line ConfigError listing the names otherwise (in the loop's
    ``listing`` order when given, e.g. the simulator's)."""
    if name not in METHODS:
        names = list(listing) if listing is not None else list(METHODS)
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"unknown method {name!r}: {hint}choose from {', '.join(names)}")
    return METHODS[name]


def resolve_method(name: str, **names: str) -> MethodSpec:
    """The method ``name`` (``custom``: none: GRPO's controllers) with every non-empty family name in
    ``names`` (classifier=, weighter=, allocator=, selector=) replacing the method's; a replaced
    family drops the method's overrides (they belong to the method's own controller)."""
    spec = MethodSpec("custom", "custom") if name == "custom" else get_method(name)
    unknown = sorted(set(names) - set(FAMILIES))
    if unknown:
        raise ConfigError(f"resolve_method: unknown famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}: "
                          f"use {', '.join(FAMILIES)}")
    changes: dict[str, Any] = {}
    for family, value in names.items():
        if value and value != spec.controller(family):
            changes[family] = value
            changes[f"{family}_overrides"] = {}
    return dataclasses.replace(spec, **changes) if changes else spec


def register_method(spec: MethodSpec, replace: bool = False,
                    controllers: Mapping[str, Mapping[str, Any]] | None = None) -> MethodSpec:
    """Add a user method to the table (a plugin module calls this at import). Its controllers are
    registry names: register new ones in ``gdro_lab.controllers.registry.REGISTRY[family][name]`` first
    (constructor ``cls(config, seed)`` with a ``config_class``; gdro_lab/controllers/registry.py), or pass a
    loop's own ones in ``controllers`` ({family: {name: class}}) and name the loop in ``spec.loop``."""
    if spec.name in METHODS and not replace:
        raise ConfigError(f"method {spec.name!r} already exists: choose another name")
    local = controllers or {}
    for family in FAMILIES:
        name = spec.controller(family)
        if name not in REGISTRY[family] and name not in local.get(family, {}):
            raise ConfigError(f"method {spec.name!r}: unknown {family} {name!r}: register it in "
                              f"gdro_lab.controllers.registry.REGISTRY[{family!r}] first")
    METHODS[spec.name] = spec
    return spec
