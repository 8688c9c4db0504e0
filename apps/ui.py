"""Streamlit glue shared by the pages: cached loading, the sidebar, live refresh and messages.

Runs come from :data:`apps.loading.RUN_CACHE`, keyed on the run folder and
:func:`apps.data.run_signature` (mtime and size of each file), so a run that is still being
written is re-read as soon as it grows, an unchanged run is read once per server (not copied
per rerun, unlike ``st.cache_data``), and a page that needs many runs reads them in parallel.
Chart elements are in :mod:`apps.uicharts`. Read errors are shown with ``st.error`` in the
page, never as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import streamlit as st

from apps import data
from apps.settings import AppSettings
from gdro_lab.runlog import RunData

if TYPE_CHECKING:  # apps.interactive imports altair: only chart pages need it (the landing page has no chart)
    from apps import interactive

NO_BASELINE = "(none)"
LIVE_INTERVALS = (2, 5, 10, 30)
SELECTION_KEY = "_gdro_selection"
EMA_KEY, LOG_KEY, SHARED_SCALE_KEY = "ema", "log_y", "shared_scale"


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose: the runs listed, the run shown, its baseline, and live refresh."""

    root: Path
    entries: tuple[data.RunEntry, ...]
    primary: data.RunEntry | None
    baseline: data.RunEntry | None
    live: bool
    interval_s: float

    @property
    def shown(self) -> list[tuple[str, data.RunEntry]]:
        """(role, entry) for the run and, when chosen, its baseline, in display order."""
        pairs = [("Run", self.primary)] if self.primary is not None else []
        if self.baseline is not None and self.primary is not None and self.baseline.path != self.primary.path:
            pairs.append(("Baseline", self.baseline))
        return [(role, entry) for role, entry in pairs if entry is not None]


@st.cache_data(ttl=5, max_entries=16, show_spinner=False)
def _cached_search(root_text: str) -> tuple[list[Path], bool]:
    """Runs under a folder, searched again at most every 5 s (new runs appear on the next rerun)."""
    return data.find_run_dirs(Path(root_text))


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


def _is_running(entry: data.RunEntry | None) -> bool:
    if entry is None:
        return False
    try:
        return get_run(entry.path).meta.get("status") == "running"
    except data.RunLoadError:
        return False


def _query_index(options: list[str], name: str, default: int) -> int:
    """Index of the option named by the URL query parameter ``name`` (``?run=...&baseline=...``)."""
    wanted = st.query_params.get(name)
    return options.index(wanted) if wanted in options else default


def sidebar(settings: AppSettings, chart_options: bool = True) -> Selection:
    """Draw the run pickers and the live toggle (and, when ``chart_options``, the chart options);
    remember the choice for the pages.

    The first choice of run and baseline can come from the URL: ``?run=LABEL&baseline=LABEL``.
    Pages without charts (the landing run table, Config) leave the chart options out, so that a
    fresh browser loads no slider code before the first page; their values are kept meanwhile.
    """
    root_text = st.sidebar.text_input("Runs folder", value=str(settings.root), key="root",
                                      help="Folder scanned (recursively) for run directories.")
    root = Path(root_text.strip() or str(settings.root)).expanduser()
    found, truncated = _cached_search(str(root))
    entries = data.discover_runs(root, settings.run_dirs, found)
    by_label = {entry.label: entry for entry in entries}
    labels = list(by_label)
    primary_label = st.sidebar.selectbox("Run", labels, index=_query_index(labels, "run", 0) if labels else None,
                                         key="run", placeholder="no run found")
    baseline_options = [NO_BASELINE, *labels]
    baseline_label = st.sidebar.selectbox("Baseline (side by side)", baseline_options,
                                          index=_query_index(baseline_options, "baseline", 0), key="baseline")
    primary = by_label.get(primary_label) if primary_label else None
    baseline = by_label.get(baseline_label) if baseline_label != NO_BASELINE else None
    live = st.sidebar.toggle("Live refresh", value=_is_running(primary), key="live",
                             help="Re-read runs that are still being written every few seconds; "
                                  "new run folders appear by themselves.")
    interval = st.sidebar.selectbox("Refresh every (s)", LIVE_INTERVALS, index=LIVE_INTERVALS.index(5),
                                    key="live_interval", disabled=not live)
    if chart_options:
        _chart_options()
    problem = data.folder_problem(root)
    if problem is not None:
        st.sidebar.caption(f"Runs folder {problem}.")
    elif truncated:
        st.sidebar.caption(f"Stopped searching `{root}` early (too deep or too many folders): "
                           "choose a narrower runs folder.")
    selection = Selection(root, tuple(entries), primary, baseline, bool(live), float(interval))
    st.session_state[SELECTION_KEY] = selection
    if live:
        _watch_new_runs(str(root), tuple(str(path) for path in found), float(interval))
    return selection


def _chart_options() -> None:
    """EMA smoothing, log scale and the shared colour scale, for every chart page (sidebar
    expander); their values persist for the session through pages that do not draw them."""
    with st.sidebar.expander("Chart options", expanded=False):
        st.slider("Smoothing (EMA weight)", 0.0, 0.99, value=0.0, step=0.01, key=EMA_KEY, persist_state="session",
                  help="TensorBoard-style debiased exponential moving average; the raw series stay "
                       "visible as faint lines. 0 = raw values.")
        st.toggle("Log y-scale", value=False, key=LOG_KEY, persist_state="session",
                  help="Logarithmic y axes on time-series charts (symmetric log when values reach 0 or below).")
        st.toggle("Same colour scale for run and baseline", value=True, key=SHARED_SCALE_KEY, persist_state="session",
                  help="Heatmaps of the run and its baseline use one colour scale, so equal colours mean "
                       "equal values.")


def _watch_new_runs(root_text: str, known: tuple[str, ...], interval_s: float) -> None:
    """In live mode, search the runs folder every ``interval_s`` and rerun the app when the set of
    run folders changed, so new runs appear in the sidebar without a click."""

    def check() -> None:
        found, _ = data.find_run_dirs(Path(root_text))
        if tuple(str(path) for path in found) != known:
            _cached_search.clear()
            st.rerun(scope="app")

    with st.sidebar:
        st.fragment(check, run_every=interval_s)()


def ema_weight() -> float:
    """The EMA weight chosen in the sidebar (0 = no smoothing)."""
    return float(st.session_state.get(EMA_KEY, 0.0))


def interaction() -> interactive.Interaction:
    """A fresh set of linked zoom / crosshair parameters with the sidebar's log-scale choice."""
    from apps import interactive

    return interactive.Interaction(log_y=bool(st.session_state.get(LOG_KEY, False)))


def shared_scale() -> bool:
    """Whether run and baseline heatmaps share one colour scale."""
    return bool(st.session_state.get(SHARED_SCALE_KEY, True))


def colours(extra: Iterable[str] = ()) -> dict[str, str]:
    """Stable colours for every run the app lists, their method names and ``extra`` names."""
    from apps import interactive

    chosen = selection()
    names = [entry.label for entry in chosen.entries] + list(extra)
    names += [label.rsplit("/", 1)[0] for label in names if "/" in label]
    return interactive.colour_map(names)


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
    st.info(f"No run directories found under {where}. Choose another runs folder in the sidebar, "
            "pass run folders to `gdro app RUN_DIR ...`, or write one with `gdro simulate`.",
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


def views(render: Callable[[RunData, str], None], title: str, caption: str) -> None:
    """Page frame: title, then ``render(run, key_prefix)`` for the run and the baseline side by side.

    The body is a fragment that reruns on its own every few seconds while live refresh is on,
    re-reading runs whose files changed.
    """
    chosen = selection()
    st.title(title)
    st.caption(caption)
    if chosen.primary is None:
        no_runs_message(chosen)
        return

    def body() -> None:
        shown = chosen.shown
        columns = st.columns(len(shown)) if len(shown) > 1 else [st.container()]
        for position, (column, (role, entry)) in enumerate(zip(columns, shown)):
            with column:
                st.subheader(f"{role}: {entry.label}")
                run = try_run(entry)
                if run is None:
                    continue
                run_caption(run)
                if run.steps.size == 0:
                    st.info("No steps logged yet: this run has just started.", icon=":material/hourglass_empty:")
                    continue
                render(run, f"{title}-{position}")

    live_fragment(body, chosen)()


def live_fragment(body: Callable[[], None], chosen: Selection) -> Callable[[], None]:
    """``body`` as a fragment that reruns every ``interval_s`` seconds while live refresh is on."""
    return st.fragment(body, run_every=chosen.interval_s if chosen.live else None)


def missing(what: str) -> None:
    """Say that a run does not log something a panel needs."""
    st.info(f"This run does not log {what}.", icon=":material/info:")


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
    """A slider over the run's logged steps (default: the latest); returns the chosen step index."""
    if run.steps.size < 2:
        return run.steps.size - 1
    first, last = int(run.steps[0]), int(run.steps[-1])
    stride = max(1, int(min(run.steps[1:] - run.steps[:-1])))
    chosen = st.slider(label, min_value=first, max_value=last, value=last, step=stride, key=key)
    return data.step_index(run, chosen)


def iter_loaded(entries: list[data.RunEntry]) -> Iterator[tuple[str, RunData]]:
    """(label, run) for each entry that loads (runs not read yet are read in parallel); an
    ``st.error`` line for each one that does not."""
    for entry, run in zip(entries, data.RUN_CACHE.get_many([entry.path for entry in entries])):
        if isinstance(run, data.RunLoadError):
            st.error(f"Cannot show **{entry.label}**: {run}", icon=":material/error:")
        else:
            yield entry.label, run


