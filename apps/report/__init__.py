"""``gdro report``: the app's figures as static PNGs, drawn with matplotlib (no Streamlit).

Reads runs and computes every number with :mod:`apps.data`, as the app does.
"""
