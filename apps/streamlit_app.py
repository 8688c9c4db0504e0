"""Entry point for ``streamlit run apps/streamlit_app.py -- [--root DIR] [RUN_DIR ...]``.

Draws the sidebar (runs folder, run, baseline, live refresh), then runs the chosen view with
``st.navigation``: one ``st.Page`` per page script of ``apps/views/`` (:data:`PAGES`). Start it with
``gdro app``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

try:
    import apps  # noqa: F401  (dependency check: the package imports, installed, editable or not)
except ImportError:  # a bare checkout: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st

from apps.data.settings import FIRST_RUN_DONE, resolve_settings, script_arguments
from apps.views import sidebar, urlstate

VIEWS_DIR = Path(__file__).resolve().parent / "views"
#: The page icon is a local file served by the app itself: no font or emoji host is asked for it.
ICON = Path(__file__).resolve().parent / "static" / "icon.png"
#: (file in views/, title, icon, url path, draws charts); the first one is the landing page: the run
#: table, which draws no chart, so the first page after start needs no Vega bundle
#: (docs/benchmarks.md); every other view is one click away or opened directly by its URL. Pages
#: without charts get no chart options in the sidebar (no slider code to load for the landing page).
PAGES = (
    ("runs.py", "Runs", ":material/table_rows:", "runs", False),
    ("traveling_wave.py", "Traveling wave", ":material/waves:", "traveling-wave", True),
    ("study.py", "Study", ":material/stacked_line_chart:", "study", True),
    ("sweep.py", "Sweep", ":material/tune:", "sweep", True),
    ("lead_lag.py", "Lead-lag", ":material/timeline:", "lead-lag", True),
    ("rollout_budget.py", "Rollout budget", ":material/stairs:", "rollout-budget", True),
    ("se_proxy.py", "SE proxy", ":material/functions:", "se-proxy", True),
    ("outcomes.py", "Outcomes", ":material/trophy:", "outcomes", True),
    ("compare.py", "Compare", ":material/compare_arrows:", "compare", True),
    ("evaluations.py", "Evaluations", ":material/fact_check:", "evaluations", True),
    ("step_time.py", "Step time", ":material/timer:", "step-time", True),
    ("config.py", "Config", ":material/settings:", "config", False),
)


def main() -> None:
    """Configure the page, draw the sidebar, run the selected view."""
    st.set_page_config(page_title="gdro-lab runs", page_icon=str(ICON) if ICON.exists() else None, layout="wide")
    settings = resolve_settings(script_arguments(sys.argv, __file__), os.environ)
    pages = [st.Page(VIEWS_DIR / file, title=title, icon=icon, url_path=url_path, default=index == 0)
             for index, (file, title, icon, url_path, _) in enumerate(PAGES)]
    page = st.navigation(pages, position="sidebar")
    charts = {st_page: spec[4] for st_page, spec in zip(pages, PAGES)}
    urlstate.url_begin()
    sidebar.sidebar(settings, chart_options=charts.get(page, True))
    try:
        page.run()
        urlstate.url_end()
    finally:
        FIRST_RUN_DONE.set()


main()
