"""Config: the run's resolved config (config.json) and its metadata (meta.json)."""

from __future__ import annotations

import streamlit as st

from apps.data import curriculum, loading, results
from apps.views import page_frame
from gdro_lab.runformat.runlog import RunData

TITLE = "Config"


def render(run: RunData, key: str) -> None:
    """Metadata facts, then the resolved config as JSON and as a flat table (nothing linked)."""
    del key
    facts = loading.summary(run)
    facts.update({"format version": run.meta.get("version"), "created": run.meta.get("created"),
                  "bin labels": ", ".join(curriculum.bin_labels(run)),
                  "snapshot steps": ", ".join(str(step) for step in run.snapshot_steps) or "none",
                  "folder": str(run.path)})
    st.dataframe({"field": list(facts), "value": [str(value) for value in facts.values()]},
                 hide_index=True, width="stretch")
    if not run.config:
        st.info("This run has no config.json (or an empty one).", icon=":material/info:")
        return
    st.subheader("Resolved config")
    st.json(run.config, expanded=2)
    with st.expander("As a flat table"):
        st.dataframe(results.config_rows(run.config), hide_index=True, width="stretch")


page_frame.views(render, TITLE, "The producer's resolved config (config.json, the one source of truth) and the "
         "run's metadata.")
