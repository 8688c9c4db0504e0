"""Runs: every run listed in one table (search, config columns) and the config diff of two runs.

This is the landing page, so it is kept light for the browser: both tables are Markdown tables
(``st.markdown``, cells escaped: :func:`apps.runtable.markdown_table`) with the page's own search
box, not interactive data grids (about 1.2 MB more JavaScript) nor ``st.table`` (its Arrow
formatting code, about 1 MB), which a fresh browser would load and compile before the first
page appears (docs/benchmarks.md)."""

from __future__ import annotations

import streamlit as st

from apps import runtable, ui

TITLE = "Runs"
#: Markdown tables scroll sideways inside the page's column instead of spilling past it (a wide
#: table: many config columns).
TABLE_STYLE = ('<style>[data-testid="stMain"] [data-testid="stMarkdownContainer"] table '
               "{display: block; overflow-x: auto; max-width: 100%;}</style>")


def page() -> None:
    """The searchable run table, then the diff of two chosen runs' configs."""
    chosen = ui.selection()
    st.html(TABLE_STYLE)
    st.title(TITLE)
    st.caption("Every run found: status, method, seed, length, tail-average success and the config keys "
               "that differ between runs. Type words to filter; pick two runs to diff their configs.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return

    def body() -> None:
        runs = dict(ui.iter_loaded(list(chosen.entries)))
        query, every = st.columns([3, 1])
        text = query.text_input("Search runs", key="runs-search", placeholder="e.g. prompt_gdro running")
        all_config = every.toggle("All config keys", value=False, key="runs-all-config")
        table = runtable.search(runtable.run_table(runs, all_config=all_config), text)
        st.caption(f"{len(table)} of {len(runs)} runs")
        st.markdown(runtable.markdown_table(table))
        labels = list(runs)
        if len(labels) < 2:
            return
        st.subheader("Config diff")
        left, right = st.columns(2)
        first = left.selectbox("Run A", labels, index=0, key="diff-a")
        second = right.selectbox("Run B", labels, index=1, key="diff-b")
        if first == second:
            st.info("Pick two different runs.", icon=":material/info:")
            return
        diff = runtable.config_diff(runs[first].config, runs[second].config, (first, second))
        if diff.empty:
            st.success("The two configs are identical.", icon=":material/check_circle:")
        else:
            st.caption(f"{len(diff)} key differs" if len(diff) == 1 else f"{len(diff)} keys differ")
            st.markdown(runtable.markdown_table(diff))

    ui.live_fragment(body, chosen)()


page()
