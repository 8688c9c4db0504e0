"""``python -m apps.serve run apps/streamlit_app.py ...``: Streamlit's own command line, with the
app's heavy modules imported in a background thread while the server starts.

Streamlit imports a page's modules only when the first browser session runs the script, so the
first page after ``gdro app`` started used to wait for pandas, pyarrow, altair, scipy and the
app's modules (8 s on a busy machine). Importing them while the server binds its port takes
that wait off the first page. Nothing else differs from ``python -m streamlit``.
"""

from __future__ import annotations

import importlib
import sys
import threading

#: Imported ahead of the first session, in this order (the slowest first).
PRELOAD = ("pandas", "pyarrow", "altair", "scipy.stats", "numpy", "apps.data", "apps.charts", "apps.interactive",
           "apps.study", "apps.realrun", "apps.runtable", "apps.ui",
           "gdro_lab.diagnostics", "gdro_lab.runlog")


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules``; returns those that could not be imported (they load later, as usual)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a preload must never stop the server)
            failed.append(name)
    return failed


def main() -> int:
    """Start the preload thread, then hand the command line to Streamlit."""
    threading.Thread(target=preload, name="gdro-app-preload", daemon=True).start()
    from streamlit.web.cli import main as streamlit_main

    sys.argv[0] = "streamlit"
    return int(streamlit_main(prog_name="streamlit") or 0)


if __name__ == "__main__":
    sys.exit(main())
