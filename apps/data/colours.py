"""Colours of runs and groups: a hue per method, a lightness per variant.

The paper's methods have fixed hues (:data:`METHOD_COLOURS`), any other a slot of :data:`METHOD_PALETTE`
by a hash of its name; a method's groups (:func:`group_colours`) or runs (:func:`run_colours`) get one
lightness each. No Streamlit, no altair here. Detail: docs/app-notes.md#apps-data-colours.
"""

from __future__ import annotations

import colorsys
import hashlib
from typing import Any, Iterable, Sequence

from apps.data.groups import Group, Grouping

#: Fixed colours of the paper's methods (so a method looks the same in every study and page).
METHOD_COLOURS = {"grpo": "#7f7f7f", "prompt_gdro": "#ff7f0e", "rollout_gdro": "#2ca02c", "joint": "#d62728",
                  "both": "#d62728", "sqrt_oracle": "#9467bd", "prompt_gdro_mean1": "#8c564b"}
#: Hues for every other method: distinct from each other and from the fixed colours above.
METHOD_PALETTE = ("#1f77b4", "#e377c2", "#17becf", "#bcbd22", "#393b79", "#843c39", "#637939", "#7b4173",
                  "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#8c6d31")
#: Lightness range of a method's variants (HLS), darkest first.
LIGHTNESS = (0.25, 0.72)


def method_hues(methods: Iterable[str]) -> dict[str, str]:
    """A base colour per method: the paper's fixed colours, else a palette slot from a hash of the
    name (the next free slot on a collision, methods taken in sorted order)."""
    names = sorted(set(methods))
    out: dict[str, str] = {}
    used = {METHOD_COLOURS[name] for name in names if name in METHOD_COLOURS}
    for name in names:
        if name in METHOD_COLOURS:
            out[name] = METHOD_COLOURS[name]
            continue
        start = int(hashlib.sha1(name.encode("utf-8")).hexdigest(), 16) % len(METHOD_PALETTE)
        slots = [METHOD_PALETTE[(start + i) % len(METHOD_PALETTE)] for i in range(len(METHOD_PALETTE))]
        free = [slot for slot in slots if slot not in used]
        out[name] = free[0] if free else slots[0]
        used.add(out[name])
    return out


def shade(colour: str, position: int, count: int) -> str:
    """``colour`` at the ``position``-th of ``count`` lightness steps (darkest first); the colour
    itself when ``count`` is 1."""
    if count <= 1:
        return colour
    red, green, blue = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    hue, _, saturation = colorsys.rgb_to_hls(red, green, blue)
    low, high = LIGHTNESS
    lightness = low + (high - low) * position / (count - 1)
    rgb = colorsys.hls_to_rgb(hue, lightness, saturation)
    return "#" + "".join(f"{round(channel * 255):02x}" for channel in rgb)


def order_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((0, float(value), "") if isinstance(value, (int, float)) and not isinstance(value, bool)
                 else (1, 0.0, str(value)) for value in values)


def group_colours(grouping: Grouping) -> dict[str, str]:
    """Colour of every group label and run label: the method's hue, one lightness per group of
    the method (ordered by the groups' key values); a run has its group's colour."""
    hues = method_hues(group.method or group.label for group in grouping.groups)
    by_method: dict[str, list[Group]] = {}
    for group in grouping.groups:
        by_method.setdefault(group.method or group.label, []).append(group)
    out: dict[str, str] = {}
    for method, groups in by_method.items():
        ordered = sorted(groups, key=lambda group: (order_key(group.values), group.label))
        for position, group in enumerate(ordered):
            out[group.label] = shade(hues[method], position, len(ordered))
    for run, group_label in grouping.group_of.items():
        out[run] = out[group_label]
    return out


def run_colours(grouping: Grouping, runs: Sequence[str]) -> dict[str, str]:
    """Colour of each of ``runs`` when they are drawn one line each: the method's hue, one lightness
    per run of the method among ``runs`` (ordered by group values, then seed), so that two seeds
    of one group drawn together are told apart too."""
    groups = {group.label: group for group in grouping.groups}
    hues = method_hues(grouping.method_of.get(run, run) for run in runs)
    by_method: dict[str, list[str]] = {}
    for run in runs:
        by_method.setdefault(grouping.method_of.get(run, run), []).append(run)
    out: dict[str, str] = {}
    for method, members in by_method.items():
        def order(run: str) -> tuple[Any, ...]:
            found = groups.get(grouping.group_of.get(run, ""))
            return (order_key(found.values) if found else (), str(grouping.seed_of.get(run)), run)

        ordered = sorted(members, key=order)
        for position, run in enumerate(ordered):
            out[run] = shade(hues[method], position, len(ordered))
    return out
