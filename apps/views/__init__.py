"""The Streamlit app: one page script per view, and the glue the pages share.

Page scripts (``apps/streamlit_app.py`` runs them with ``st.navigation``, see its ``PAGES``):
runs, traveling_wave, study, sweep, lead_lag, rollout_budget, se_proxy, outcomes, compare,
evaluations, step_time, config. Pages only plot; the frames they plot come from :mod:`apps.data`.

Glue (imported, never run as pages):

  ui          the selection of runs, cached runs, captions, live refresh
  sidebar     runs folder, grouping, run and baseline pickers, chart options
  page_frame  the frame of a chart page: title, then the run and the baseline side by side
  urlstate    the view's state in the URL for pickers that show names
  uicharts    chart elements: stacked heatmaps, linked time series, CSV buttons
  charts      altair chart builders (frames in, charts out; no Streamlit)
  interactive linked zoom, crosshair, smoothing and bands of the time-series charts (no Streamlit)
"""
