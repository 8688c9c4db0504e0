"""Every knob of a simulated run, settable from the command line or a TOML file.

``--set world.transfer=0.5 prompt_gdro.eta=0.4`` or ``--config my.toml`` (``[world]`` / ``transfer =
0.5``). Namespaces: ``world``, ``run``, ``classifier``, ``prompt_gdro``, ``rollout_gdro``,
``gdro_prompt``, ``knapsack``, ``vip``, ``duet``, ``cero``, ``selector``; their fields are the config dataclasses' own. A
value is read as TOML, else as a bare string; bad keys and values are one-line ``ConfigError``s. The
table of namespaces: docs/simulator-notes.md#simulators-knobs.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from studykit.args import did_you_mean, suggest
from gdro_lab import ConfigError
from gdro_lab.controllers.registry import REGISTRY, make_config
from simulators.world import WorldConfig

Overrides = dict[str, dict[str, Any]]
RUN_FIELDS = ("n_bar", "n_min", "n_max", "num_bins", "pass_k", "eval_every", "log_every", "lr_scale",
              "ppo_minibatches", "ppo_clip", "abort_horizon", "abort_grace", "abort_keep_prob")
NAMESPACES = ("world", "run", "classifier", "prompt_gdro", "rollout_gdro", "gdro_prompt", "knapsack", "vip",
              "duet", "cero", "selector")
#: Namespaces of controller configs: (family, registry name whose config class holds the fields).
CONTROLLER_NAMESPACES = {"classifier": ("classifier", "window"), "prompt_gdro": ("weighter", "gdro"),
                         "rollout_gdro": ("allocator", "gdro"), "gdro_prompt": ("allocator", "gdro_prompt"),
                         "knapsack": ("allocator", "knapsack"), "vip": ("allocator", "vip"),
                         "duet": ("allocator", "duet"),
                         "cero": ("allocator", "cero"),
                         "selector": ("selector", "greso")}


def _fields(namespace: str) -> tuple[str, ...]:
    if namespace == "world":
        return tuple(f.name for f in dataclasses.fields(WorldConfig))
    if namespace == "run":
        return RUN_FIELDS
    family, name = CONTROLLER_NAMESPACES[namespace]
    return tuple(f.name for f in dataclasses.fields(REGISTRY[family][name].config_class))


def parse_value(text: str) -> Any:
    """A TOML value, or the text itself when it is not one."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def all_keys() -> list[str]:
    """Every ``namespace.field`` a knob can name."""
    return [f"{namespace}.{name}" for namespace in NAMESPACES for name in _fields(namespace)]


def add(overrides: Overrides, key: str, value: Any, flag: str = "--set") -> Overrides:
    """Check ``namespace.field`` and store ``value`` under it (one-line ConfigError otherwise).

    ``flag`` is how the user gave the key (``--set``, ``--grid``, ``--config FILE``): the message
    names it, with the closest known keys (difflib) when the key is unknown."""
    namespace, _, name = key.partition(".")
    if namespace not in NAMESPACES or not name:
        same_field = [k for k in all_keys() if not name and k.endswith("." + key)]  # a field without its namespace
        hint = suggest(same_field) or did_you_mean(key, all_keys()) or did_you_mean(namespace, NAMESPACES)
        raise ConfigError(f"{flag} {key}: unknown key: {hint + ' ' if hint else ''}a key is NAMESPACE.FIELD with "
                          f"NAMESPACE one of {', '.join(NAMESPACES)} (e.g. world.transfer)")
    allowed = _fields(namespace)
    if name not in allowed:
        hint = did_you_mean(name, allowed)
        raise ConfigError(f"{flag} {key}: {namespace} has no field {name!r}: {hint + ' ' if hint else ''}"
                          f"allowed are {', '.join(allowed)}")
    overrides.setdefault(namespace, {})[name] = value
    return overrides


def parse_assignments(items: Iterable[str], overrides: Overrides | None = None) -> Overrides:
    """``["world.transfer=0.5", ...]`` -> {"world": {"transfer": 0.5}, ...}, checked."""
    out: Overrides = overrides if overrides is not None else {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: write KEY=VALUE, e.g. world.transfer=0.5")
        add(out, key.strip(), parse_value(text.strip()))
    return out


def load_toml(path: Path, overrides: Overrides | None = None, flag: str = "--config") -> Overrides:
    """Tables [world], [run], [classifier], [prompt_gdro], [rollout_gdro] of a TOML file, checked; errors
    name the file as the user gave it (``flag``: ``--config``, or ``WORLD`` for gdro predict)."""
    if Path(path).is_dir():
        raise ConfigError(f"{flag} {path} is a folder: give a TOML file")
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: no such file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{flag} {path} is not a text file (not UTF-8): give a TOML file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{flag} {path}: not valid TOML ({err}): fix the file") from None
    except OSError as err:
        raise ConfigError(f"{flag} {path} cannot be read ({err.strerror}): check the path") from None
    out: Overrides = overrides if overrides is not None else {}
    for namespace, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{flag} {path}: top-level key {namespace!r} must be a table "
                              f"([{NAMESPACES[0]}], ...), one of {', '.join(NAMESPACES)}")
        for name, value in table.items():
            add(out, f"{namespace}.{name}", value, flag=f"{flag} {path}:")
    return out


def apply(config: Any, overrides: Mapping[str, Mapping[str, Any]]) -> Any:
    """A SimConfig with the overrides applied (Prompt-/Rollout-GDRO ones only where the method uses them)."""
    from gdro_lab.methods import get_method
    spec = get_method(config.method)
    changes: dict[str, Any] = dict(overrides.get("run", {}))
    if overrides.get("world"):
        changes["world"] = _world(config.world, overrides["world"])
    if overrides.get("classifier"):
        changes["classifier"] = {**dict(config.classifier), **overrides["classifier"]}
    if overrides.get("prompt_gdro") and spec.weighter == "gdro":
        changes["weighter"] = {**dict(config.weighter), **overrides["prompt_gdro"]}
    for namespace in ("rollout_gdro", "gdro_prompt", "knapsack", "vip", "duet", "cero"):
        if overrides.get(namespace) and spec.allocator == CONTROLLER_NAMESPACES[namespace][1]:
            changes["allocator"] = {**dict(config.allocator), **overrides[namespace]}
    if overrides.get("selector"):
        changes["selector"] = {**dict(config.selector), **overrides["selector"]}
    try:
        return replace(config, **changes)
    except TypeError as err:
        raise ConfigError(f"--set: a run setting has the wrong type ({err})") from None


def _world(world: WorldConfig, values: Mapping[str, Any]) -> WorldConfig:
    try:
        return replace(world, **values)
    except TypeError as err:
        raise ConfigError(f"--set world.*: wrong type ({err})") from None


def validate(overrides: Mapping[str, Mapping[str, Any]]) -> None:
    """Build every overridden config once so a bad value fails before any run starts."""
    from gdro_lab.methods import get_method
    from simulators.simulator_config import SimConfig
    for method in ("joint", "gdro_prompt", "knapsack", "vip", "duet", "cero"):
        config = apply(SimConfig(method=method), overrides)
        cfgs = config.controller_configs()
        make_config(REGISTRY["classifier"]["window"].config_class, cfgs["classifier"])
        make_config(REGISTRY["weighter"]["gdro"].config_class, cfgs["weighter"])
        make_config(REGISTRY["allocator"][get_method(method).allocator].config_class, cfgs["allocator"])
        make_config(REGISTRY["selector"]["greso"].config_class, cfgs["selector"])
