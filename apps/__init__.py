"""Streamlit app and static reports for gdro run directories, laid out by concept.

  data/           plain pandas views of run directories (no Streamlit, no altair): finding, listing,
                  reading and caching runs; names, groups and colours; curriculum, budget, results,
                  studies and sweeps; pins; where the app looks for runs
  views/          the Streamlit app: one page script per view, and their glue (sidebar, page frame,
                  URL state, altair chart builders and chart elements)
  report/         ``gdro report``: the same figures as static PNGs with matplotlib
  launch          ``gdro app``: starts the server (``apps/serve.py``) on localhost
  serve           the server process: Streamlit's command line with the app's imports warmed up
  streamlit_app   the entry point for ``streamlit run`` (``st.navigation``, one page per view)
  static/         files the app serves (its icon)

Arrows point one way: views and report import data, data imports neither (and no Streamlit:
``tests/test_structure.py``). The app reads run directories through ``gdro_lab.runformat.runlog`` and
computes the paper's diagnostics with ``gdro_lab.functional.diagnostics``; it imports no training code and
never writes into a run directory.
"""
