"""The command-line counterpart of test_bad_inputs.py: bad arguments to every `gdro` command.

Each case is what a new user types. The answer must be one line on stderr that names the argument
as given and what is wrong with it (missing, a file where a folder is expected, an unknown key with
the closest known ones), exit status 2, and nothing written: neither in the folder the command
was pointed at nor in the working directory. Argparse's own errors are one line too
(``gdro <cmd>: error: ... (see gdro <cmd> --help)``), without the usage block.

Also here: a 5-step `gdro simulate` prints no library warning (an undefined statistic is reported
as such in the report, once), and `gdro simulate --out` never writes into a folder of files it did
not write, while a rerun into its own folder still works.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from gdro_cli.args import did_you_mean, folder_problem, new_folder_problem
from gdro_cli.main import main as gdro

REPO = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None


def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder`` with its content digest (folders: "dir")."""
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


def setup_file(t: Path) -> str:
    (t / "afile").write_text("mine\n")
    return str(t / "afile")


def setup_foreign(t: Path) -> str:
    """A user's folder that holds a report.md and a summary.json of their own."""
    (t / "mine").mkdir()
    (t / "mine" / "report.md").write_text("# my notes\n")
    (t / "mine" / "summary.json").write_text('{"mine": true}\n')
    return str(t / "mine")


def setup_bad_toml(t: Path) -> str:
    (t / "knobs.toml").write_text("[world]\ntransfr = 0.5\n")
    return str(t / "knobs.toml")


def setup_checkpoint(t: Path) -> str:
    """Looks like RUN_DIR/checkpoints/step_N to gdro export (its trainer.pt), so OUT is checked next."""
    (t / "ckpt").mkdir()
    (t / "ckpt" / "trainer.pt").write_bytes(b"")
    return str(t / "ckpt")


Args = Callable[[Path], list[str]]
#: (name, argv from the scratch folder, needles that must all be in the line, needs torch).
CASES: list[Any] = [
    # unknown keys: the flag as given, and the closest known keys
    ("sweep --grid unknown namespace", lambda t: ["sweep", "--grid", "nosuch.key=1,2", "--out", str(t / "o")],
     ("--grid nosuch.key", "unknown key", "NAMESPACE.FIELD"), False),
    ("sweep --grid unknown field", lambda t: ["sweep", "--grid", "world.transfr=0,1", "--out", str(t / "o")],
     ("--grid world.transfr", "did you mean 'transfer'"), False),
    ("simulate --set field without namespace", lambda t: ["simulate", "--set", "eta=0.4", "--out", str(t / "o")],
     ("--set eta", "did you mean 'prompt_gdro.eta' or 'rollout_gdro.eta'"), False),
    ("simulate --set misspelt namespace", lambda t: ["simulate", "--set", "wrold.transfer=1", "--out", str(t / "o")],
     ("--set wrold.transfer", "did you mean 'world.transfer'"), False),
    ("simulate --config unknown field", lambda t: ["simulate", "--config", setup_bad_toml(t), "--out", str(t / "o")],
     ("--config ", "knobs.toml: world.transfr", "did you mean 'transfer'"), False),
    # missing inputs: named as the argument they were given as
    ("predict missing WORLD", lambda t: ["predict", str(t / "missing.toml")],
     ("WORLD ", "missing.toml does not exist", "gdro calibrate"), False),
    ("predict folder without world.toml", lambda t: ["predict", str(t)], ("WORLD ", "without world.toml"), False),
    ("train --resume missing", lambda t: ["train", "--resume", str(t / "nosuchdir")],
     ("--resume ", "nosuchdir does not exist"), True),
    ("train --resume a file", lambda t: ["train", "--resume", setup_file(t)],
     ("--resume ", "is a file, not a run directory"), True),
    ("app --root missing", lambda t: ["app", "--root", str(t / "nosuch"), "--print-command"], ("--root ", "does not exist"), False),
    # a file where a folder is expected (gdro app: --print-command, so that a regression never starts a server)
    ("app --root a file", lambda t: ["app", "--root", setup_file(t), "--print-command"], ("--root ", "is a file, not a folder"), False),
    ("export OUT a file", lambda t: ["export", setup_checkpoint(t), setup_file(t)],
     ("OUT ", "afile is a file, not a folder"), True),
    ("simulate --out a file", lambda t: ["simulate", "--steps", "5", "--out", setup_file(t)],
     ("--out ", "afile is a file, not a folder"), False),
    ("sweep --out a file", lambda t: ["sweep", "--grid", "world.transfer=0,1", "--out", setup_file(t)],
     ("--out ", "afile is a file, not a folder"), False),
    ("arena --out a file", lambda t: ["arena", "--sim-only", "--out", setup_file(t)],
     ("--out ", "afile is a file, not a folder"), False),
    ("report --out a file", lambda t: ["report", str(t), "--out", setup_file(t)],
     ("--out ", "afile is a file, not a folder"), False),
    ("predict --out a file", lambda t: ["predict", str(REPO / "reports/calibration/lm-world/world.toml"), "--out",
                                        setup_file(t)], ("--out ", "afile is a file, not a folder"), False),
    ("calibrate --out a file", lambda t: ["calibrate", "--samples", str(t), "--out", setup_file(t)],
     ("--out ", "afile is a file, not a folder"), False),
    ("study --out a file", lambda t: ["study", "lm", "--quick", "--out", setup_file(t)],
     ("--out ", "afile is a file, not a folder"), True),
    ("eval --out a file", lambda t: ["eval", "--model", "tiny", "--out", setup_file(t)],
     ("--out ", "is a file, not a folder"), True),
    # someone else's files
    ("simulate --out a user's folder", lambda t: ["simulate", "--steps", "5", "--out", setup_foreign(t)],
     ("--out ", "did not write (report.md", "nothing was written"), False),
    ("sweep --out a user's folder", lambda t: ["sweep", "--grid", "world.transfer=0,1", "--out", setup_foreign(t)],
     ("--out ", "did not write (report.md"), False),
    # argparse's own errors: one line, the argument, a pointer to --help
    ("app --port abc", lambda t: ["app", "--port", "abc"], ("argument --port", "(see gdro app --help)"), False),
    ("study --seeds 0", lambda t: ["study", "lm", "--seeds", "0"],
     ("argument --seeds", "(see gdro study --help)"), True),
    ("arena --nosuchflag", lambda t: ["arena", "--nosuchflag"],
     ("unrecognized arguments: --nosuchflag", "(see gdro arena --help)"), False),
    ("export without OUT", lambda t: ["export", str(t / "run")], ("required: out", "(see gdro export --help)"), True),
    ("train --nosuchflag", lambda t: ["train", "tiny-cpu", "--nosuchflag"],
     ("unrecognized arguments: --nosuchflag", "(see gdro train --help)"), True),
    ("report without RUN_DIR", lambda t: ["report"], ("RUN_DIR", "(see gdro report --help)"), False),
    ("simulate --seeds 0", lambda t: ["simulate", "--seeds", "0"],
     ("argument --seeds", "must be >= 1", "(see gdro simulate --help)"), False),
    ("sweep --steps x", lambda t: ["sweep", "--steps", "x"], ("argument --steps", "(see gdro sweep --help)"), False),
    ("calibrate without --samples", lambda t: ["calibrate"], ("--samples", "(see gdro calibrate --help)"), False),
    ("predict --draws x", lambda t: ["predict", "w.toml", "--draws", "x"],
     ("argument --draws", "(see gdro predict --help)"), False),
]


def _case_id(case: object) -> str:
    values = case.values if hasattr(case, "values") else case  # a pytest.param or a plain tuple
    return str(values[0])  # type: ignore[index]


def run_gdro(argv: list[str]) -> int:
    """``gdro ARGV`` in this process; argparse's exit status counts as the command's."""
    try:
        return gdro(argv)
    except SystemExit as done:
        return int(done.code or 0)


@pytest.mark.parametrize("name,args,needles,needs_torch", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_cli_input_is_one_line_rc2_and_writes_nothing(name, args, needles, needs_torch, tmp_path, monkeypatch,
                                                          capsys):
    if needs_torch and not HAS_TORCH:
        pytest.skip("needs the train extra (torch, transformers)")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = args(scratch)
    monkeypatch.chdir(scratch)
    monkeypatch.delenv("GDRO_APP_ROOT", raising=False)
    monkeypatch.delenv("GDRO_DEBUG", raising=False)
    before = snapshot(scratch)
    rc = run_gdro(argv)
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert rc == 2, (rc, err)
    assert "\n" not in err and "Traceback" not in err and "usage:" not in err, err
    assert re.match(rf"gdro {argv[0]}( lm)?: ", err), err
    for needle in needles:
        assert needle in err, (needle, err)
    assert snapshot(scratch) == before, "something was written"


def test_did_you_mean_and_the_path_checks(tmp_path: Path) -> None:
    assert did_you_mean("transfr", ["transfer", "curvature", "interference"]) == "did you mean 'transfer'?"
    assert did_you_mean("xyz", ["transfer"]) == ""
    assert did_you_mean("eta", ["zeta", "eta", "delta"]) == "did you mean 'eta', 'zeta' or 'delta'?"
    (tmp_path / "f").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert folder_problem(tmp_path / "nope") == "does not exist"
    assert folder_problem(tmp_path / "f", "run directory") == "is a file, not a run directory"
    assert folder_problem(tmp_path / "empty") is None
    assert new_folder_problem(tmp_path / "nope") is None and new_folder_problem(tmp_path / "empty") is None
    assert new_folder_problem(tmp_path / "f") == "is a file, not a folder"
    assert new_folder_problem(tmp_path / "full") == "is a folder that is not empty"


# ----------------------------------------------------------------------------- gdro simulate --out

def test_a_rerun_into_its_own_folder_and_a_folder_of_its_runs_are_welcome(tmp_path: Path, capsys) -> None:
    """The guard refuses only what is not ours: a second sweep into the same --out works, and so does a
    folder written before the marker existed (a runs/ of simulator runs, no marker). (`gdro simulate`
    shares the check: claim_output; its marker is asserted in the 5-step test below.)"""
    from simulators.api import write_tiny_run
    from simulators.reporting import OUTPUT_MARKER, output_problem
    out = tmp_path / "sweep"
    args = ["sweep", "--grid", "world.transfer=0", "--methods", "grpo", "--steps", "3", "--seeds", "1",
            "--prompts", "200", "--batch", "16", "--workers", "1", "--no-progress", "--out", str(out)]
    assert run_gdro(args) == 0
    assert (out / OUTPUT_MARKER).is_file() and (out / "report.md").is_file()
    assert run_gdro(args) == 0
    capsys.readouterr()
    legacy = tmp_path / "legacy"
    write_tiny_run(legacy / "runs" / "grpo", steps=3)
    (legacy / "report.md").write_text("an earlier simulator report\n")
    assert output_problem(legacy) is None
    (legacy / "runs" / "stray.txt").write_text("x")
    assert output_problem(legacy) == f"holds files that are not simulator runs ({legacy / 'runs' / 'stray.txt'})"


def test_simulate_into_a_users_folder_keeps_every_byte(tmp_path: Path, capsys) -> None:
    """The first-run defect: `gdro simulate --out DIR` replaced the user's report.md and summary.json (rc 0)."""
    folder = Path(setup_foreign(tmp_path))
    before = snapshot(folder)
    assert run_gdro(["simulate", "--steps", "5", "--seeds", "1", "--workers", "1", "--out", str(folder)]) == 2
    assert snapshot(folder) == before
    assert "did not write" in capsys.readouterr().err


# ----------------------------------------------------------------------------- no library warning

def test_a_five_step_simulate_prints_no_warning(tmp_path: Path) -> None:
    """As a user runs it (a fresh process, default warning filters): stderr holds the 'writing to' line
    and the progress lines only; the lead-lag statistic with no binned prompt is called undefined, once."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONWARNINGS", None)
    result = subprocess.run([sys.executable, "-m", "gdro_cli", "simulate", "--steps", "5", "--out", str(tmp_path / "o")],
                            capture_output=True, text=True, timeout=600, check=False, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    unexpected = [line for line in lines if not (line.startswith("gdro simulate curriculum: writing to ")
                                                 or re.match(r"curriculum: [\d,]+/[\d,]+ steps", line))]
    assert unexpected == [], unexpected
    assert "Warning" not in result.stderr and "Warning" not in result.stdout
    report = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert report.count("Lead-lag gap (Eq. 32), second half of the run**: undefined") == 1
    assert json.loads((tmp_path / "o" / "summary.json").read_text(encoding="utf-8"))["study"] == "curriculum"
    from simulators.reporting import OUTPUT_MARKER, output_problem
    assert (tmp_path / "o" / OUTPUT_MARKER).is_file() and output_problem(tmp_path / "o") is None  # a rerun is welcome
