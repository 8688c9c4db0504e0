"""Runs: every run listed in one table (search, config columns), every run folder that cannot be
read with its reason, and the config diff of two runs.

This is the landing page, so it is kept light for the server and the browser: the table is
built from each run's small files (meta.json, config.json and the last line of steps.jsonl:
:mod:`apps.listing`), so a root of 100 runs costs no more than reading 300 small files; the
tail averages, which need every step of every run, come on request. Both tables are Markdown
tables (``st.markdown``, cells escaped: :func:`apps.runtable.markdown_table`) with the page's
own search box, not interactive data grids (about 1.2 MB more JavaScript) nor ``st.table`` (its
Arrow formatting code, about 1 MB), which a fresh browser would load and compile before the
first page appears (docs/benchmarks.md)."""

from __future__ import annotations

import streamlit as st

from apps import runtable, study, ui

TITLE = "Runs"
#: Markdown tables scroll sideways inside the page's column instead of spilling past it (a wide
#: table: many config columns).
TABLE_STYLE = ('<style>[data-testid="stMain"] [data-testid="stMarkdownContainer"] table '
               "{display: block; overflow-x: auto; max-width: 100%;}</style>")


def _problems(chosen: ui.Selection) -> None:
    """The run folders that cannot be read, each with its one-line reason."""
    if not chosen.problems:
        return
    count = len(chosen.problems)
    st.warning(f"{count} run folder{'s' * (count != 1)} under `{chosen.root}` cannot be read and "
               f"{'are' if count != 1 else 'is'} not listed above:", icon=":material/warning:")
    st.markdown(runtable.markdown_table(runtable.problem_table(chosen.problems)))


def page() -> None:
    """The searchable run table, the unreadable run folders, then the diff of two chosen runs' configs."""
    chosen = ui.selection()
    st.html(TABLE_STYLE)
    st.title(TITLE)
    st.caption("Every run found, named by the config keys that differ between runs (see *Group runs by* in the "
               "sidebar): status, last step, latest success and the differing config keys. Type words to filter; "
               "pick two runs to diff their configs.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        _problems(chosen)
        return

    def body() -> None:
        infos = [info for info in chosen.infos if info.problem is None]
        query, every, tail = st.columns([3, 1, 1])
        text = query.text_input("Search runs", key="runs-search", placeholder="e.g. prompt_gdro running",
                                bind="query-params")
        all_config = every.toggle("All config keys", value=False, key="runs-all-config", bind="query-params")
        with_tails = tail.toggle("Tail averages", value=False, key="runs-tails", bind="query-params",
                                 help="Mean success over the last 40% of each run's steps: reads every run's steps "
                                      "(slower on a large runs folder).")
        tails = None
        if with_tails:
            loaded = dict(ui.iter_loaded([info.entry for info in infos]))
            tails = {label: study.final_value(run, "mean_success") for label, run in loaded.items()}
        table = runtable.search(runtable.run_table(infos, chosen.grouping, all_config=all_config, tails=tails,
                                                   names=chosen.names), text)
        keys = ", ".join(chosen.grouping.keys) or "none differ"
        how = "automatic" if chosen.grouping.automatic else "chosen in the sidebar"
        st.caption(f"{len(table)} of {len(infos)} runs · named by {keys} ({how})")
        st.markdown(runtable.markdown_table(table))
        _problems(chosen)
        configs = {info.label: info.config for info in infos}
        labels = list(configs)
        if len(labels) < 2:
            return
        st.subheader("Config diff")
        left, right = st.columns(2)
        first = left.selectbox("Run A", labels, index=0, key="diff-a", bind="query-params")
        second = right.selectbox("Run B", labels, index=1, key="diff-b", bind="query-params")
        if first == second:
            st.info("Pick two different runs.", icon=":material/info:")
            return
        diff = runtable.config_diff(configs[first], configs[second], (first, second))
        if diff.empty:
            st.success("The two configs are identical.", icon=":material/check_circle:")
        else:
            st.caption(f"{len(diff)} key differs" if len(diff) == 1 else f"{len(diff)} keys differ")
            st.markdown(runtable.markdown_table(diff))

    ui.live_fragment(body, chosen)()


page()
