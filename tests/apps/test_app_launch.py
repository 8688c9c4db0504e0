"""`gdro app`: the streamlit command it runs, its options, and its dispatch from the gdro CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from apps import launch

REPO = Path(__file__).resolve().parents[2]


def test_command_binds_localhost_and_passes_runs_after_the_separator(tmp_path: Path) -> None:
    command = launch.streamlit_command([tmp_path / "run"], tmp_path / "root", "127.0.0.1", 8600)
    assert command[:5] == [sys.executable, "-m", "apps.serve", "run", str(launch.APP_SCRIPT)]
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    assert command[command.index("--server.port") + 1] == "8600"
    assert command[command.index("--server.headless") + 1] == "true"
    script_args = command[command.index("--") + 1:]
    assert script_args == ["--root", str((tmp_path / "root").resolve()), str((tmp_path / "run").resolve())]


def test_defaults_are_localhost_port_8501_and_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert launch.main(["--print-command"]) == 0
    printed = capsys.readouterr().out
    assert "--server.address 127.0.0.1" in printed and "--server.port 8501" in printed
    assert f"--root {Path('runs').resolve()}" in printed


def test_address_flag_and_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert launch.main(["--address", "0.0.0.0", "--print-command"]) == 0
    assert "--server.address 0.0.0.0" in capsys.readouterr().out
    assert launch.main(["--port", "70000"]) == 2
    assert "not a port" in capsys.readouterr().err


def test_the_root_comes_from_the_flag_or_the_environment_and_must_be_a_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """gdro app reads $GDRO_APP_ROOT when --root is not given (it used to pass ./runs, which hid it), and
    refuses a root that is a file, or one the user named that does not exist, before any server starts."""
    (tmp_path / "env-root").mkdir()
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("GDRO_APP_ROOT", str(tmp_path / "env-root"))
    assert launch.main(["--print-command"]) == 0
    assert f"--root {(tmp_path / 'env-root').resolve()}" in capsys.readouterr().out
    monkeypatch.setenv("GDRO_APP_ROOT", str(tmp_path / "a-file"))
    assert launch.main(["--print-command"]) == 2
    assert capsys.readouterr().err.strip() == (f"gdro app: GDRO_APP_ROOT={tmp_path / 'a-file'} is a file, not a "
                                               "folder: give the folder that holds your run directories")
    monkeypatch.delenv("GDRO_APP_ROOT")
    monkeypatch.chdir(tmp_path)  # no ./runs here: the default root may be missing
    assert launch.main(["--print-command"]) == 0 and f"--root {tmp_path / 'runs'}" in capsys.readouterr().out


def test_gdro_cli_dispatches_app_and_report() -> None:
    result = subprocess.run([sys.executable, "-m", "gdro_cli", "app", "--print-command", "some/run"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "apps.serve run" in result.stdout and str(Path("some/run").resolve()) in result.stdout
    result = subprocess.run([sys.executable, "-m", "gdro_cli", "report", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "--out" in result.stdout


def test_serve_preloads_the_heavy_modules() -> None:
    from apps import serve

    assert serve.preload(("json", "no_such_module_gdro")) == ["no_such_module_gdro"]
    assert "apps.data.runtable" in serve.LANDING and "altair" in serve.CHARTS
    assert "altair" not in serve.LANDING and serve.PRELOAD == serve.LANDING + serve.CHARTS


LANDING_PROBE = """
import sys
from streamlit.testing.v1 import AppTest
from apps import serve
serve.preload(serve.LANDING)
app = AppTest.from_file(sys.argv[1], default_timeout=300).run()
assert not app.exception and not app.error, [e.value for e in [*app.exception, *app.error]]
table = [e.value for e in app.dataframe if "run" in e.value.columns]
assert len(table) == 1 and len(table[0]) == 3, "the run table lists the three runs"
print(sorted(name for name in ("altair", "apps.views.interactive", "apps.views.charts", "apps.views.uicharts",
                           "vega_datasets", "scipy.special", "scipy.stats")
             if name in sys.modules))
"""


def test_landing_page_imports_no_chart_module(runs_root: Path) -> None:
    """The warm-up's first stage and the landing page (the run table) import no altair and no
    scipy.special (0.3 s, pulled in by gdro_lab.functional.estimators and apps.data.study on first use): those
    imports wait until the first page has been sent (a fresh process, as at server start)."""
    env = {**os.environ, "GDRO_APP_ROOT": str(runs_root), "PYTHONPATH": str(REPO)}
    env.pop("GDRO_APP_RUNS", None)
    result = subprocess.run([sys.executable, "-c", LANDING_PROBE, str(REPO / "apps" / "streamlit_app.py")],
                            capture_output=True, text=True, timeout=600, check=False, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_warm_up_imports_chart_modules_after_the_first_script_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from apps import serve
    from apps.data import settings

    calls: list[object] = []
    default_interval = sys.getswitchinterval()
    monkeypatch.setattr(serve, "wait_listening", lambda *args, **kwargs: calls.append("listening") or True)
    monkeypatch.setattr(serve, "warm_list", lambda argv: calls.append(("warm", sys.getswitchinterval())) or 0)
    monkeypatch.setattr(serve, "warm", lambda argv: calls.append("steps") or 0)
    monkeypatch.setattr(serve, "preload", lambda modules=serve.PRELOAD: calls.append(modules) or [])
    monkeypatch.setattr(serve, "pause", lambda seconds: calls.append(("sleep", seconds)))

    class FirstRunDone(threading.Event):
        """The first page's event; ``reached`` is set when the warm-up starts waiting on it (the outcome this
        test waits for, however slowly a loaded machine gets there)."""

        def __init__(self) -> None:
            super().__init__()
            self.reached = threading.Event()

        def wait(self, timeout: float | None = None) -> bool:
            self.reached.set()
            return super().wait(timeout)

    first_run_done = FirstRunDone()
    monkeypatch.setattr(settings, "FIRST_RUN_DONE", first_run_done)
    monkeypatch.setattr(serve, "CHART_WAIT_S", 600.0)  # the first page is "drawn" when this test says so
    thread = threading.Thread(target=serve._background, args=(["run", "x.py"],), daemon=True)
    thread.start()
    assert first_run_done.reached.wait(600), calls   # a hang guard only
    assert calls[0] == "listening" and calls[1][0] == "warm" and len(calls) == 2, "no chart import before the page"
    assert calls[1][1] == pytest.approx(serve.SWITCH_INTERVAL_S), "a short switch interval while warming up"
    assert sys.getswitchinterval() == default_interval, "the switch interval is restored after the warm-up"
    first_run_done.set()
    thread.join(timeout=30)
    assert not thread.is_alive() and calls[-3:] == [("sleep", serve.CHART_DELAY_S), serve.CHARTS, "steps"], \
        "a pause while the browser draws the first page, then the chart modules, then the runs' steps"
    assert serve.CHART_DELAY_S > 0


def test_serve_reads_the_address_and_warms_the_runs_after_the_separator(runs_root: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from apps import serve
    from apps.data import loading

    command = launch.streamlit_command([], runs_root, "127.0.0.1", 8600)
    argv = command[command.index("run"):]
    assert serve.server_address(argv) == ("127.0.0.1", 8600)
    assert serve.server_address(["run", "x.py", "--server.address", "0.0.0.0"]) == ("127.0.0.1", 8501)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert serve.wait_listening("127.0.0.1", listener.getsockname()[1], timeout_s=5)
    cache = loading.run_cache()
    monkeypatch.setattr(loading, "RUN_CACHE", cache)
    assert serve.warm_list(argv) == 3, "the three runs under --root are listed before the first request"
    from apps.data import identity, listing
    named = identity._LAST_AUTOMATIC[-1][2]  # and named: the first page's sidebar reuses this grouping
    assert identity.automatic_grouping(listing.list_runs(runs_root).runs)[0] is named
    assert serve.warm(argv) == 3, "and their steps read once the first page is sent"
    assert serve.warm(["run", "x.py", "--", "--root", str(runs_root / "missing")]) == 0


def test_serve_skips_streamlits_use_warning_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first element of the first session would walk the stack to ask whether this is a REPL."""
    import inspect

    from streamlit import delta_generator

    from apps import serve

    monkeypatch.setattr(delta_generator, "_use_warning_has_been_displayed", False)
    assert serve.skip_repl_check() is True

    def no_stack(*args, **kwargs):
        raise AssertionError("inspect.stack() called")

    monkeypatch.setattr(inspect, "stack", no_stack)
    delta_generator._maybe_print_use_warning()  # returns at once: the check is marked done
    monkeypatch.delattr(delta_generator, "_use_warning_has_been_displayed")
    assert serve.skip_repl_check() is False, "a Streamlit without the flag is left as it is"


def test_serve_skips_streamlits_scan_for_custom_components(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replaced scanner finds no component and reads no package metadata; the real one reads
    every installed distribution's (what cost 0.3 s of the server's start)."""
    import importlib.metadata

    from streamlit.components.v2 import manifest_scanner

    from apps import serve

    original = manifest_scanner.scan_component_manifests
    monkeypatch.setattr(manifest_scanner, "scan_component_manifests", original)  # restored after the test

    def no_metadata() -> None:
        raise AssertionError("package metadata read")

    monkeypatch.setattr(importlib.metadata, "distributions", no_metadata)
    with pytest.raises(AssertionError, match="package metadata read"):
        original()
    assert serve.skip_component_scan() is True
    assert manifest_scanner.scan_component_manifests() == []
    monkeypatch.delattr(manifest_scanner, "scan_component_manifests")
    assert serve.skip_component_scan() is False, "a Streamlit without the scanner is left as it is"



# ----------------------------------------------------------------------------- a folder of runs as typed

def test_a_folder_of_runs_typed_without_root_is_the_root(runs_root: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`gdro app gdro-runs/` (the README's form) lists every run under the folder: it used to pass the
    folder as one run, which the app showed as "0 of 0 runs" and "not a gdro run directory"."""
    assert launch.main([str(runs_root), "--list-runs"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert lines[-1] == f"3 runs listed under {runs_root}"
    assert [line.split("\t")[0] for line in lines[:-1]] == ["study/grpo", "study/prompt_gdro", "study/rollout_gdro"]
    assert launch.main([str(runs_root), "--print-command"]) == 0
    assert capsys.readouterr().out.split(" -- ")[1].split() == ["--root", str(runs_root.resolve())]
    run = runs_root / "study" / "grpo"  # a run folder typed stays a run, beside the root
    assert launch.main([str(run), "--root", str(tmp_path), "--list-runs"]) == 0
    assert capsys.readouterr().out.strip().split("\n") == [f"grpo\t{run}", f"1 run listed under {tmp_path}"]


def test_a_second_folder_of_runs_adds_its_runs_and_an_empty_one_is_named(
        runs_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert launch.main(["--root", str(empty), str(runs_root / "study"), "--list-runs"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().split("\n")[-1] == f"3 runs listed under {empty}" and captured.err == ""
    assert launch.main(["--root", str(runs_root), str(empty), "--list-runs"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == (f"gdro app: warning: {empty} holds no run directory (no meta.json under it): "
                                    "give a run folder or the folder your runs are written under")
    assert captured.out.strip().split("\n")[-1] == f"3 runs listed under {runs_root} (1 cannot be read)"


def test_an_empty_folder_is_said_to_be_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert launch.main([str(tmp_path), "--list-runs"]) == 0
    assert capsys.readouterr().out.strip() == f"0 runs listed under {tmp_path}"
    assert launch.main([str(tmp_path), "--print-command"]) == 0
    captured = capsys.readouterr()
    assert captured.out.split(" -- ")[1].split() == ["--root", str(tmp_path.resolve())]
    assert captured.err.strip() == (f"gdro app: {tmp_path} holds no run directory yet: the app lists runs as "
                                    "they are written there")


@pytest.mark.parametrize("empty", [False, True])
def test_the_app_script_opens_a_folder_typed_after_the_separator_as_its_root(
        empty: bool, runs_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`streamlit run apps/streamlit_app.py -- FOLDER` (what `gdro app FOLDER` amounts to) lists the
    folder's runs; an empty folder gets the page's message that no run was found there."""
    from app_helpers import APP_SCRIPT, TIMEOUT_S, run_labels
    from streamlit.testing.v1 import AppTest

    folder = tmp_path if empty else runs_root
    monkeypatch.delenv("GDRO_APP_ROOT", raising=False)
    monkeypatch.delenv("GDRO_APP_RUNS", raising=False)
    monkeypatch.setattr(sys, "argv", [str(APP_SCRIPT), str(folder)])
    app = AppTest.from_file(str(APP_SCRIPT), default_timeout=TIMEOUT_S).run()
    assert not app.exception and not app.error
    if empty:
        assert run_labels(app) == [] and f"No run directories found under `{folder}`" in app.info[0].value
    else:
        assert run_labels(app) == ["study/grpo", "study/prompt_gdro", "study/rollout_gdro"]
        assert any(element.value == "3 of 3 runs shown" for element in app.caption)
