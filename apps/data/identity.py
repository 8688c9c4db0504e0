"""Who a run is: its method, its seed, and the config keys that tell it apart from the other runs.

A run's **method** is ``method`` or ``method.name`` (else ``name``) of its ``config.json``, its **seed**
``seed`` or ``train.seed``; runs that agree on every key but seeds and :data:`BOOKKEEPING` are one
*group*, labelled by the keys that differ (:func:`auto_keys`, or ``keys`` of :func:`group_runs`), never
by a hash; colours from :mod:`apps.data.colours`. No Streamlit, no altair. How keys are picked:
docs/app-data-notes.md#apps-data-identity.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from apps.data.colours import order_key
from apps.data.groups import Group, Grouping

#: Last parts of dotted keys that never make a group: seeds, and bookkeeping that does not change
#: what is trained (where a run writes, how often it logs or snapshots, progress bars, sinks).
SEED_KEYS = frozenset({"seed", "seeds", "random_seed", "rng_seed"})
BOOKKEEPING = SEED_KEYS | frozenset({
    "snapshot_every", "snapshot_seeds", "out", "out_dir", "output_dir", "run_dir", "log_dir", "resume",
    "resume_from", "run_name", "progress", "save_every", "keep_last", "tensorboard", "wandb", "wandb_project",
    "workers", "created"})
#: Keys that hold a run's method, in the order they are looked for.
METHOD_KEYS = ("method", "method.name", "name", "algorithm")
#: Keys that hold a run's seed, in the order they are looked for (then any ``*.seed``).
SEED_PATHS = ("seed", "train.seed")
MISSING = "(absent)"

# ----------------------------------------------------------------------------- one run

#: flatten's answers by config object while it lives (the run list keeps one config object per unchanged
#: run, so a page flattens each config once per server, not on every script run: 1,000 runs, 4 s).
_FLAT_CACHE: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
_FLAT_CACHE_MAX = 50_000


def flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted key -> value of a nested config; lists become JSON text (hashable, comparable). A new
    dict each call; the config must not be changed after it was first flattened (a run's config as read)."""
    hit = _FLAT_CACHE.get(id(config))
    if hit is not None and hit[0] is config:
        return dict(hit[1])
    flat = _flatten(config)
    if len(_FLAT_CACHE) >= _FLAT_CACHE_MAX:
        _FLAT_CACHE.clear()
    _FLAT_CACHE[id(config)] = (config, flat)  # the kept config holds its id: never reused meanwhile
    return dict(flat)


def _flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}

    def walk(node: Any, key: str) -> None:
        if type(node) is dict or isinstance(node, Mapping):  # a JSON object is a dict: skip the ABC check
            if not node:
                flat[key] = "{}"
            for name, value in node.items():
                walk(value, f"{key}.{name}" if key else str(name))
        elif type(node) in (list, tuple):
            flat[key] = json.dumps(node, default=str)
        else:
            flat[key] = node

    walk(config, "")
    return flat


@functools.lru_cache(maxsize=8192)
def is_bookkeeping(key: str) -> bool:
    """True for a seed or bookkeeping key (by its last dotted part; remembered: 1,000 runs ask about
    the same few hundred keys 160,000 times)."""
    return key.rsplit(".", 1)[-1] in BOOKKEEPING


def method_key(flat: Mapping[str, Any]) -> str | None:
    """The dotted key holding the run's method name (see :data:`METHOD_KEYS`), None without one."""
    for key in METHOD_KEYS:
        value = flat.get(key)
        if isinstance(value, str) and value:
            return key
    return None


def method_of(config: Mapping[str, Any], fallback: str = "") -> str:
    """The run's method: ``method``, ``method.name``, ``name`` or ``algorithm``; else ``fallback``."""
    return _method_in(flatten(config), fallback)


def _method_in(flat: Mapping[str, Any], fallback: str = "") -> str:
    key = method_key(flat)
    return str(flat[key]) if key is not None else fallback


def seed_of(config: Mapping[str, Any]) -> Any:
    """The run's seed: ``seed``, ``train.seed``, else the first key named ``seed`` at any depth (None)."""
    return _seed_in(flatten(config))


def _seed_in(flat: Mapping[str, Any]) -> Any:
    for key in SEED_PATHS:
        if isinstance(flat.get(key), (int, str)) and not isinstance(flat.get(key), bool):
            return flat[key]
    for key, value in flat.items():
        if key.rsplit(".", 1)[-1] == "seed" and isinstance(value, (int, str)) and not isinstance(value, bool):
            return value
    return None


#: Keys of one meaning in the simulator's flat layout and the trainer's sections: compared (and
#: shown) under the simulator's name, so that runs of both producers group together.
ALIASES = {"method.name": "method", "optim.lr_scale": "lr_scale"}


def identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config without seeds and bookkeeping, flattened: equal for seeds of one group. The
    method is always under ``method`` and a learning-rate scale under ``lr_scale``
    (:data:`ALIASES`), whichever producer wrote the config."""
    return _identity_of(flatten(config))


def _identity_of(full: Mapping[str, Any]) -> dict[str, Any]:
    flat = {ALIASES.get(key, key): value for key, value in full.items() if not is_bookkeeping(key)}
    method = _method_in(full)
    if method:
        flat["method"] = method
    return flat


# ----------------------------------------------------------------------------- keys that differ

def varying_keys(identities: Sequence[Mapping[str, Any]]) -> list[str]:
    """Keys (first-seen order) whose values differ between the identities (a missing key counts)."""
    keys: list[str] = []
    for flat in identities:
        keys += [key for key in flat if key not in keys]
    return [key for key in keys if len({_hashable(flat.get(key, MISSING)) for flat in identities}) > 1]


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else json.dumps(value, default=str)


def _classes(identities: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> int:
    return len({tuple(_hashable(flat.get(key, MISSING)) for key in keys) for flat in identities})


def _categorical(identities: Sequence[Mapping[str, Any]], key: str) -> bool:
    values = [flat.get(key) for flat in identities if key in flat]
    return any(isinstance(value, (str, bool)) for value in values)


def auto_keys(identities: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys that label the groups: the method key when it differs, then greedily the key that
    splits the runs into most groups (categorical before numeric, keys every run has before keys
    some lack, then the larger split, then shallower first), until none splits them further. Keys that follow from those already chosen (e.g. a method's resolved
    controller names) are never added."""
    varying = varying_keys(identities)
    chosen: list[str] = []
    for flat in identities:
        key = method_key(flat)
        if key is not None and key in varying:
            chosen.append(key)
            break
    count = _classes(identities, chosen)
    while True:
        best: tuple[Any, ...] | None = None
        for key in varying:
            if key in chosen:
                continue
            split = _classes(identities, [*chosen, key])
            if split <= count:
                continue
            absent = sum(key not in flat or is_empty(flat[key]) for flat in identities)
            rank = (_categorical(identities, key), -absent, split, -key.count("."), [-ord(c) for c in key])
            if best is None or rank > best[0]:
                best = (rank, key, split)
        if best is None:
            return chosen
        chosen.append(best[1])
        count = best[2]


# ----------------------------------------------------------------------------- labels

def short_names(keys: Sequence[str]) -> dict[str, str]:
    """Each key's last dotted part, or as many trailing parts as make it unique among ``keys``."""
    names = {}
    for key in keys:
        parts = key.split(".")
        for length in range(1, len(parts) + 1):
            tail = ".".join(parts[-length:])
            if sum(other.split(".")[-length:] == parts[-length:] for other in keys) == 1 or length == len(parts):
                names[key] = tail
                break
    return names


def format_values(values: Iterable[Any]) -> dict[Any, str]:
    """Text of each distinct value: numbers with the fewest significant digits (3 at least) that
    keep distinct values distinct; everything else as ``str``."""
    distinct = list(dict.fromkeys(_hashable(value) for value in values))
    numbers = [value for value in distinct if isinstance(value, (int, float)) and not isinstance(value, bool)]
    out = {value: str(value) for value in distinct if value not in numbers or isinstance(value, bool)}
    for digits in range(3, 18):
        texts = {value: _number(value, digits) for value in numbers}
        if len(set(texts.values())) == len(texts) or digits == 17:
            out.update(texts)
            break
    return out


def _number(value: float, digits: int) -> str:
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"


def key_text(short: str, value_text: str) -> str:
    """One key of a label: ``lr×1.58`` for learning-rate scales, else ``name=value``."""
    if short in ("lr_scale", "optim.lr_scale"):
        return f"lr×{value_text}"
    return f"{short}={value_text}"


def is_empty(value: Any) -> bool:
    """True for a value that says nothing: ``""``, ``None``, an empty section or list (``{}``, ``[]``)."""
    return value is None or (isinstance(value, str) and value.strip() in ("", "{}", "[]"))


# ----------------------------------------------------------------------------- studies

#: Folder levels that a producer adds below its study folder: ``runs``, ``seed<k>``, ``s<k>``,
#: ``lr<scale>``, ``cell<i>`` (and folders named after the run's method: ``grpo``,
#: ``grpo_matched_prompt_gdro_first``, ``grpo-tiny-s0``).
LAYOUT_LEVEL = re.compile(r"^(runs|seed\d+|s\d+|lr[0-9.eE+-]+|cell\d+)$")


def study_folder(label: str, method: str = "") -> str:
    """The study (or sweep) folder of a run, from its folder label: the run's parent folder without
    the levels its producer adds (:data:`LAYOUT_LEVEL`, the method's own folders); "" at the root.

    ``study/runs/grpo/lr1/seed0`` -> ``study``; ``sweep/runs/cell2/grpo/seed1`` -> ``sweep``;
    ``train/grpo-tiny-s0`` -> ``train``; ``grpo/lr1/seed0`` (a root that is one study) -> "".
    """
    parts = [part for part in label.split("/") if part][:-1]
    while parts and (LAYOUT_LEVEL.match(parts[-1]) or (method and parts[-1].startswith(method))):
        parts.pop()
    return "/".join(parts)


#: The study of the runs directly in the runs folder (their names get no study prefix).
ROOT_STUDY = "(root)"


def study_families(configs: Mapping[str, Mapping[str, Any]], producers: Mapping[str, str] | None = None
                   ) -> dict[str, list[str]]:
    """Runs (labels, in order) per study: same study folder (:func:`study_folder`) and same producer.
    A study's name is its folder (``(root)`` at the top), with the producer added when one folder
    holds the runs of several producers."""
    producers = producers or {}
    keyed: dict[tuple[str, str], list[str]] = {}
    for label, config in configs.items():
        folder = study_folder(label, method_of(config, fallback=""))
        keyed.setdefault((folder, producers.get(label, "")), []).append(label)
    folders: dict[str, int] = {}
    for folder, _ in keyed:
        folders[folder] = folders.get(folder, 0) + 1
    out: dict[str, list[str]] = {}
    for (folder, producer), members in keyed.items():
        name = folder or ROOT_STUDY
        out[f"{name} · {producer}" if folders[folder] > 1 and producer else name] = members
    return out


# ----------------------------------------------------------------------------- grouping

@dataclass(frozen=True)
class _Labels:
    """Group labels of some runs by some keys (one study, or every run by the user's keys)."""

    keys: tuple[str, ...]
    labels: dict[str, str]
    values: dict[str, tuple[Any, ...]]


def _label_runs(flats: Mapping[str, Mapping[str, Any]], methods: Mapping[str, str], seeds: Mapping[str, Any],
                keys: Sequence[str] | None) -> _Labels:
    """Group labels of runs (label -> flat config) by ``keys`` (default :func:`auto_keys` over them)."""
    identities = {label: _identity_of(flat) for label, flat in flats.items()}
    chosen = list(auto_keys(list(identities.values())) if keys is None else keys)
    texts = {key: format_values(flat.get(key, MISSING) for flat in identities.values()) for key in chosen}
    shorts = short_names(chosen)
    labels: dict[str, str] = {}
    values: dict[str, tuple[Any, ...]] = {}
    for label, flat in identities.items():
        parts = []
        for key in chosen:
            if key not in METHOD_KEYS and (key not in flat or is_empty(flat[key])):
                continue  # a key this run lacks or leaves empty (e.g. a marker only derived baselines carry)
            text = texts[key][_hashable(flat.get(key, MISSING))]
            parts.append(text if key in METHOD_KEYS else key_text(shorts[key], text))
        if not any(key in METHOD_KEYS for key in chosen) and len({methods[run] for run in flats}) == 1 \
                and methods[label]:
            parts.insert(0, methods[label])  # every run has this method: naming it misleads no one
        labels[label] = " ".join(parts) or "all runs"
        values[label] = tuple(_hashable(flat.get(key, MISSING)) for key in chosen)
    if keys is None:  # automatic keys separate every distinct config: a repeated seed is a copy
        labels = _split_duplicate_seeds(labels, seeds)
    return _Labels(tuple(chosen), labels, values)


def group_runs(configs: Mapping[str, Mapping[str, Any]], keys: Sequence[str] | None = None,
               producers: Mapping[str, str] | None = None) -> Grouping:
    """Group runs (run label -> config; ``producers``: run label -> meta.json's producer) by ``keys``.

    Automatic (``keys`` None): each study (:func:`study_families`) is labelled on its own, by the keys
    that differ *within it* (:func:`auto_keys`), after its study's name (``study: grpo lr×1``). Chosen
    ``keys`` group every run together. A group's label is the method and ``name=value`` per other key;
    its method is its runs' common method ("" if several). Runs sharing a label and a seed are told
    apart by their folder. The rules in full: docs/app-data-notes.md#apps-data-identity.
    """
    flats = {label: flatten(config) for label, config in configs.items()}
    methods = {label: _method_in(flat, fallback=_folder_method(label)) for label, flat in flats.items()}
    seeds = {label: _seed_in(flat) for label, flat in flats.items()}
    automatic = keys is None
    families = study_families(configs, producers) if automatic else {"": list(configs)}
    family_of = {run: family for family, members in families.items() for run in members}
    parts = {family: _label_runs({run: flats[run] for run in members}, methods, seeds, keys)
             for family, members in families.items()}
    labels = {run: part.labels[run] for part in parts.values() for run in part.labels}
    values = {run: part.values[run] for part in parts.values() for run in part.values}
    labels = {run: label if family_of[run] in ("", ROOT_STUDY) else f"{family_of[run]}: {label}"
              for run, label in labels.items()}
    chosen = list(dict.fromkeys(key for part in parts.values() for key in part.keys))
    order: dict[str, list[str]] = {}
    for label in configs:
        order.setdefault(labels[label], []).append(label)
    first_seen = {method: index for index, method in reversed(list(enumerate(methods[label] for label in configs)))}
    first_seen[""] = len(configs)

    def common_method(members: list[str]) -> str:
        found = {methods[member] for member in members}
        return found.pop() if len(found) == 1 else ""

    groups = tuple(sorted((Group(name, common_method(members), values[members[0]], tuple(members))
                           for name, members in order.items()),
                          key=lambda group: (first_seen[group.method], order_key(group.values), group.label)))
    return Grouping(tuple(chosen), automatic, groups, labels, seeds, methods,
                    family_of=family_of, family_keys={family: part.keys for family, part in parts.items()})


def _folder_method(label: str) -> str:
    """A method name guessed from a run's folder (``<method>/seed0`` -> ``<method>``), for configs without one."""
    parts = [part for part in label.split("/") if part]
    if len(parts) >= 2 and re.fullmatch(r"seed\d+", parts[-1]):
        return parts[-2]
    return parts[-1] if parts else label


def _split_duplicate_seeds(labels: dict[str, str], seeds: Mapping[str, Any]) -> dict[str, str]:
    """Group labels with the run's folder added where two runs of a group share a seed."""
    out = dict(labels)
    by_group: dict[str, list[str]] = {}
    for run, group in labels.items():
        by_group.setdefault(group, []).append(run)
    for group, runs in by_group.items():
        seen = [seeds.get(run) for run in runs]
        if len(set(map(str, seen))) == len(seen):
            continue
        for run in runs:
            folder = run.rsplit("/", 1)[0] if re.search(r"/seed\d+$", run) else run
            out[run] = f"{group} ({folder})"
    return out


_LAST_AUTOMATIC: list[tuple[tuple[int, ...], tuple[Any, ...], Grouping, list[str]]] = []


def automatic_grouping(runs: Sequence[Any]) -> tuple[Grouping, list[str]]:
    """(:func:`group_runs`' automatic grouping, every config key sorted) of the readable run list entries
    ``runs`` (``.label``, ``.config``, ``.producer``, ``.problem``). The last answer is kept while the entries
    are the same objects (the run list's cache returns the same entry for an unchanged run), so a page's
    reruns and later sessions do not group 100 runs again (about 50 ms each); the server's warm-up fills it."""
    runs = tuple(run for run in runs if run.problem is None)
    key = tuple(map(id, runs))  # the kept ``runs`` hold these objects alive: ids are not reused meanwhile
    last = _LAST_AUTOMATIC[-1] if _LAST_AUTOMATIC else None
    if last is not None and last[0] == key:
        return last[2], last[3]
    configs = {run.label: run.config for run in runs}
    grouping = group_runs(configs, producers={run.label: run.producer for run in runs})
    keys = sorted({key for config in configs.values() for key in identity(config)})
    _LAST_AUTOMATIC[:] = [(key, runs, grouping, keys)]
    return grouping, keys
