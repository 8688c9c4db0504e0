"""Streamlit glue shared by the pages: the run list, the sidebar, the URL, live refresh, messages.

The run list from small files only (:mod:`apps.data.listing`; unreadable runs listed with their
reason), names by differing config keys (:mod:`apps.data.identity`), the view held in query parameters,
runs from :data:`apps.data.loading.RUN_CACHE` (re-read when they grow). Page frame:
:func:`apps.views.page_frame.views`; charts: :mod:`apps.views.uicharts`. Read errors are shown with
``st.error``, never as a traceback. Detail: docs/app-notes.md#apps-views-ui.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import streamlit as st

from apps.data import colours, curriculum, identity, listing, loading
from apps.data.groups import Grouping
from apps.views.urlstate import url_seed, url_sync
from gdro_lab.runformat.runlog import RunData

if TYPE_CHECKING:  # apps.views.interactive imports altair: only chart pages need it
    from apps.views import interactive

NO_BASELINE = "(none)"
#: Added to the name of a run whose files look damaged, wherever the name appears.
DAMAGED_MARK = "⚠ damaged"
LIVE_INTERVALS = (2, 5, 10, 30)
SELECTION_KEY = "_gdro_selection"
RUN_KEY, BASELINE_KEY, GROUP_KEY, PICKED_KEY = "run", "baseline", "group", "pick"
EMA_KEY, LOG_KEY, X_KEY = "ema", "log_y", "x"
STEP_AXIS, WALL_AXIS = "step", "wall clock"
COLOUR_KEY, AUTO_COLOURS, NATURAL_COLOURS = "colours", "auto range", "natural range"
#: The sidebar's number of groups a chart keeps apart (:func:`apps.views.uicharts.legend_for`).
TOP_KEY = "top"


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose: the runs listed, the run shown, its baseline, live refresh, and how
    runs are grouped and named."""

    root: Path
    entries: tuple[loading.RunEntry, ...]
    primary: loading.RunEntry | None
    baseline: loading.RunEntry | None
    live: bool
    interval_s: float
    grouping: Grouping = field(default_factory=lambda: identity.group_runs({}))
    problems: tuple[listing.RunInfo, ...] = ()
    infos: tuple[listing.RunInfo, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)
    #: Run label -> why its files look damaged (:attr:`apps.data.listing.RunInfo.damage`).
    damaged: Mapping[str, str] = field(default_factory=dict)
    #: Run label -> the tags the user pinned to it (:mod:`apps.data.pins`).
    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The runs the views show (Compare, Study...): the rows ticked in the Runs page's table, those
    #: of them that meet its filter when one is typed, else the runs it keeps
    #: (:func:`apps.views.runstate.shown_picks`).
    picked: tuple[str, ...] = ()
    #: The rows ticked in the Runs page's table (in table order).
    ticked: tuple[str, ...] = ()
    #: The runs that meet the Runs page's filter (None: no filter), and the filter's text.
    filtered: tuple[str, ...] | None = None
    where: str = ""

    @property
    def shown(self) -> list[tuple[str, loading.RunEntry]]:
        """(role, entry) for the run and, when chosen, its baseline, in display order."""
        pairs = [("Run", self.primary)] if self.primary is not None else []
        if self.baseline is not None and self.primary is not None and self.baseline.path != self.primary.path:
            pairs.append(("Baseline", self.baseline))
        return [(role, entry) for role, entry in pairs if entry is not None]

    def name(self, label: str) -> str:
        """A run's name for people (``grpo lr×1.58 · seed 0``: the automatic keys, whatever the
        grouping chosen, so that a name never changes under a picker; or the name the user
        pinned), flagged ``⚠ damaged`` when its files look damaged."""
        name = self.names.get(label, self.grouping.display(label))
        return f"{name} {DAMAGED_MARK}" if label in self.damaged else name

    def producer(self, label: str) -> str:
        """The producer (meta.json) of a listed run ("" when unknown)."""
        return self._producers.get(label, "")

    @cached_property
    def _producers(self) -> dict[str, str]:
        """Run label -> producer, read once per selection (a page asks for each run it draws)."""
        return {info.label: info.producer for info in reversed(self.infos)}  # the first listed wins

    def healthy(self, labels: Sequence[str]) -> list[str]:
        """``labels`` without the damaged runs."""
        return [label for label in labels if label not in self.damaged]

    def picked_or_first_study(self) -> list[str]:
        """The runs picked on the Runs page; else every healthy run of the first run's study."""
        if self.picked:
            return list(self.picked)
        healthy = self.healthy([entry.label for entry in self.entries])
        if not healthy:
            return []
        family = self.grouping.family_of.get(healthy[0])
        return [label for label in healthy if self.grouping.family_of.get(label) == family]


def get_run(path: Path) -> RunData:
    """The run at ``path``, re-read only when its files changed; raises :class:`apps.data.loading.RunLoadError`."""
    return loading.RUN_CACHE.get(path)


def try_run(entry: loading.RunEntry) -> RunData | None:
    """The run, or None after showing why it cannot be read (``st.error``, one line)."""
    try:
        return get_run(entry.path)
    except loading.RunLoadError as err:
        st.error(f"Cannot show **{entry.label}**: {err}", icon=":material/error:")
        return None


def ema_weight() -> float:
    """The EMA weight chosen in the sidebar (0 = no smoothing)."""
    return float(st.session_state.get(EMA_KEY, 0.0))


def wall_clock() -> bool:
    """Whether the sidebar asks for a wall-clock x axis."""
    return st.session_state.get(X_KEY, STEP_AXIS) == WALL_AXIS


def interaction() -> interactive.Interaction:
    """A fresh set of linked zoom / crosshair parameters with the sidebar's log-scale choice."""
    from apps.views import interactive

    return interactive.Interaction(log_y=bool(st.session_state.get(LOG_KEY, False)))


def group_colours() -> dict[str, str]:
    """Colours of every group and run the app lists (:func:`apps.data.colours.group_colours`)."""
    return colours.group_colours(selection().grouping)


def run_colours(labels: list[str]) -> dict[str, str]:
    """Colours of runs drawn one line each (:func:`apps.data.colours.run_colours`)."""
    return colours.run_colours(selection().grouping, labels)


def selection() -> Selection:
    """The selection made by the sidebar in this script run."""
    chosen = st.session_state.get(SELECTION_KEY)
    if chosen is None:  # a page run without the entry script (should not happen): show nothing
        return Selection(Path("runs"), (), None, None, False, 5.0)
    return chosen


def no_runs_message(chosen: Selection) -> None:
    """Tell the user where runs are looked for and how to make one."""
    where = f"`{chosen.root}`"
    if chosen.root.is_file():
        where += " (a file, not a folder)"
    elif not chosen.root.is_dir():
        where += " (this folder does not exist)"
    extra = (f" {len(chosen.problems)} run folder(s) there cannot be read (see Runs)." if chosen.problems else "")
    st.info(f"No run directories found under {where}. Choose another runs folder in the sidebar, "
            f"pass run folders to `gdro app RUN_DIR ...`, or write one with `gdro simulate`.{extra}",
            icon=":material/folder_open:")


def run_caption(run: RunData) -> None:
    """Status line of a run: status, producer, steps, bins, and whether a torn last line was dropped."""
    facts = loading.summary(run)
    last = f" (last step {facts['last_step']})" if facts["last_step"] is not None else ""
    text = (f"{facts['status']} · {facts['producer'] or 'unknown producer'} · {facts['steps']} steps{last} · "
            f"{facts['bins']} bins · {facts['evals']} evaluations")
    if facts["unassigned_steps"]:
        text += (f" · {facts['unassigned_steps']} steps with no prompt assigned to a bin yet "
                 "(shares shown as null, grey)")
    for note in loading.torn_notes(run):
        text += f" · {note}"
    st.caption(text)


def live_fragment(body: Callable[[], None], chosen: Selection) -> Callable[[], None]:
    """``body`` as a fragment that reruns every ``interval_s`` seconds while live refresh is on."""
    return st.fragment(body, run_every=chosen.interval_s if chosen.live else None)


def missing(what: str) -> None:
    """Say that a run does not log something a panel needs."""
    st.info(f"This run does not log {what}.", icon=":material/info:")


def not_yet(run: RunData, what: str) -> None:
    """Say that a run logs something but has no value yet (the classifier's warm-up)."""
    unassigned = loading.unassigned_steps(run)
    st.info(f"No {what} yet: no prompt has been assigned to a bin in the {unassigned} steps logged so far "
            "(the difficulty classifier's warm-up).", icon=":material/hourglass_empty:")


def missing_or_warmup(run: RunData, fields: tuple[str, ...], what: str, logged_what: str) -> None:
    """:func:`not_yet` when the run logs ``fields`` but every step so far is in the warm-up, else
    :func:`missing`."""
    if loading.in_warmup(run, fields):
        not_yet(run, logged_what)
    else:
        missing(what)


def shown_runs() -> list[RunData]:
    """The run and its baseline (those that load), in display order."""
    loaded = []
    for _, entry in selection().shown:
        try:
            loaded.append(get_run(entry.path))
        except loading.RunLoadError:
            continue
    return loaded


def step_slider(run: RunData, key: str, label: str = "Step") -> int:
    """A slider over the run's logged steps (default: the latest; in the URL as ``key``); returns
    the chosen step index."""
    if run.steps.size < 2:
        return run.steps.size - 1
    first, last = int(run.steps[0]), int(run.steps[-1])
    stride = max(1, int(min(run.steps[1:] - run.steps[:-1])))
    chosen = st.slider(label, min_value=first, max_value=last, value=last, step=stride, key=key,
                       bind="query-params")
    return curriculum.step_index(run, chosen)


def iter_loaded(entries: list[loading.RunEntry]) -> Iterator[tuple[str, RunData]]:
    """(label, run) for each entry that loads (runs not read yet are read in parallel); an
    ``st.error`` line for each one that does not."""
    read = loading.RUN_CACHE.get_many_or_errors([entry.path for entry in entries], (loading.RunLoadError,))
    for entry, run in zip(entries, read):
        if isinstance(run, Exception):
            st.error(f"Cannot show **{entry.label}**: {run}", icon=":material/error:")
        else:
            yield entry.label, run


#: More picked runs than this: a page's run picker folds into an expander.
MANY_RUNS = 8


def runs_picker(chosen: Selection, by_label: Mapping[str, Any], key: str, default_labels: list[str],
                help_text: str) -> list[str]:
    """A page's multiselect of runs (``key``, kept in the URL) that follows the Runs page's picks:
    new picks there replace the choice here; otherwise ``default_labels`` until the user picks."""
    unknown = url_seed(key, list(by_label), multiple=True)
    if unknown:
        st.warning("The URL names runs that are not listed: " + ", ".join(f"**{label}**" for label in unknown),
                   icon=":material/link_off:")
    picked_key = key.replace("-runs", "-picked")
    if st.session_state.get(picked_key) != chosen.picked:  # new picks on the Runs page: follow them
        st.session_state[picked_key] = chosen.picked
        if chosen.picked:
            st.session_state[key] = list(chosen.picked)
    default = None if key in st.session_state else default_labels
    current = list(st.session_state.get(key, default or []))
    source = "picked on the Runs page" if chosen.picked and current == list(chosen.picked) else \
        "default" if current == list(default_labels) else "chosen here or in the link"
    where = st.expander(f"Runs ({len(current)}: {source})", icon=":material/checklist:") \
        if len(current) > MANY_RUNS else st.container()
    labels = where.multiselect("Runs", list(by_label), default=default, key=key, format_func=chosen.name,
                               help=help_text)
    url_sync(key, labels, default_labels)
    return list(labels)
