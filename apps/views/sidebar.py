"""The sidebar: runs folder, grouping, run and baseline pickers, live refresh, chart options.

Draws the widgets and leaves the choice in :class:`apps.views.ui.Selection` for the pages. Runs are
listed from their small files (:mod:`apps.data.listing`), named by the automatic keys
(:mod:`apps.data.identity`), grouped by the keys the user picks, and every choice is kept in the URL
(:mod:`apps.views.urlstate` for the run pickers, Streamlit's ``bind="query-params"`` for the rest).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from apps.data import identity, listing, loading, pins
from apps.data.groups import Grouping
from apps.data.settings import AppSettings
from apps.views import runstate
from apps.views.ui import (TOP_KEY, AUTO_COLOURS, BASELINE_KEY, COLOUR_KEY, DAMAGED_MARK, EMA_KEY, NATURAL_COLOURS, PICKED_KEY, GROUP_KEY, LIVE_INTERVALS, LOG_KEY, NO_BASELINE, RUN_KEY, SELECTION_KEY,
                     STEP_AXIS, WALL_AXIS, X_KEY, Selection)
from apps.views.urlstate import url_problem, url_seed, url_sync, url_value


@st.cache_data(ttl=5, max_entries=16, show_spinner=False)
def _cached_search(root_text: str) -> tuple[list[Path], bool]:
    """Run folders (any folder with a meta.json) under a folder, searched again at most every 5 s."""
    return listing.find_candidates(Path(root_text)) if Path(root_text).is_dir() else ([], False)


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
    pinned = _pins(listed)
    names.update({label: pin.name for label, pin in pinned.items() if pin.name})
    damaged = {info.label: info.damage for info in listed.runs if info.damage}
    shown = {label: f"{name} {DAMAGED_MARK}" if label in damaged else name for label, name in names.items()}
    ticked = _picked(labels)
    filtered = runstate.filtered_runs(listed.runs, grouping, names)
    picked = runstate.shown_picks(ticked, filtered, damaged)
    runstate.follow_filter(picked, filtered, RUN_KEY, BASELINE_KEY, NO_BASELINE)
    url_sync(runstate.WHERE_KEY, runstate.where_text(), "")
    primary_label = _run_picker(labels, shown, problems, root, [*picked, *labels], damaged)
    baseline_label = _baseline_picker(labels, shown, problems, root)
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
                          listed.problems, listed.runs, names, damaged,
                          {label: pin.tags for label, pin in pinned.items() if pin.tags}, picked, ticked, filtered,
                          runstate.where_text())
    st.session_state[SELECTION_KEY] = selection
    if live:
        _watch_new_runs(str(root), tuple(str(path) for path in found), float(interval))
    return selection


def _display_names(grouping: Grouping, labels: list[str]) -> dict[str, str]:
    """The picker's text per run label: its name, with the folder where two runs share a name."""
    names = {label: grouping.display(label) for label in labels}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {label: name if counts[name] == 1 and name != label else (name if name == label else f"{name} — {label}")
            for label, name in names.items()}


def _pins(listed: listing.Listing) -> dict[str, pins.Pin]:
    """Run label -> the name and tags the user pinned to it (:mod:`apps.data.pins`)."""
    stored = pins.load_pins(pins.pins_path())
    if not stored:
        return {}
    return {info.label: stored[key] for info in listed.runs if (key := pins.pin_key(info.entry.path)) in stored}


def _picked(labels: list[str]) -> tuple[str, ...]:
    """Runs picked in the Runs page's table (kept in the URL as ``pick``), those still listed."""
    if PICKED_KEY not in st.session_state:
        st.session_state[PICKED_KEY] = tuple(str(value) for value in st.query_params.get_all(PICKED_KEY))
    known = set(labels)
    picked = tuple(label for label in st.session_state[PICKED_KEY] if label in known)
    url_sync(PICKED_KEY, list(picked), [])
    return picked


def _run_picker(labels: list[str], names: dict[str, str], problems: dict[str, str], root: Path,
                preferred: list[str], damaged: dict[str, str]) -> str | None:
    """The run of the per-run pages; by default the first picked (else listed) run that is not
    damaged: a damaged run is shown only when asked for."""
    wanted = url_value(RUN_KEY)
    for unknown in url_seed(RUN_KEY, labels):
        st.warning(url_problem("run", unknown, labels, problems, root), icon=":material/link_off:")
    if wanted is None and RUN_KEY not in st.session_state and labels:
        healthy = [label for label in preferred if label not in damaged]
        st.session_state[RUN_KEY] = healthy[0] if healthy else None
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
        st.warning(url_problem("baseline", unknown, labels, problems, root), icon=":material/link_off:")
    if st.session_state.get(BASELINE_KEY) not in options:
        st.session_state[BASELINE_KEY] = NO_BASELINE
    chosen = st.sidebar.selectbox("Baseline (side by side)", options, index=None, key=BASELINE_KEY,
                                  format_func=lambda label: names.get(label, label))
    url_sync(BASELINE_KEY, chosen, NO_BASELINE)
    return None if chosen in (None, NO_BASELINE) else str(chosen)


def _group_picker(listed: listing.Listing) -> tuple[Grouping, Grouping]:
    """"Group runs by": config keys (automatic when none is picked); the grouping of every listed
    run, and the automatic one (which names the runs: within each study, :func:`apps.data.identity.group_runs`)."""
    automatic, keys = identity.automatic_grouping(listed.runs)
    wanted = st.query_params.get_all(GROUP_KEY) if GROUP_KEY not in st.session_state else []
    unknown = [key for key in wanted if key not in keys]
    if unknown:
        st.warning(f"No listed run's config has the key(s) {', '.join(f'**{key}**' for key in unknown)} named in "
                   "the URL's `group`: they are left out.", icon=":material/link_off:")
    hint = "; ".join(f"{family}: {', '.join(keys) or 'method'}" for family, keys in automatic.family_keys.items()) \
        or "method"
    chosen = st.sidebar.multiselect("Group runs by", keys, default=[], key=GROUP_KEY, bind="query-params",
                                    placeholder="automatic: the keys that differ in each study",
                                    help="Config keys whose values name and group the runs (seeds of one group "
                                         "are averaged on Study and Compare). Empty: in each study (a study "
                                         "folder and producer), the keys that differ between its runs "
                                         f"({hint}).")
    if not chosen:
        return automatic, automatic
    return identity.group_runs({info.label: info.config for info in listed.runs if info.problem is None}, chosen), \
        automatic


def _folder_notes(root: Path, listed: listing.Listing) -> None:
    """Sidebar captions: an unusable runs folder, a search cut short, run folders that cannot be read."""
    problem = loading.folder_problem(root)
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
    baseline always share each field's colour scale, :func:`apps.views.uicharts.colour_domain`.)"""
    with st.sidebar.expander("Chart options", expanded=False):
        st.slider("Smoothing (EMA weight)", 0.0, 0.99, value=0.0, step=0.01, key=EMA_KEY, persist_state="session",
                  bind="query-params",
                  help="TensorBoard-style debiased exponential moving average; the raw series stay "
                       "visible as faint lines. 0 = raw values.")
        st.toggle("Log y-scale", value=False, key=LOG_KEY, persist_state="session", bind="query-params",
                  help="Logarithmic y axes on time-series charts (symmetric log when values reach 0 or below).")
        st.selectbox("Heatmap colours", (AUTO_COLOURS, NATURAL_COLOURS), index=0, key=COLOUR_KEY,
                     persist_state="session", bind="query-params",
                     help="Auto: each field's colour scale spans the values of the runs shown (10 weights near 0.1 "
                          "stay apart). Natural: the field's fixed natural range (shares and weights 0-1, rollouts "
                          "n_min-n_max). The legend says which.")
        st.slider("Groups drawn apart", 1, 20, value=20, key=TOP_KEY, persist_state="session", bind="query-params",
                  help="Up to 20 groups get their own colour and dash. With more groups, the top k (by the "
                       "final value of the page's first metric) keep theirs and the rest are drawn as one "
                       "grey 'others'.")
        st.selectbox("x axis", (STEP_AXIS, WALL_AXIS), index=0, key=X_KEY, persist_state="session",
                     bind="query-params",
                     help="Training steps, or the time since the run started (the sum of its logged step "
                          "times `time/step` and `time/eval`; runs that log none stay on steps), in seconds, "
                          "minutes or hours as the longest run shown needs, on one range for every run shown.")


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
