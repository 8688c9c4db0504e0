"""gdro's entry point by value where sampled mutants survived its tests: `gdro --help` lists every command
with its one-line help, and an OSError a command does not catch is one line naming the path (exit 2), or
the traceback with GDRO_DEBUG=1."""

from __future__ import annotations

import pytest

from gdro_cli import main as entry


def test_help_lists_every_command_and_how_to_get_its_options(capsys):
    assert entry.main(["--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["usage: gdro COMMAND [ARGS...]", "", "commands:"]
    assert lines[3:3 + len(entry.COMMANDS)] == [f"  {name:<10} {help_}" for name, (_, _, help_) in entry.COMMANDS.items()]
    assert lines[-1] == "Run `gdro COMMAND --help` for the options of one command."


def test_an_uncaught_os_error_is_one_line_or_the_traceback_with_gdro_debug(tmp_path, monkeypatch, capsys):
    (tmp_path / "gdro_fake_command.py").write_text(
        "def main(argv):\n    raise PermissionError(13, 'Permission denied', argv[0])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(entry.COMMANDS, "report", ("gdro_fake_command", "main", "a command that cannot write"))
    monkeypatch.delenv("GDRO_DEBUG", raising=False)
    assert entry.main(["report", "out/x"]) == 2
    assert capsys.readouterr().err.strip() == ("gdro report: error: Permission denied: out/x: check the path and its "
                                               "permissions (GDRO_DEBUG=1 for the traceback)")
    monkeypatch.setenv("GDRO_DEBUG", "1")
    with pytest.raises(PermissionError):
        entry.main(["report", "out/x"])
