"""Colours of runs and groups: a hue per method, a lightness per variant.

The paper's methods have fixed hues (:data:`METHOD_COLOURS`), any other a slot of :data:`METHOD_PALETTE`
by a hash of its name; a method's groups (:func:`group_colours`) or runs (:func:`run_colours`) get one
lightness each. Lines of many groups (:func:`group_styles`) get one of :data:`MAX_STYLES` styles, a
colour and a dash told apart on a chart, beyond that the top k and one muted "others" style.
No Streamlit, no altair here. Detail: docs/app-data-notes.md#apps-data-colours.
"""

from __future__ import annotations

import colorsys
import hashlib
from typing import Any, Iterable, Mapping, Sequence

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


# ----------------------------------------------------------------------------- many groups

#: Colours of the lines (and bands) of up to 20 groups: ten distinct hues (the paper's methods among
#: them), then ten more, picked so that no two of the 20 are closer than the first ten are to each
#: other (CIELAB distance at least 27); the second ten are also drawn dashed.
STYLE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf", "#000080", "#a6761d", "#1b9e77", "#f99379", "#40004b", "#c2b280",
                 "#00441b", "#67001f", "#ff00ff", "#000000")
#: Dash patterns (pixels on, off): solid for the first ten styles, dashed for the second ten.
DASHES: tuple[tuple[int, ...], ...] = ((), (6, 3))
#: Groups a chart keeps apart; beyond, the top k and "others" (:func:`group_styles`).
MAX_STYLES = len(STYLE_COLOURS)
#: The legend entry, colour and dash of the groups beyond the top k: one muted style for all.
OTHERS, OTHERS_COLOUR, OTHERS_DASH = "others", "#c7c7c7", (2, 2)


def style_slot(index: int) -> tuple[str, tuple[int, ...]]:
    """The ``index``-th of the :data:`MAX_STYLES` (colour, dash) styles."""
    return STYLE_COLOURS[index % MAX_STYLES], DASHES[min(index // 10, len(DASHES) - 1)]


def group_styles(groups: Sequence[str], method_of: Mapping[str, str],
                 top_k: int = MAX_STYLES) -> dict[str, tuple[str, tuple[int, ...]]]:
    """A (colour, dash) per group, distinct for the first ``min(top_k, MAX_STYLES)`` groups (in the
    order given: most important first), :data:`OTHERS_COLOUR` / :data:`OTHERS_DASH` for the rest.

    The first group of each of the paper's methods keeps the method's own colour
    (:data:`METHOD_COLOURS`, solid); every other group takes the next free style: solid ones first
    (other methods' colours last among them), then the dashed ones."""
    kept = list(dict.fromkeys(groups))[:max(1, min(top_k, MAX_STYLES))]
    # solid styles first, those of the paper's methods last among them (a method's colour goes
    # to another method's group only when no other solid colour is left)
    reserved = {STYLE_COLOURS.index(colour) for colour in METHOD_COLOURS.values() if colour in STYLE_COLOURS}
    free = sorted(range(MAX_STYLES), key=lambda slot: (slot >= 10, slot in reserved, slot))
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for group in kept:
        colour = METHOD_COLOURS.get(method_of.get(group, ""))
        slot = STYLE_COLOURS.index(colour) if colour in STYLE_COLOURS else -1
        if slot in free:
            free.remove(slot)
            out[group] = style_slot(slot)
    for group in kept:
        if group not in out:
            out[group] = style_slot(free.pop(0))
    return {group: out.get(group, (OTHERS_COLOUR, OTHERS_DASH)) for group in groups}


def rank_groups(groups: Sequence[str], score_of: Mapping[str, float]) -> list[str]:
    """``groups`` by their score, highest first (a group without a finite score last, in the
    order given): which groups a chart keeps apart when there are more than k."""
    def key(item: tuple[int, str]) -> tuple[int, float, int]:
        position, group = item
        score = score_of.get(group, float("nan"))
        finite = score == score and abs(score) != float("inf")
        return (0 if finite else 1, -score if finite else 0.0, position)

    return [group for _, group in sorted(enumerate(dict.fromkeys(groups)), key=key)]
