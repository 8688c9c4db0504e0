"""Groups of seeds on the traveling-wave, lead-lag and SE-proxy pages: one group, or two side by side.

*Show* picks the run and its baseline (the page frame's columns, :mod:`apps.views.page_frame`) or
groups. A group is one of the sidebar's grouping (:attr:`apps.views.ui.Selection.grouping`, the groups
of Study and Compare), drawn as one run: the mean or median over its seeds of every per-step, per-bin
logged value, with the number of seeds at each step (:func:`apps.data.group_views.group_run`). Two
groups share each heatmap's colour scale and each chart's y-range; each chart's CSV holds the group
values drawn and ``n``. Damaged runs are left out of a group (and named). A group run and its
heatmap specs are cached on its runs' files (:func:`apps.data.loading.run_signature`) and the options.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import streamlit as st

from apps.data import curriculum, group_views, loading
from apps.views import charts, interactive, ui, uicharts
from gdro_lab.runformat.runlog import RunData

RUNS, GROUPS = "run and baseline", "groups of seeds"
NO_GROUP = "(none)"
#: Widget-key prefix of each group's column (its step slider, its snapshot choice...).
ROLE_KEYS = ("group", "beside")

#: What a page draws for one group run: ``render(group, key, groups_shown)`` (the page's own per-run
#: render, given every group shown for shared ranges).
GroupRender = Callable[[RunData, str, Sequence[RunData]], "uicharts.Parts | None"]


@dataclass(frozen=True)
class GroupChoice:
    """The groups to show (one or two labels) and the statistic across each group's seeds."""

    labels: tuple[str, ...]
    statistic: str


def page(key: str, render: GroupRender) -> bool:
    """The page's *Show* choice; for groups, the group pickers and the groups' charts. True when
    the page was drawn here (groups), False for the run and its baseline (the page frame's)."""
    chosen = ui.selection()
    choice = choose(chosen, key)
    if choice is None:
        return False
    if not choice.labels:
        st.info("No group of readable runs to show.", icon=":material/info:")
        return True
    ui.live_fragment(lambda: draw(chosen, choice, render, key), chosen)()
    return True


def _keep_valid(key: str, options: Sequence[str], default: str) -> None:
    """A picker's kept value that is no longer offered (regrouped, run gone) goes back to ``default``."""
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = default


def choose(chosen: ui.Selection, key: str) -> GroupChoice | None:
    """*Show* (run and baseline, or groups); for groups, *Group*, *Beside it* and *Across seeds*
    (all kept in the URL). Defaults: the sidebar run's group, and the baseline's group beside it."""
    show = st.radio("Show", (RUNS, GROUPS), horizontal=True, key=f"{key}-show", bind="query-params",
                    help="One run (and the sidebar's baseline beside it), or groups of seeds (the runs that share "
                         "a config but the seed, grouped as on Study): each group's mean or median over its seeds.")
    if show != GROUPS:
        return None
    grouping = chosen.grouping
    options = [group.label for group in grouping.groups if chosen.healthy(list(group.members))]
    if not options:
        return GroupChoice((), group_views.STATISTICS[0])
    first_default = _group_of(chosen, chosen.primary, options) or options[0]
    beside_default = _group_of(chosen, chosen.baseline, options) or NO_GROUP
    if beside_default == first_default:
        beside_default = NO_GROUP
    left, middle, right = st.columns([5, 5, 2])
    _keep_valid(f"{key}-group", options, first_default)
    _keep_valid(f"{key}-beside", [NO_GROUP, *options], beside_default)
    first = left.selectbox("Group", options, index=options.index(first_default), key=f"{key}-group",
                           bind="query-params", help="Default: the group of the sidebar's run.")
    beside = middle.selectbox("Beside it", [NO_GROUP, *options], index=[NO_GROUP, *options].index(beside_default),
                              key=f"{key}-beside", bind="query-params",
                              help="A second group side by side, on the same colour scales and y-ranges. "
                                   "Default: the group of the sidebar's baseline.")
    statistic = right.selectbox("Across seeds", group_views.STATISTICS, key=f"{key}-statistic",
                                bind="query-params", help="At each step (and bin), the mean or the median over "
                                                          "the group's seeds that log that step.")
    labels = (str(first),) if beside in (None, NO_GROUP, first) else (str(first), str(beside))
    return GroupChoice(labels, str(statistic))


def _group_of(chosen: ui.Selection, entry: object, options: Sequence[str]) -> str | None:
    label = getattr(entry, "label", None)
    group = chosen.grouping.group_of.get(label) if label is not None else None
    return group if group in options else None


def load_group(chosen: ui.Selection, label: str) -> tuple[dict[str, RunData], list[str]]:
    """(run label -> run, for the group's healthy runs that load and log steps; its damaged runs)."""
    members = next((group.members for group in chosen.grouping.groups if group.label == label), ())
    by_label = {entry.label: entry for entry in chosen.entries}
    damaged = [member for member in members if member in chosen.damaged]
    entries = [by_label[member] for member in chosen.healthy(list(members)) if member in by_label]
    runs = {run_label: run for run_label, run in ui.iter_loaded(entries) if run.steps.size}
    return runs, damaged


#: A group run's cache key: its runs' folders and file signatures.
Members = tuple[tuple[str, tuple[tuple[str, int, int], ...]], ...]


def members_key(runs: dict[str, RunData]) -> Members:
    return tuple((str(run.path), loading.run_signature(run.path)) for run in runs.values())


@st.cache_data(max_entries=32, show_spinner=False)
def cached_group_run(members: Members, statistic: str, label: str) -> RunData:
    """:func:`apps.data.group_views.group_run` of the runs ``members`` names, cached on their files."""
    runs = {path: ui.get_run(Path(path)) for path, _ in members}
    return group_views.group_run(runs, statistic, name=label)


@dataclass(frozen=True)
class Drawn:
    """A group drawn in column ``index``: its label, group run (cached on ``members``) and parts."""

    index: int
    label: str
    group: RunData
    parts: uicharts.Parts
    members: Members
    statistic: str


def draw(chosen: ui.Selection, choice: GroupChoice, render: GroupRender, key: str) -> None:
    """Each chosen group in its column: header, seeds, the page's parts drawn from the group run."""
    loaded = [(label, *load_group(chosen, label)) for label in choice.labels]
    keys = [members_key(runs) for _, runs, _ in loaded]
    groups = [cached_group_run(members, choice.statistic, label) if members else None
              for (label, _, _), members in zip(loaded, keys)]
    drawn: list[Drawn] = []
    for index, (column, (label, runs, damaged), group, members) in enumerate(
            zip(st.columns(len(loaded)), loaded, groups, keys)):
        with column:
            st.subheader(f"{'Group' if index == 0 else 'Beside it'}: {label}")
            if group is None:
                st.info("No run of this group can be read or has logged a step.", icon=":material/info:")
                continue
            seeds = ", ".join(str(chosen.grouping.seed_of.get(run_label, run_label)) for run_label in runs)
            st.caption(f"{choice.statistic} over {len(runs)} seed{'s' * (len(runs) != 1)} (seed {seeds}) at each "
                       f"step and bin · {group_views.coverage_note(runs)}")
            if damaged:
                st.caption(f"Left out as damaged: {', '.join(chosen.name(run_label) for run_label in damaged)}.")
            parts = render(group, ROLE_KEYS[index], [other for other in groups if other is not None])
            if parts is not None:
                drawn.append(Drawn(index, label, group, parts, members, choice.statistic))
    if not drawn:
        return
    if any(item.parts.heatmaps for item in drawn):
        heatmaps(drawn, f"{key}-groups")
    _in_columns(drawn, "middle", len(loaded))
    series = [[_with_seeds(chart, item.group) for chart in item.parts.series] for item in drawn]
    if any(series):
        uicharts.linked_pair(series, key=f"{key}-group-charts", labels=[item.label for item in drawn])
    _in_columns(drawn, "bottom", len(loaded))
    if ui.wall_clock():
        st.caption("Groups are drawn against steps (their seeds' clocks differ).")


def _in_columns(drawn: Sequence[Drawn], part: str, shown: int) -> None:
    """The ``middle`` or ``bottom`` content of each drawn group, in its group's column."""
    callables = {item.index: getattr(item.parts, part) for item in drawn}
    if any(callables.values()):
        for index, column in enumerate(st.columns(shown)):
            if callables.get(index) is not None:
                with column:
                    callables[index]()


def seeds_by_step(group: RunData) -> pd.Series:
    """Step -> n, the seeds of the group that log it."""
    return pd.Series(group.scalars[group_views.SEEDS_SCALAR], index=group.steps)


def _with_seeds(item: uicharts.Series, group: RunData) -> uicharts.Series:
    """A chart's frame with ``n`` (seeds at the step) beside each value, for its CSV."""
    if item.frame.empty:
        return item
    return replace(item, frame=item.frame.assign(n=item.frame["step"].map(seeds_by_step(group)).to_numpy()))


def heatmap_frame(group: RunData, field: str) -> pd.DataFrame:
    """A group's heatmap values at every logged step (step, step_end, bin, label, value, n), as exported."""
    frame = curriculum.heatmap_frame(group, field, max(1, group.steps.size))
    return frame.assign(n=frame["step"].map(seeds_by_step(group)).to_numpy())


def heatmaps(drawn: Sequence[Drawn], key: str) -> None:
    """The groups' heatmaps as one chart element (a column per group, one colour scale per field
    shared by the groups: :func:`apps.views.uicharts.colour_domain`), and their CSV."""
    shown = len(drawn)
    mode = uicharts.colour_mode()
    runs = [item.group for item in drawn]
    grid = []
    for item in drawn:
        columns = uicharts.heatmap_columns(item.group, shown)
        block = curriculum.heatmap_block(item.group.steps.size, columns)
        specs = []
        for field, title in item.parts.heatmaps:
            domain = uicharts.colour_domain(field, runs, mode)
            heading = f"{title} · means of {block}-step blocks" if block > 1 else title
            specs.append(_heatmap_spec(item.members, item.statistic, item.label, field, columns, heading,
                                       item.parts.selected_step, tuple(domain) if domain is not None else None,
                                       uicharts.colour_note(field, domain, mode)))
        grid.append(specs)
    st.vega_lite_chart(interactive.heatmap_grid(grid, uicharts.HEATMAP_WIDTH[min(2, shown)]), width="content")
    frames = {f"{item.label}: {field}": heatmap_frame(item.group, field) for item in drawn
              for field, _ in item.parts.heatmaps}
    uicharts.export_button(frames, f"{key}-heatmaps", f"{key}-heatmaps")


@st.cache_data(max_entries=128, show_spinner=False)
def _heatmap_spec(members: Members, statistic: str, label: str, field: str, columns: int, title: str,
                  selected_step: float | None, domain: tuple[float, ...] | None, legend_title: str
                  ) -> dict[str, object]:
    """A group heatmap's Vega-Lite spec, cached on the group's files and the view's options."""
    group = cached_group_run(members, statistic, label)
    figure = charts.heatmap(curriculum.heatmap_frame(group, field, columns), field, title, selected_step,
                            domain=domain, num_bins=group.num_bins, legend_title=legend_title)
    return interactive.to_spec(figure)
