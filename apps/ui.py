"""Streamlit glue shared by the pages: the run list, the sidebar, the URL, live refresh, messages.

* **Run list.** The sidebar lists the runs under the runs folder from their small files only
  (:mod:`apps.listing`: meta.json, config.json, the last line of steps.jsonl), so a root with
  many runs does not slow the first page; a run folder that cannot be read is listed with its
  reason on the Runs page and counted in the sidebar, never dropped in silence.
* **Names.** Runs are named by the config keys that differ (:mod:`apps.identity`): the run
  picker shows "grpo lr×1.58 · seed 0", the URL keeps the folder label; "Group runs by" lets the
  user choose the keys (automatic by default).
* **The URL holds the view.** Run, baseline, grouping keys and the chart options are bound to
  query parameters (``bind="query-params"``): they survive navigation between pages and a link
  reopens the same view. A ``?run=`` or ``?baseline=`` that names no listed run says so (and why,
  for a run that cannot be read) instead of showing another run.
* **Runs** come from :data:`apps.loading.RUN_CACHE`, keyed on the run folder and
  :func:`apps.data.run_signature` (mtime and size of each file), so a run that is still being
  written is re-read as soon as it grows and an unchanged run is read once per server.

Chart elements are in :mod:`apps.uicharts`. Read errors are shown with ``st.error`` in the page,
never as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import numpy as np
import streamlit as st

from apps import data, identity, listing
from apps.settings import AppSettings
from gdro_lab.runlog import RunData

if TYPE_CHECKING:  # apps.interactive / uicharts import altair: only chart pages need them
    from apps import interactive, uicharts

NO_BASELINE = "(none)"
LIVE_INTERVALS = (2, 5, 10, 30)
SELECTION_KEY = "_gdro_selection"
RUN_KEY, BASELINE_KEY, GROUP_KEY = "run", "baseline", "group"
EMA_KEY, LOG_KEY, X_KEY = "ema", "log_y", "x"
STEP_AXIS, WALL_AXIS = "step", "wall clock (h)"


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose: the runs listed, the run shown, its baseline, live refresh, and how
    runs are grouped and named."""

    root: Path
    entries: tuple[data.RunEntry, ...]
    primary: data.RunEntry | None
    baseline: data.RunEntry | None
    live: bool
    interval_s: float
    grouping: identity.Grouping = field(default_factory=lambda: identity.group_runs({}))
    problems: tuple[listing.RunInfo, ...] = ()
    infos: tuple[listing.RunInfo, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)

    @property
    def shown(self) -> list[tuple[str, data.RunEntry]]:
        """(role, entry) for the run and, when chosen, its baseline, in display order."""
        pairs = [("Run", self.primary)] if self.primary is not None else []
        if self.baseline is not None and self.primary is not None and self.baseline.path != self.primary.path:
            pairs.append(("Baseline", self.baseline))
        return [(role, entry) for role, entry in pairs if entry is not None]

    def name(self, label: str) -> str:
        """A run's name for people (``grpo lr×1.58 · seed 0``: the automatic keys, whatever the
        grouping chosen, so that a name never changes under a picker)."""
        return self.names.get(label, self.grouping.display(label))


@st.cache_data(ttl=5, max_entries=16, show_spinner=False)
def _cached_search(root_text: str) -> tuple[list[Path], bool]:
    """Run folders (any folder with a meta.json) under a folder, searched again at most every 5 s."""
    return listing.find_candidates(Path(root_text)) if Path(root_text).is_dir() else ([], False)


def get_run(path: Path) -> RunData:
    """The run at ``path``, re-read only when its files changed; raises :class:`apps.data.RunLoadError`."""
    return data.RUN_CACHE.get(path)


def try_run(entry: data.RunEntry) -> RunData | None:
    """The run, or None after showing why it cannot be read (``st.error``, one line)."""
    try:
        return get_run(entry.path)
    except data.RunLoadError as err:
        st.error(f"Cannot show **{entry.label}**: {err}", icon=":material/error:")
        return None


#: Session-state keys of the URL parameters written by hand (see :func:`url_sync`): ever, and in this run.
URL_WRITTEN_KEY, URL_THIS_RUN_KEY = "_gdro_url_written", "_gdro_url_this_run"


def url_begin() -> None:
    """Start a script run's record of hand-written URL parameters."""
    st.session_state[URL_THIS_RUN_KEY] = set()


def url_end() -> None:
    """Remove hand-written URL parameters that no widget of this script run wrote (a page's own
    parameters, after the user left that page)."""
    this_run = st.session_state.get(URL_THIS_RUN_KEY, set())
    for key in list(st.session_state.get(URL_WRITTEN_KEY, set()) - this_run):
        if key in st.query_params:
            del st.query_params[key]
    st.session_state[URL_WRITTEN_KEY] = set(this_run)


def _url_value(key: str) -> str | None:
    """The URL's value of ``key`` on a session's first run (before the widget exists), else None."""
    if key in st.session_state:
        return None
    value = st.query_params.get(key)
    return str(value) if value is not None else None


def url_seed(key: str, options: list[str], multiple: bool = False) -> list[str]:
    """Values of ``key`` in the URL that are not among ``options`` (to be reported); the valid
    ones become the widget's value when the widget does not exist yet in this session.

    Widgets that show a formatted name (``format_func``) keep the raw label in the URL this way
    (Streamlit's own binding would store the formatted text): :func:`url_sync` writes it back.
    """
    if key in st.session_state:
        return []
    wanted = [str(value) for value in st.query_params.get_all(key)]
    if not wanted:
        return []
    valid = [value for value in wanted if value in options]
    if valid:
        st.session_state[key] = valid if multiple else valid[0]
    return [value for value in wanted if value not in options]


def url_sync(key: str, value: str | list[str] | None, default: str | list[str] | None = None) -> None:
    """Write a widget's value into the URL as ``key`` (removed when it equals ``default``)."""
    st.session_state.setdefault(URL_WRITTEN_KEY, set()).add(key)
    st.session_state.setdefault(URL_THIS_RUN_KEY, set()).add(key)
    current = st.query_params.get_all(key)
    wanted = [] if value is None or value == default else ([value] if isinstance(value, str) else list(value))
    if current == wanted:
        return
    if wanted:
        st.query_params[key] = wanted if len(wanted) > 1 else wanted[0]
    elif key in st.query_params:
        del st.query_params[key]


def _url_problem(kind: str, wanted: str, labels: list[str], problems: dict[str, str], root: Path) -> str:
    """The message for a URL label that names no listed run."""
    if wanted in problems:
        return f"The {kind} named in the URL, **{wanted}**, cannot be read: {problems[wanted]}"
    return (f"No run is labelled **{wanted}** under `{root}` (the {kind} named in the URL), so none is shown: "
            f"pick one in the sidebar ({len(labels)} listed).")


def sidebar(settings: AppSettings, chart_options: bool = True) -> Selection:
    """Draw the run pickers, the grouping, live refresh (and, when ``chart_options``, the chart
    options); remember the choice for the pages. Every choice is kept in the URL."""
    root_text = st.sidebar.text_input("Runs folder", value=str(settings.root), key="root",
                                      help="Folder scanned (recursively) for run directories.")
    root = Path(root_text.strip() or str(settings.root)).expanduser()
    found, truncated = _cached_search(str(root))
    listed = listing.list_runs(root, settings.run_dirs, found, truncated)
    infos = {info.label: info for info in listed.runs}
    labels = list(infos)
    problems = {info.label: info.problem or "" for info in listed.problems}
    grouping, automatic = _group_picker(listed)
    # Runs keep their automatic names whatever the grouping: a picker's shown names never go stale.
    names = _display_names(automatic, labels)
    primary_label = _run_picker(labels, names, problems, root)
    baseline_label = _baseline_picker(labels, names, problems, root)
    entries = tuple(info.entry for info in listed.runs)
    primary = infos[primary_label].entry if primary_label in infos else None
    baseline = infos[baseline_label].entry if baseline_label in infos else None
    running = primary_label in infos and infos[primary_label].status == "running"
    live = st.sidebar.toggle("Live refresh", value=running, key="live",
                             help="Re-read runs that are still being written every few seconds; "
                                  "new run folders appear by themselves.")
    interval = st.sidebar.selectbox("Refresh every (s)", LIVE_INTERVALS, index=LIVE_INTERVALS.index(5),
                                    key="live_interval", disabled=not live)
    if chart_options:
        _chart_options()
    _folder_notes(root, listed)
    selection = Selection(root, entries, primary, baseline, bool(live), float(interval), grouping,
                          listed.problems, listed.runs, names)
    st.session_state[SELECTION_KEY] = selection
    if live:
        _watch_new_runs(str(root), tuple(str(path) for path in found), float(interval))
    return selection


def _display_names(grouping: identity.Grouping, labels: list[str]) -> dict[str, str]:
    """The picker's text per run label: its name, with the folder where two runs share a name."""
    names = {label: grouping.display(label) for label in labels}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {label: name if counts[name] == 1 and name != label else (name if name == label else f"{name} — {label}")
            for label, name in names.items()}


def _run_picker(labels: list[str], names: dict[str, str], problems: dict[str, str], root: Path) -> str | None:
    wanted = _url_value(RUN_KEY)
    for unknown in url_seed(RUN_KEY, labels):
        st.warning(_url_problem("run", unknown, labels, problems, root), icon=":material/link_off:")
    if wanted is None and RUN_KEY not in st.session_state and labels:
        st.session_state[RUN_KEY] = labels[0]
    if st.session_state.get(RUN_KEY) not in (None, *labels):
        st.session_state[RUN_KEY] = None  # the run's folder is gone
    chosen = st.sidebar.selectbox("Run", labels, index=None, key=RUN_KEY,
                                  format_func=lambda label: names.get(label, label), placeholder="choose a run")
    url_sync(RUN_KEY, chosen)
    if chosen is not None and names.get(chosen, chosen) != chosen:
        st.sidebar.caption(f"folder `{chosen}`")
    return chosen


def _baseline_picker(labels: list[str], names: dict[str, str], problems: dict[str, str], root: Path) -> str | None:
    options = [NO_BASELINE, *labels]
    for unknown in url_seed(BASELINE_KEY, options):
        st.warning(_url_problem("baseline", unknown, labels, problems, root), icon=":material/link_off:")
    if st.session_state.get(BASELINE_KEY) not in options:
        st.session_state[BASELINE_KEY] = NO_BASELINE
    chosen = st.sidebar.selectbox("Baseline (side by side)", options, index=None, key=BASELINE_KEY,
                                  format_func=lambda label: names.get(label, label))
    url_sync(BASELINE_KEY, chosen, NO_BASELINE)
    return None if chosen in (None, NO_BASELINE) else str(chosen)


def _group_picker(listed: listing.Listing) -> tuple[identity.Grouping, identity.Grouping]:
    """"Group runs by": config keys (automatic when none is picked); the grouping of every listed
    run, and the automatic one (which names the runs)."""
    configs = {info.label: info.config for info in listed.runs if info.problem is None}
    automatic = identity.group_runs(configs)
    keys: list[str] = []
    for config in configs.values():
        keys += [key for key in identity.identity(config) if key not in keys]
    keys = sorted(keys)
    wanted = st.query_params.get_all(GROUP_KEY) if GROUP_KEY not in st.session_state else []
    unknown = [key for key in wanted if key not in keys]
    if unknown:
        st.warning(f"No listed run's config has the key(s) {', '.join(f'**{key}**' for key in unknown)} named in "
                   "the URL's `group`: they are left out.", icon=":material/link_off:")
    hint = ", ".join(automatic.keys) or "method"
    chosen = st.sidebar.multiselect("Group runs by", keys, default=[], key=GROUP_KEY, bind="query-params",
                                    placeholder=f"automatic: {hint}",
                                    help="Config keys whose values name and group the runs (seeds of one group "
                                         "are averaged on Study and Compare). Empty: the keys that differ "
                                         f"between the listed runs ({hint}).")
    return (identity.group_runs(configs, chosen) if chosen else automatic), automatic


def _folder_notes(root: Path, listed: listing.Listing) -> None:
    """Sidebar captions: an unusable runs folder, a search cut short, run folders that cannot be read."""
    problem = data.folder_problem(root)
    if problem is not None:
        st.sidebar.caption(f"Runs folder {problem}.")
    elif listed.truncated:
        st.sidebar.caption(f"Stopped searching `{root}` early (too deep or too many folders): "
                           "choose a narrower runs folder.")
    if listed.problems:
        count = len(listed.problems)
        st.sidebar.caption(f":material/warning: {count} run folder{'s' * (count != 1)} under the runs folder "
                           f"cannot be read; the Runs page says why.")


def _chart_options() -> None:
    """EMA smoothing, log scale and the x axis, for every chart page (sidebar expander); their
    values persist for the session and sit in the URL. (Heatmaps need no option: run and
    baseline always share each field's colour scale, :func:`apps.uicharts.colour_domain`.)"""
    with st.sidebar.expander("Chart options", expanded=False):
        st.slider("Smoothing (EMA weight)", 0.0, 0.99, value=0.0, step=0.01, key=EMA_KEY, persist_state="session",
                  bind="query-params",
                  help="TensorBoard-style debiased exponential moving average; the raw series stay "
                       "visible as faint lines. 0 = raw values.")
        st.toggle("Log y-scale", value=False, key=LOG_KEY, persist_state="session", bind="query-params",
                  help="Logarithmic y axes on time-series charts (symmetric log when values reach 0 or below).")
        st.selectbox("x axis", (STEP_AXIS, WALL_AXIS), index=0, key=X_KEY, persist_state="session",
                     bind="query-params",
                     help="Training steps, or hours since the run started (the sum of its logged step "
                          "times `time/step` and `time/eval`; runs that log none stay on steps).")


def _watch_new_runs(root_text: str, known: tuple[str, ...], interval_s: float) -> None:
    """In live mode, search the runs folder every ``interval_s`` and rerun the app when the set of
    run folders changed, so new runs appear in the sidebar without a click."""

    def check() -> None:
        found, _ = listing.find_candidates(Path(root_text)) if Path(root_text).is_dir() else ([], False)
        if tuple(str(path) for path in found) != known:
            _cached_search.clear()
            st.rerun(scope="app")

    with st.sidebar:
        st.fragment(check, run_every=interval_s)()


def ema_weight() -> float:
    """The EMA weight chosen in the sidebar (0 = no smoothing)."""
    return float(st.session_state.get(EMA_KEY, 0.0))


def wall_clock() -> bool:
    """Whether the sidebar asks for a wall-clock x axis."""
    return st.session_state.get(X_KEY, STEP_AXIS) == WALL_AXIS


def interaction() -> interactive.Interaction:
    """A fresh set of linked zoom / crosshair parameters with the sidebar's log-scale choice."""
    from apps import interactive

    return interactive.Interaction(log_y=bool(st.session_state.get(LOG_KEY, False)))


def group_colours() -> dict[str, str]:
    """Colours of every group and run the app lists (:func:`apps.identity.group_colours`)."""
    return selection().grouping.colours()


def run_colours(labels: list[str]) -> dict[str, str]:
    """Colours of runs drawn one line each (:func:`apps.identity.run_colours`)."""
    return identity.run_colours(selection().grouping, labels)


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
    facts = data.summary(run)
    last = f" (last step {facts['last_step']})" if facts["last_step"] is not None else ""
    text = (f"{facts['status']} · {facts['producer'] or 'unknown producer'} · {facts['steps']} steps{last} · "
            f"{facts['bins']} bins · {facts['evals']} evaluations")
    if facts["unassigned_steps"]:
        text += (f" · {facts['unassigned_steps']} steps with no prompt assigned to a bin yet "
                 "(shares shown as null, grey)")
    for note in data.torn_notes(run):
        text += f" · {note}"
    st.caption(text)


def views(render: Callable[[RunData, str], uicharts.Parts | None], title: str, caption: str) -> None:
    """Page frame: title, then the run and the baseline side by side.

    ``render(run, key)`` draws what belongs in the run's column (``key`` is ``run`` or
    ``baseline``: the prefix of its widgets' keys) and returns the rest as
    :class:`apps.uicharts.Parts`: heatmaps (drawn for both runs as one element), content between
    them and the time series, the time-series charts (one linked view: zoom and crosshair act
    on both columns, each row has one y-range), and content after them. The body is a fragment
    that reruns every few seconds while live refresh is on.
    """
    chosen = selection()
    st.title(title)
    st.caption(caption)
    if chosen.primary is None:
        if chosen.entries:
            st.info("No run chosen: pick one in the sidebar.", icon=":material/arrow_back:")
        else:
            no_runs_message(chosen)
        return

    def body() -> None:
        from apps import uicharts

        shown = chosen.shown
        columns = st.columns(len(shown)) if len(shown) > 1 else [st.container()]
        drawn: list[tuple[Any, str, RunData, uicharts.Parts]] = []
        for column, (role, entry) in zip(columns, shown):
            with column:
                st.subheader(f"{role}: {chosen.name(entry.label)}")
                if chosen.name(entry.label) != entry.label:
                    st.caption(f"folder `{entry.label}`")
                run = try_run(entry)
                if run is None:
                    continue
                run_caption(run)
                if run.steps.size == 0:
                    st.info("No steps logged yet: this run has just started.", icon=":material/hourglass_empty:")
                    continue
                parts = render(run, role.lower())
                if parts is not None:
                    drawn.append((column, entry.label, run, parts))
        _draw_parts(drawn, title, len(shown))

    live_fragment(body, chosen)()


def _draw_parts(drawn: list[tuple[Any, str, RunData, uicharts.Parts]], title: str, shown: int) -> None:
    """Heatmaps, middle content, linked time series and bottom content of the shown runs."""
    if not drawn:  # e.g. the Config page: no chart, no chart code imported
        return
    from apps import uicharts

    key = title.lower().replace(" ", "-")
    if any(parts.heatmaps for *_, parts in drawn):
        uicharts.heatmap_pair([uicharts.HeatmapColumn(run, parts.heatmaps, parts.selected_step)
                               for _, _, run, parts in drawn], key)
    _in_columns([parts.middle for *_, parts in drawn], shown)
    series = [_clocked(list(parts.series), run, label) for _, label, run, parts in drawn]
    if any(series):
        uicharts.linked_pair(series, key=f"{key}-charts", labels=[label for _, label, _, _ in drawn])
    _in_columns([parts.bottom for *_, parts in drawn], shown)


def _in_columns(callables: list[Callable[[], None] | None], shown: int) -> None:
    """Draw each callable in its run's column (a new row of columns), when any is given."""
    if not any(callables):
        return
    columns = st.columns(shown) if shown > 1 else [st.container()]
    for column, draw in zip(columns, callables):
        if draw is not None:
            with column:
                draw()


def elapsed_seconds(run: RunData) -> np.ndarray | None:
    """Seconds since the run started at each logged step, or None when the run logs no step times.

    ``time/elapsed`` (or ``wall_time``) when a producer logs it; otherwise the running sum of
    ``time/step`` + ``time/eval`` (a step's time counts every step since the previous logged one,
    so a run that logs every k-th step is scaled by its step gaps). Time spent outside steps
    (start-up, checkpoints) is not counted.
    """
    for name in ("time/elapsed", "wall_time"):
        if data.has_scalar(run, name):
            return np.asarray(run.scalars[name], dtype=float)
    if not data.has_scalar(run, "time/step"):
        return None
    per_step = np.nan_to_num(run.scalars["time/step"])
    if "time/eval" in run.scalars:
        per_step = per_step + np.nan_to_num(run.scalars["time/eval"])
    gaps = np.diff(run.steps, prepend=run.steps[0] - 1 if run.steps.size else 0).clip(min=1)
    return np.cumsum(per_step * gaps)


def _clocked(items: list[uicharts.Series], run: RunData, label: str) -> list[uicharts.Series]:
    """The run's charts on the wall clock when the sidebar asks for it and the run logs step times."""
    from apps import uicharts

    if not wall_clock():
        return items
    seconds = elapsed_seconds(run)
    if seconds is None:
        st.caption(f"**{label}** logs no step times (`time/step`): its charts stay on steps.")
        return items
    clock = {label: (run.steps.astype(float), seconds)}
    return [uicharts.on_wall_clock(item, clock) for item in items]


def live_fragment(body: Callable[[], None], chosen: Selection) -> Callable[[], None]:
    """``body`` as a fragment that reruns every ``interval_s`` seconds while live refresh is on."""
    return st.fragment(body, run_every=chosen.interval_s if chosen.live else None)


def missing(what: str) -> None:
    """Say that a run does not log something a panel needs."""
    st.info(f"This run does not log {what}.", icon=":material/info:")


def not_yet(run: RunData, what: str) -> None:
    """Say that a run logs something but has no value yet (the classifier's warm-up)."""
    unassigned = data.unassigned_steps(run)
    st.info(f"No {what} yet: no prompt has been assigned to a bin in the {unassigned} steps logged so far "
            "(the difficulty classifier's warm-up).", icon=":material/hourglass_empty:")


def missing_or_warmup(run: RunData, fields: tuple[str, ...], what: str, logged_what: str) -> None:
    """:func:`not_yet` when the run logs ``fields`` but every step so far is in the warm-up, else
    :func:`missing`."""
    if data.in_warmup(run, fields):
        not_yet(run, logged_what)
    else:
        missing(what)


def shown_runs() -> list[RunData]:
    """The run and its baseline (those that load), in display order."""
    loaded = []
    for _, entry in selection().shown:
        try:
            loaded.append(get_run(entry.path))
        except data.RunLoadError:
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
    return data.step_index(run, chosen)


def iter_loaded(entries: list[data.RunEntry]) -> Iterator[tuple[str, RunData]]:
    """(label, run) for each entry that loads (runs not read yet are read in parallel); an
    ``st.error`` line for each one that does not."""
    for entry, run in zip(entries, data.RUN_CACHE.get_many([entry.path for entry in entries])):
        if isinstance(run, data.RunLoadError):
            st.error(f"Cannot show **{entry.label}**: {run}", icon=":material/error:")
        else:
            yield entry.label, run
