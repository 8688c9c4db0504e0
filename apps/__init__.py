"""Streamlit app and static reports for gdro run directories, laid out by concept: ``data/`` (plain
pandas, no Streamlit), ``views/`` (the Streamlit pages), ``report/`` (``gdro report``), ``launch`` /
``serve`` / ``streamlit_app`` (the server). Arrows point one way: views and report import data, data
imports neither (``tests/test_structure.py``). The app reads run directories only, imports no training
code and never writes into a run directory. The layout: docs/app-notes.md#apps.
"""
