"""`gdro app`: the streamlit command it runs, its options, and its dispatch from the gdro CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from apps import launch


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
    assert "altair" in serve.PRELOAD and "apps.data" in serve.PRELOAD


def test_serve_reads_the_address_and_warms_the_runs_after_the_separator(runs_root: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from apps import loading, serve

    command = launch.streamlit_command([], runs_root, "127.0.0.1", 8600)
    argv = command[command.index("run"):]
    assert serve.server_address(argv) == ("127.0.0.1", 8600)
    assert serve.server_address(["run", "x.py", "--server.address", "0.0.0.0"]) == ("127.0.0.1", 8501)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert serve.wait_listening("127.0.0.1", listener.getsockname()[1], timeout_s=5)
    cache = loading.RunCache()
    monkeypatch.setattr(loading, "RUN_CACHE", cache)
    assert serve.warm(argv) == 3, "the three runs under --root are read before the first request"
    assert serve.warm(["run", "x.py", "--", "--root", str(runs_root / "missing")]) == 0
