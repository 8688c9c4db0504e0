"""The groups the app shows runs in: the value types :mod:`apps.data.identity` builds and
:mod:`apps.data.colours` colours (apart from both, so that imports point one way)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Group:
    """Runs that share the values of the grouping keys: seeds of one variant of one method."""

    label: str
    method: str
    values: tuple[Any, ...]
    members: tuple[str, ...]


@dataclass(frozen=True)
class Grouping:
    """Every listed run's group, the keys that define the groups, and whether they were chosen
    automatically (:func:`auto_keys`) or by the user."""

    keys: tuple[str, ...]
    automatic: bool
    groups: tuple[Group, ...]
    group_of: Mapping[str, str]
    seed_of: Mapping[str, Any]
    method_of: Mapping[str, str]
    #: Run label -> its study (automatic grouping: :func:`apps.data.identity.study_families`), and the
    #: keys that name each study's runs.
    family_of: Mapping[str, str] = field(default_factory=dict)
    family_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def display(self, run_label: str) -> str:
        """A run's name for people: ``grpo lr×1.58 · seed 0``."""
        group = self.group_of.get(run_label, run_label)
        seed = self.seed_of.get(run_label)
        return group if seed is None else f"{group} · seed {seed}"
