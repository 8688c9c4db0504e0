"""``gdro app [RUN_DIR ...]``: start the Streamlit app on localhost.

Runs ``python -m apps.serve run apps/streamlit_app.py --server.address ADDRESS --server.port PORT
--server.headless true ... -- --root ROOT RUN_DIR...`` (Streamlit's command line, with the heavy
imports done while the server starts: ``apps/serve.py``) as a child process and waits for it;
Ctrl-C or SIGTERM stop the child too. The app binds to 127.0.0.1 unless ``--address`` says
otherwise. Run folders are made absolute here, so the app does not depend on its working
directory. A folder of runs typed without ``--root`` (``gdro app gdro-runs/``) is the root
(:func:`apps.data.settings.place_paths`); ``--list-runs`` prints the runs the app would list and exits.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from apps.data.settings import DEFAULT_ROOT, ROOT_ENV, RUNS_ENV, place_paths
from studykit.args import OneLineParser, folder_problem

APP_SCRIPT = Path(__file__).resolve().parent / "streamlit_app.py"
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 8501
LOCAL_ADDRESSES = ("127.0.0.1", "localhost", "::1")


def build_parser() -> argparse.ArgumentParser:
    """Options of ``gdro app``."""
    parser = OneLineParser(
        prog="gdro app", description="Open run directories (simulated or real, finished or running) "
        "in the Streamlit app: traveling waves, lead-lag, rollout budget, SE proxy, outcomes.",
        epilog=f"Without --root the app also reads ${ROOT_ENV}; ${RUNS_ENV} lists extra runs.")
    parser.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR",
                        help="run directories to list in addition to those found under --root; a folder of "
                             "runs (no meta.json) is the root when --root is not given, else its runs are listed")
    parser.add_argument("--root", type=Path, default=None,
                        help=f"folder scanned recursively for run directories (default: ${ROOT_ENV} or ./{DEFAULT_ROOT})")
    parser.add_argument("--address", default=DEFAULT_ADDRESS,
                        help="address to bind (default: 127.0.0.1, this machine only; 0.0.0.0 exposes the app)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    parser.add_argument("--print-command", action="store_true",
                        help="print the streamlit command instead of running it")
    parser.add_argument("--list-runs", action="store_true",
                        help="print the runs the app would list (and those it cannot read) and exit")
    return parser


def streamlit_command(run_dirs: Sequence[Path], root: Path, address: str, port: int,
                      python: str = sys.executable) -> list[str]:
    """The ``streamlit run`` command line that serves the app for these runs."""
    return [python, "-m", "apps.serve", "run", str(APP_SCRIPT),
            "--server.address", address, "--server.port", str(port), "--server.headless", "true",
            "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "minimal",
            "--", "--root", str(root.expanduser().resolve()),
            *[str(path.expanduser().resolve()) for path in run_dirs]]


def _run_child(command: list[str]) -> int:
    """Run the server, forwarding SIGTERM/SIGINT so that stopping ``gdro app`` stops Streamlit."""
    child = subprocess.Popen(command)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def root_problem(root: Path | None, environ: Mapping[str, str]) -> tuple[Path, str | None]:
    """The root to scan (``--root``, else ``$GDRO_APP_ROOT``, else ./runs) and why it cannot be one, or None.

    A root that is a file, or one the user named that does not exist, is refused before the server
    starts; the default ./runs may be missing (the app then lists the RUN_DIRs given, or none)."""
    if root is not None:
        path, named, label = root, True, f"--root {root}"
    elif environ.get(ROOT_ENV):
        path, named, label = Path(environ[ROOT_ENV]), True, f"{ROOT_ENV}={environ[ROOT_ENV]}"
    else:
        path, named, label = DEFAULT_ROOT, False, f"the default root ./{DEFAULT_ROOT}"
    problem = folder_problem(path)
    if problem is None or (not named and problem == "does not exist"):
        return path, None
    fix = ("create it, or give the folder your runs are written under" if problem == "does not exist"
           else "give the folder that holds your run directories")
    return path, f"{label} {problem}: {fix}"


def _has_runs(root: Path) -> bool:
    from apps.data.listing import find_candidates  # lazily: numpy is not needed to start the server

    return bool(find_candidates(root)[0])


def list_runs(root: Path, run_dirs: Sequence[Path]) -> int:
    """``--list-runs``: one line per run the app lists (label, folder), one per folder it cannot read
    (label, reason), then ``N runs listed under ROOT (M cannot be read)``."""
    from apps.data.listing import list_runs as listed_runs

    listed = listed_runs(root, run_dirs)
    readable = [info for info in listed.runs if info.problem is None]
    for info in readable:
        print(f"{info.label}\t{info.entry.path}")
    for info in listed.problems:
        print(f"{info.label}\tcannot be read: {info.problem}")
    unread = f" ({len(listed.problems)} cannot be read)" if listed.problems else ""
    print(f"{len(readable)} run{'s' * (len(readable) != 1)} listed under {root}{unread}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry of ``gdro app``; returns the process exit code."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if not 0 < args.port < 65536:
        print(f"gdro app: --port {args.port} is not a port: give a number in 1..65535", file=sys.stderr)
        return 2
    placed = place_paths(args.run_dirs, args.root)
    args.root, problem = root_problem(placed.root, os.environ)
    if problem is not None:
        print(f"gdro app: {problem}", file=sys.stderr)
        return 2
    args.run_dirs = list(placed.run_dirs)
    for folder, count in placed.folders:
        if count == 0:
            print(f"gdro app: warning: {folder} holds no run directory (no meta.json under it): give a run "
                  "folder or the folder your runs are written under", file=sys.stderr)
    if args.list_runs:
        return list_runs(args.root, args.run_dirs)
    if args.root.is_dir() and not args.run_dirs and not _has_runs(args.root):
        print(f"gdro app: {args.root} holds no run directory yet: the app lists runs as they are written there",
              file=sys.stderr)
    if importlib.util.find_spec("streamlit") is None:
        print("gdro app: streamlit is not installed: pip install -e '.[app]'", file=sys.stderr)
        return 2
    command = streamlit_command(args.run_dirs, args.root, args.address, args.port)
    if args.print_command:
        print(" ".join(command))
        return 0
    for path in args.run_dirs:
        if not path.is_dir():
            print(f"gdro app: warning: {path} is not a folder; the app will say so when it is chosen",
                  file=sys.stderr)
    if args.address not in LOCAL_ADDRESSES:
        print(f"gdro app: serving on {args.address}: anyone who can reach this address can read the runs",
              file=sys.stderr)
    print(f"gdro app: http://{'localhost' if args.address in LOCAL_ADDRESSES else args.address}:{args.port}",
          file=sys.stderr)
    return _run_child(command)


if __name__ == "__main__":
    sys.exit(main())
