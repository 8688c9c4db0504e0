"""The view's state in the URL, for widgets whose picker shows a name but whose URL keeps a label.

:func:`url_seed` gives the widget its value from the URL on a session's first run, :func:`url_sync`
writes it back after every run, :func:`url_end` drops a left page's parameters. Why not Streamlit's
own binding: docs/app-notes.md#apps-views-urlstate.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

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


def url_value(key: str) -> str | None:
    """The URL's value of ``key`` on a session's first run (before the widget exists), else None."""
    if key in st.session_state:
        return None
    value = st.query_params.get(key)
    return str(value) if value is not None else None


def url_seed(key: str, options: list[str], multiple: bool = False) -> list[str]:
    """Values of ``key`` in the URL that are not among ``options`` (to be reported); the valid
    ones become the widget's value when the widget does not exist yet in this session.
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


def url_problem(kind: str, wanted: str, labels: list[str], problems: dict[str, str], root: Path) -> str:
    """The message for a URL label that names no listed run."""
    if wanted in problems:
        return f"The {kind} named in the URL, **{wanted}**, cannot be read: {problems[wanted]}"
    return (f"No run is labelled **{wanted}** under `{root}` (the {kind} named in the URL), so none is shown: "
            f"pick one in the sidebar ({len(labels)} listed).")
