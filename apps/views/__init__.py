"""The Streamlit app: one page script per view, and the glue the pages share.

Page scripts run by ``apps/streamlit_app.py`` (``st.navigation``, its ``PAGES``) only plot; their frames
come from :mod:`apps.data`. Glue modules (ui, sidebar, page_frame, urlstate, uicharts, charts,
interactive) are imported, never run as pages. The list: docs/app-notes.md#apps-views.
"""
