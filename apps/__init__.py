"""Streamlit app and static reports for gdro run directories.

Modules:
  data            plain pandas views of a run (no Streamlit): what every page and report plots;
                  re-exports loading (finding, reading and caching runs), curriculum, budget, results
  fastread        steps.jsonl read with pyarrow (falls back to gdro_lab.runformat.runlog.read_run)
  charts          altair chart builders (pure: frames in, charts out)
  settings        where the app looks for runs (command line after ``--``, environment, default)
  ui              the Streamlit glue: runs from the cache keyed on file stats, sidebar, live refresh
  uicharts        chart elements: stacked heatmaps, linked time series, cached lean specs
  streamlit_app   the entry point for ``streamlit run`` (``st.navigation``, one page per view)
  views/          one page script per view; pages only plot
  launch          ``gdro app``: starts Streamlit on localhost
  report          ``gdro report``: the same figures as static PNGs with matplotlib
  browser         headless-Chromium helpers: serve the app, screenshot every view

The app reads run directories through ``gdro_lab.runformat.runlog.read_run`` and computes the paper's
diagnostics with ``gdro_lab.functional.diagnostics``; it imports no training code and never writes into a
run directory.
"""
