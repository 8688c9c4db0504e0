"""``python -m apps.serve run apps/streamlit_app.py ...``: Streamlit's own command line, with the
app's modules imported and its runs read in a background thread once the server listens.

Once the server accepts connections, a thread (1) imports the landing page's modules (:data:`LANDING`)
and lists the runs (:func:`warm_list`) with a short switch interval (:data:`SWITCH_INTERVAL_S`), then
(2) :data:`CHART_DELAY_S` after the first script run (which it waits for at most :data:`CHART_WAIT_S`) imports the chart modules (:data:`CHARTS`)
and reads the first runs' steps (:func:`warm`). Streamlit's component scan is skipped
(:func:`skip_component_scan`): the app uses no custom components. Why, and history: docs/app-notes.md#apps-serve;
timings: docs/benchmarks.md#apps-serve.
"""

from __future__ import annotations

import importlib
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

#: Imported ahead of the first session: what the landing page (the run table) needs, slowest first.
LANDING = ("pandas", "pyarrow", "numpy", "gdro_lab", "gdro_lab.runformat.runlog", "gdro_lab.functional.diagnostics", "apps.data.fastread",
           "apps.data.loading", "apps.data.curriculum", "apps.data.budget", "apps.data.results", "apps.data.identity",
           "apps.data.listing", "apps.data.scales", "apps.data.study", "apps.data.runtable", "apps.views.ui",
           "apps.views.urlstate", "apps.views.sidebar")
#: Imported once the first page has been sent: what the chart pages add.
CHARTS = ("altair", "scipy.special", "apps.views.charts", "apps.views.interactive", "apps.views.uicharts",
          "apps.data.realrun")
#: Kept for callers of the single list: every module the warm-up imports, in order.
PRELOAD = LANDING + CHARTS
#: How long the thread waits for the server to listen before it preloads anyway.
LISTEN_WAIT_S = 30.0
#: How long the chart imports wait for the first script run to finish before they start anyway.
CHART_WAIT_S = 10.0
#: How long after the first script run the chart imports wait: the browser is still fetching the page's code
#: from this process and drawing it (0.65 s less to the first page, median of 6 each, docs/benchmarks.md).
CHART_DELAY_S = 3.0
#: Thread switch interval while the landing modules are imported (Python's default is 0.005 s).
SWITCH_INTERVAL_S = 0.0002


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules``; returns those that could not be imported (they load later, as usual)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a preload must never stop the server)
            failed.append(name)
    return failed


def server_address(argv: Sequence[str]) -> tuple[str, int]:
    """(address, port) the ``streamlit run`` command line binds (Streamlit's defaults otherwise)."""
    options = list(argv[:argv.index("--")] if "--" in argv else argv)
    address, port = "127.0.0.1", 8501
    for flag, value in zip(options, options[1:]):
        if flag == "--server.address" and value not in ("", "0.0.0.0", "::"):
            address = value
        elif flag == "--server.port" and value.isdigit():
            port = int(value)
    return address, port


def wait_listening(address: str, port: int, timeout_s: float = LISTEN_WAIT_S) -> bool:
    """True once ``address:port`` accepts a connection (polled every 50 ms), False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _script_settings(argv: Sequence[str]) -> tuple[Path, list[Path]]:
    """(root, run folders) the app script gets after ``--``."""
    from apps.data.settings import argument_parser

    script_args = list(argv[argv.index("--") + 1:]) if "--" in argv else []
    parsed, _ = argument_parser().parse_known_args(script_args)
    return (parsed.root if parsed.root is not None else Path("runs")), list(parsed.run_dirs)


def warm_list(argv: Sequence[str]) -> int:
    """Import the landing page's modules, then list the runs (small files only, into
    :data:`apps.data.listing.INFO_CACHE`) and name them (:func:`apps.data.identity.automatic_grouping`);
    returns the runs listed."""
    preload(LANDING)
    try:
        from apps.data import identity, listing

        root, given = _script_settings(argv)
        listed = listing.list_runs(root if root.is_dir() else None, given)
        identity.automatic_grouping(listed.runs)
        return len(listed.runs)
    except Exception:  # noqa: BLE001  (a warm-up must never stop the server; pages list runs as usual)
        return 0


def warm(argv: Sequence[str]) -> int:
    """Read the steps of the runs the app lists first into the run cache; returns the runs read."""
    try:
        from apps.data import loading

        root, given = _script_settings(argv)
        return loading.warm_runs(root, given)
    except Exception:  # noqa: BLE001  (a warm-up must never stop the server; pages read runs as usual)
        return 0


pause = time.sleep


def _background(argv: list[str]) -> None:
    wait_listening(*server_address(argv))
    default_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        warm_list(argv)
    finally:
        sys.setswitchinterval(default_interval)
    from apps.data.settings import FIRST_RUN_DONE

    FIRST_RUN_DONE.wait(CHART_WAIT_S)
    pause(CHART_DELAY_S)  # the browser is still loading and drawing the first page
    preload(CHARTS)
    warm(argv)


def skip_component_scan() -> bool:
    """Make Streamlit's scan of installed packages for custom (v2) components find none, without
    reading any package's metadata; True when the scanner was found and replaced (a Streamlit
    without it is left as it is)."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:
        return False
    if not callable(getattr(manifest_scanner, "scan_component_manifests", None)):
        return False

    def no_components(max_workers: int | None = None) -> list[Any]:
        return []

    manifest_scanner.scan_component_manifests = no_components
    return True


def skip_repl_check() -> bool:
    """Mark Streamlit's "not run with `streamlit run`" warning as shown: its check walks the script thread's
    stack with ``inspect.stack()`` (which reads every frame's source file) on the first element of the first
    session, 40-120 ms of the first page; this process is ``streamlit run``. True when the flag was found."""
    try:
        from streamlit import delta_generator
    except ImportError:
        return False
    if not hasattr(delta_generator, "_use_warning_has_been_displayed"):
        return False
    delta_generator._use_warning_has_been_displayed = True
    return True


def main() -> int:
    """Start the warm-up thread, then hand the command line to Streamlit."""
    skip_component_scan()
    skip_repl_check()
    threading.Thread(target=_background, args=(list(sys.argv[1:]),), name="gdro-app-warm", daemon=True).start()
    from streamlit.web.cli import main as streamlit_main

    sys.argv[0] = "streamlit"
    return int(streamlit_main(prog_name="streamlit") or 0)


if __name__ == "__main__":
    sys.exit(main())
