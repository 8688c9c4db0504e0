"""What a first-time user meets: the docs' `tiny-cpu` command in a bare clone, and the run
directory line in a cluster log (stdout to a file) of a process that gets killed."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    """This environment without GDRO_DATA, and with stdout block-buffered to a file as on a cluster."""
    env = {k: v for k, v in os.environ.items() if k not in ("GDRO_DATA", "PYTHONUNBUFFERED")}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def test_the_run_directory_line_survives_a_kill_with_stdout_in_a_file(tmp_path: Path):
    """stdout to a file is block-buffered: the run directory was printed only at the end, so a killed
    run's log never named its folder. Now it is printed, flushed, once the folder is claimed."""
    log, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "gdro_cli.main", "train", "tiny-cpu", "train.steps=200", "eval.every=0",
               "train.progress=false", "--out", str(out)]
    with open(log, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(command, cwd=REPO, stdout=stdout, stderr=stderr,
                                   env=_env(GDRO_DATA=str(REPO / "tests" / "fixtures" / "data"),
                                            PYTHONPATH=str(REPO)))
        steps = out / "grpo-tiny-s0" / "steps.jsonl"
        deadline = time.monotonic() + 600
        try:
            while not (steps.exists() and steps.read_text().count("\n") >= 1):
                assert process.poll() is None, err.read_text()
                assert time.monotonic() < deadline, "no step logged in 600 s"
                time.sleep(0.5)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    assert process.returncode == -signal.SIGKILL
    assert f"gdro train: run directory {out / 'grpo-tiny-s0'} (steps 1..200)\n" in log.read_text()


def _shell_lines(path: Path) -> list[str]:
    """The lines of a Markdown file's fenced bash/sh blocks."""
    lines, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside and line.strip().strip("`") in ("bash", "sh", "shell", "console")
        elif inside:
            lines.append(line.split("  #")[0].strip())
    return lines


def _docs_command() -> str:
    """The one `gdro train tiny-cpu` command of docs/first-run.md's quick start."""
    commands = [line for line in _shell_lines(REPO / "docs" / "first-run.md") if "gdro train tiny-cpu" in line]
    assert len(commands) == 1, commands
    return commands[0]


def _copy_repository(target: Path) -> None:
    """The repository's files (git's tracked and untracked-but-not-ignored ones) without ../shared."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=False)
    if listed.returncode != 0:   # not a git checkout: the tree without caches and runs
        shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(".git", ".venv*", "runs", "__pycache__"))
        return
    for name in listed.stdout.decode().split("\0"):
        if name and (REPO / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target / name)


@pytest.mark.slow
def test_the_docs_tiny_cpu_quick_start_runs_in_a_bare_clone(tmp_path: Path):
    """docs/first-run.md's command, verbatim, in a copy of the repository with no ../shared and
    GDRO_DATA unset, with a `gdro` on PATH that runs the copy: it trains, evaluates and prints both.
    (The same command without GDRO_DATA, as the README has it, ends in "data file ... is missing".)"""
    command = _docs_command()
    assert command == "GDRO_DATA=tests/fixtures/data gdro train tiny-cpu method.name=joint --out runs"
    clone = tmp_path / "work" / "gdro-lab"
    clone.mkdir(parents=True)
    _copy_repository(clone)
    assert not (clone.parent / "shared").exists()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gdro").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gdro_cli.main "$@"\n')
    (bin_dir / "gdro").chmod(0o755)
    result = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True, timeout=1500,
                            env=_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(clone)))
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path("runs") / "joint-tiny-s0"
    assert f"gdro train: run directory {run_dir} (steps 1..6)" in result.stdout
    from gdro_lab.runformat.runlog import read_run
    run = read_run(clone / run_dir)
    assert run.meta["status"] == "finished" and run.steps.tolist() == [1, 2, 3, 4, 5, 6]
    assert [e["step"] for e in run.evals] == [3, 6]
    for step in (3, 6):   # the evaluation's results, printed where they run
        assert re.search(rf"gdro train: eval at step {step}: pooled mean@2 [\d.]+% \[[\d.]+, [\d.]+\], pass@2 "
                         r"[\d.]+%, 4 prompts; worst group \S+ [\d.]+%, worst benchmark math500 [\d.]+%\n"
                         r"gdro train:   math500 [\d.]+ / [\d.]+   \(mean@2 / pass@2, %\)\n", result.stderr)


def test_every_tiny_cpu_command_of_the_docs_names_its_data():
    """A user's clone has no ../shared/data: a `gdro train tiny-cpu` command in README.md or docs/
    must say where its data is (the repository's fixtures), as docs/first-run.md's does."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    commands = {(page.name, line) for page in pages for line in _shell_lines(page) if "gdro train tiny-cpu" in line}
    assert ("first-run.md", _docs_command()) in commands
    assert [c for c in commands if not c[1].startswith("GDRO_DATA=")] == []
