"""Plain pandas views of run directories: what the app's pages and ``gdro report`` draw.

No Streamlit and no altair here, so every function is testable on its own and the report uses
the same numbers as the app. Import the module that defines a name (``from apps.data import
loading``); this package re-exports nothing. The modules: docs/app-data-notes.md#apps-data.
"""
