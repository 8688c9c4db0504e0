"""The command-line counterpart of test_bad_inputs.py: bad arguments to every `gdro` command.

Each case is what a user types, run in this process through the CLI's ``main()`` from a scratch
folder that holds the user's own files (a report.md and summary.json of theirs, a file, a binary
file). The answer must be one line on stderr that names the argument as given and what is wrong
with it (missing, a file where a folder is expected, an unknown name with the closest known ones),
exit status 2 (130 for Ctrl-C), no traceback; and every file the user had is byte for byte the same
afterwards (sha256 before and after). Nothing else is written either, except by the few cases that
say so (a Ctrl-C after a run began: its folder is kept, marked). The write policy
(gdro_lab/runformat/output.py) is asserted on every command that writes: a file, a folder of the
user's files, a folder another command wrote and an unwritable path as ``--out``.

:func:`test_the_table_of_bad_inputs_in_docs_is_current` writes every case and its answer as the table
of docs/testing.md#bad-inputs (``GDRO_UPDATE_DOCS=1`` rewrites it).

Also here: a 5-step `gdro simulate` prints no library warning, a rerun into a command's own folder
is welcome, and `gdro train --resume` after a torn last line of steps.jsonl leaves no gap.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from studykit.args import did_you_mean, folder_problem, new_folder_problem, with_suggestion
from gdro_cli.main import main as gdro
from gdro_lab._validate import ConfigError
from gdro_lab.runformat.output import MARKER, claim_output, output_problem, owners

REPO = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None
UNWRITABLE = "/sys/gdro-unwritable/out"  # /sys refuses a new folder, even to root
DOCS = REPO / "docs" / "testing.md"
BEGIN, END = "<!-- bad-inputs table: begin -->", "<!-- bad-inputs table: end -->"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder`` with its content digest (folders: "dir")."""
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


# ----------------------------------------------------------------------------- what the user has

def user_files(t: Path) -> None:
    """What every scratch folder holds before a case: the user's own files, never to be changed."""
    (t / "afile").write_text("mine\n")
    (t / "mine").mkdir()
    (t / "mine" / "report.md").write_text("# my notes\n")
    (t / "mine" / "summary.json").write_text('{"mine": true}\n')
    (t / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    (t / "knobs.toml").write_text("[world]\ntransfr = 0.5\n")
    (t / "cfgdir").mkdir()
    (t / "cfgdir" / "x.toml").write_text("[world]\n")


def written_by(t: Path, command: str) -> str:
    """A folder another gdro command wrote (its marker, its report): not the user's, not this command's."""
    (t / "theirs").mkdir()
    (t / "theirs" / MARKER).write_text(f"written by gdro {command}: it may replace the files it writes here\n")
    (t / "theirs" / "report.md").write_text("# its report\n")
    return "theirs"


def _other(command: str) -> str:
    return "eval" if command == "predict" else "predict"


def world(t: Path) -> str:
    """The committed calibrated world (world.toml and fit.json) copied here."""
    shutil.copytree(REPO / "reports" / "calibration" / "lm-world", t / "world",
                    ignore=shutil.ignore_patterns("predict", "*.png"))
    return "world/world.toml"


def samples(t: Path, prompts: int = 20) -> str:
    """Samples of gdro eval --save-samples: 20 prompts x 4 responses."""
    (t / "eval").mkdir()
    with open(t / "eval" / "eval_samples_step0.jsonl", "w", encoding="utf-8") as handle:
        for i in range(prompts):
            for j in range(4):
                handle.write(json.dumps({"id": f"q{i}", "sample": j, "success": (i + j) % 3 == 0, "text": "x",
                                         "group": "alg" if i % 2 else "geo", "source": "bench"}) + "\n")
    return "eval"


def sim_run(t: Path) -> str:
    """One small simulator run."""
    from simulated_run import write_tiny_run
    write_tiny_run(t / "simrun", steps=5)
    return "simrun"


def checkpoint_stub(t: Path) -> str:
    """Looks like RUN_DIR/checkpoints/step_N to gdro export (its trainer.pt), so OUT is checked next."""
    (t / "ckpt").mkdir()
    (t / "ckpt" / "trainer.pt").write_bytes(b"")
    return "ckpt"


TRAINED: dict[str, Path] = {}


def trained(t: Path, damage: str = "") -> str:
    """A copy of a 2-step gdro train run (trained once per session) with checkpoints at steps 1 and 2;
    ``damage="truncate"`` cuts its last checkpoint's model.safetensors to 1,000 bytes, ``"torn eval"`` leaves
    a half-written line in its eval.jsonl."""
    if "run" not in TRAINED:
        import torch

        from real_runs import train
        from real_runs.config import load_config
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        out = t.parent / "trained-once"
        cfg = load_config("tiny-cpu", ["train.steps=2", "train.save_every=1", "eval.every=0", "train.progress=false",
                                       f"train.out={json.dumps(str(out))}", "train.run_name=run"])
        TRAINED["run"] = train.main(cfg)
        torch.set_num_threads(threads)
    shutil.copytree(TRAINED["run"], t / "run")
    if damage == "torn eval":
        (t / "run" / "eval.jsonl").write_text('{"step": 1')
    if damage == "truncate":
        weights = t / "run" / "checkpoints" / "step_00000002" / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    return "run"


# ----------------------------------------------------------------------------- the cases

@dataclass
class Case:
    """One bad input: ``args(scratch)`` is the argv after ``gdro``; every needle must be in the answer."""

    name: str
    args: Callable[[Path], list[str]]
    needles: tuple[str, ...]
    torch: bool = False
    rc: int = 2
    interrupt: str = ""      # "module:attr" that raises KeyboardInterrupt when called (Ctrl-C there)
    writes: bool = False     # may leave new files (never change the user's)
    data: bool = False       # reads the benchmark fixtures (GDRO_DATA=tests/fixtures/data)


#: Each command's shortest arguments that reach its output check, with OUT for --out.
WRITERS: dict[str, tuple[Callable[[Path, str], list[str]], bool]] = {
    "simulate": (lambda t, o: ["simulate", "--steps", "3", "--seeds", "1", "--workers", "1", "--no-progress",
                               "--out", o], False),
    "sweep": (lambda t, o: ["sweep", "--grid", "world.transfer=0,1", "--steps", "3", "--seeds", "1", "--workers",
                            "1", "--no-progress", "--out", o], False),
    "arena": (lambda t, o: ["arena", "--sim-only", "--quick", "--out", o], False),
    "calibrate": (lambda t, o: ["calibrate", "--samples", samples(t), "--batch", "8", "--out", o], False),
    "predict": (lambda t, o: ["predict", world(t), "--out", o], False),
    "report": (lambda t, o: ["report", sim_run(t), "--out", o], False),
    "eval": (lambda t, o: ["eval", "--model", "tiny", "--benchmarks", "math500", "--limit", "1", "--k", "1",
                           "--out", o], True),
    "study": (lambda t, o: ["study", "lm", "--quick", "--out", o], False),
}

CASES: list[Case] = []
for _command, (_argv, _torch) in WRITERS.items():
    CASES += [
        Case(f"{_command} --out a file", lambda t, a=_argv: a(t, "afile"), ("--out afile", "is a file, not a folder"),
             _torch, data=True),
        Case(f"{_command} --out a user's folder", lambda t, a=_argv: a(t, "mine"),
             ("--out mine", f"gdro {_command} did not write (report.md, 2 entries in all)"), _torch, data=True),
        Case(f"{_command} --out a folder gdro {_other(_command)} wrote",
             lambda t, a=_argv, c=_command: a(t, written_by(t, _other(c))),
             ("--out theirs", f"was written by gdro {_other(_command)}"), _torch, data=True),
        Case(f"{_command} --out an unwritable folder", lambda t, a=_argv: a(t, UNWRITABLE),
             (f"--out {UNWRITABLE}", "cannot be written", "give a folder you can write"), _torch, data=True),
    ]

CASES += [
    # the command name and its version
    Case("unknown command, close to one", lambda t: ["simulat"], ("unknown command 'simulat'", "did you mean 'simulate'")),
    Case("unknown command", lambda t: ["fly"], ("unknown command 'fly'", "choose one of simulate")),
    Case("unknown command, close to two", lambda t: ["reports"], ("did you mean 'report'",)),
    # unknown keys and names: the flag as given, and the closest known names
    Case("sweep --grid unknown namespace", lambda t: ["sweep", "--grid", "nosuch.key=1,2", "--out", "o"],
         ("--grid nosuch.key", "unknown key", "NAMESPACE.FIELD")),
    Case("sweep --grid unknown field", lambda t: ["sweep", "--grid", "world.transfr=0,1", "--out", "o"],
         ("--grid world.transfr", "did you mean 'transfer'")),
    Case("sweep --methods misspelt", lambda t: ["sweep", "--grid", "world.transfer=0,1", "--methods", "promt_gdro",
                                               "--out", "o"], ("unknown method 'promt_gdro'", "did you mean 'prompt_gdro'")),
    Case("simulate --set field without namespace", lambda t: ["simulate", "--set", "eta=0.4", "--out", "o"],
         ("--set eta", "did you mean 'prompt_gdro.eta' or 'rollout_gdro.eta'")),
    Case("simulate --set misspelt namespace", lambda t: ["simulate", "--set", "wrold.transfer=1", "--out", "o"],
         ("--set wrold.transfer", "did you mean 'world.transfer'")),
    Case("simulate --set without a value", lambda t: ["simulate", "--set", "world.transfer", "--out", "o"],
         ("--set 'world.transfer'", "KEY=VALUE")),
    Case("simulate --config unknown field", lambda t: ["simulate", "--config", "knobs.toml", "--out", "o"],
         ("--config knobs.toml: world.transfr", "did you mean 'transfer'")),
    Case("simulate --config a folder", lambda t: ["simulate", "--config", "cfgdir", "--out", "o"],
         ("--config cfgdir is a folder", "give a TOML file")),
    Case("simulate --config a binary file", lambda t: ["simulate", "--config", "binary.jsonl", "--out", "o"],
         ("--config binary.jsonl is not a text file",)),
    Case("simulate --config missing", lambda t: ["simulate", "--config", "nosuch.toml", "--out", "o"],
         ("--config nosuch.toml: no such file",)),
    Case("simulate misspelt study", lambda t: ["simulate", "curiculum"],
         ("invalid choice: 'curiculum'", "did you mean 'curriculum'")),
    Case("simulate --methods misspelt", lambda t: ["simulate", "--methods", "rolout_gdro", "--out", "o"],
         ("unknown method 'rolout_gdro'", "did you mean 'rollout_gdro'")),
    Case("simulate --preset misspelt", lambda t: ["simulate", "--preset", "paper-1.7", "--out", "o"],
         ("--preset 'paper-1.7'", "did you mean 'paper-1.7b'")),
    Case("simulate --plugin missing", lambda t: ["simulate", "--plugin", "nosuchpkg_xyz", "--out", "o"],
         ("--plugin nosuchpkg_xyz", "cannot import it")),
    Case("simulate --lr-grid not numbers", lambda t: ["simulate", "--lr-grid", "a,b", "--out", "o"],
         ("--lr-grid 'a,b'", "comma-separated numbers")),
    Case("simulate --lr-grid too far apart", lambda t: ["simulate", "--lr-grid", "0.1,10", "--out", "o"],
         ("--lr-grid",)),
    Case("simulate --interference 2", lambda t: ["simulate", "--interference", "2", "--out", "o"],
         ("interference",)),
    Case("arena --worlds misspelt", lambda t: ["arena", "--sim-only", "--worlds", "bimodl", "--out", "o"],
         ("--worlds: unknown world 'bimodl'", "did you mean 'bimodal'")),
    Case("arena --lm-grid misspelt", lambda t: ["arena", "--lm-grid", "sqrt3"],
         ("invalid choice: 'sqrt3'", "did you mean 'sqrt2'")),
    Case("arena --workers 0", lambda t: ["arena", "--workers", "0"], ("--workers", "must be >= 1")),
    Case("calibrate --optimizer misspelt", lambda t: ["calibrate", "--samples", "eval", "--optimizer", "adamw"],
         ("invalid choice: 'adamw'", "did you mean 'adam'")),
    Case("calibrate --samples a binary file", lambda t: ["calibrate", "--samples", "binary.jsonl", "--out", "o"],
         ("--samples", "not UTF-8 text")),
    Case("calibrate --samples missing", lambda t: ["calibrate", "--samples", "nosuch", "--out", "o"],
         ("--samples nosuch", "no such file or directory")),
    Case("calibrate --samples a folder without samples", lambda t: ["calibrate", "--samples", "mine", "--out", "o"],
         ("--samples mine", "no eval_samples_step*.jsonl")),
    Case("calibrate --samples too few prompts", lambda t: ["calibrate", "--samples", samples(t, 5), "--out", "o"],
         ("--samples: only 5 prompts",)),
    Case("calibrate --sweep a simulator run", lambda t: ["calibrate", "--samples", samples(t), "--sweep", sim_run(t),
                                                        "--out", "o"], ("--sweep",)),
    # missing inputs: named as the argument they were given as
    Case("predict missing WORLD", lambda t: ["predict", "missing.toml"],
         ("WORLD missing.toml does not exist", "gdro calibrate")),
    Case("predict a preset name as WORLD", lambda t: ["predict", "paper-1.7b"], ("WORLD paper-1.7b does not exist",)),
    Case("predict folder without world.toml", lambda t: ["predict", "mine"], ("WORLD mine", "without world.toml")),
    Case("predict a binary file as WORLD", lambda t: ["predict", "binary.jsonl"],
         ("WORLD binary.jsonl is not a text file",)),
    Case("predict a train preset as WORLD", lambda t: ["predict", str(REPO / "real_runs" / "presets" / "tiny-cpu.toml")],
         ("WORLD ", "tiny-cpu.toml")),
    Case("predict a TOML without [world]", lambda t: ["predict", "cfgdir/x.toml"], ("cfgdir/x.toml",)),
    Case("predict --draws 0", lambda t: ["predict", world(t), "--draws", "0"], ("--draws",)),
    Case("predict --workers 0", lambda t: ["predict", world(t), "--workers", "0"], ("--workers",)),
    Case("app --root missing", lambda t: ["app", "--root", "nosuch", "--print-command"], ("--root nosuch", "does not exist")),
    Case("app --root a file", lambda t: ["app", "--root", "afile", "--print-command"],
         ("--root afile", "is a file, not a folder")),
    Case("report a missing run", lambda t: ["report", "nosuch", "--out", "o"], ("skipped: nosuch does not exist",),
         rc=1),  # gdro report skips a run it cannot read: status 1
    Case("report a folder without runs", lambda t: ["report", "mine", "--out", "o"], ("mine holds no run directory",)),
    Case("report --out inside the run", lambda t: ["report", sim_run(t), "--out", "simrun/figs"],
         ("--out simrun/figs is inside a run directory",)),
    Case("report --jobs 0", lambda t: ["report", sim_run(t), "--jobs", "0"], ("--jobs 0",)),
    # argparse's own errors: one line, the argument, a pointer to --help
    Case("app --port abc", lambda t: ["app", "--port", "abc"], ("argument --port", "(see gdro app --help)")),
    Case("arena --nosuchflag", lambda t: ["arena", "--nosuchflag"],
         ("unrecognized arguments: --nosuchflag", "(see gdro arena --help)")),
    Case("report without RUN_DIR", lambda t: ["report"], ("RUN_DIR", "(see gdro report --help)")),
    Case("simulate --seeds 0", lambda t: ["simulate", "--seeds", "0"],
         ("argument --seeds", "must be >= 1", "(see gdro simulate --help)")),
    Case("simulate --steps x", lambda t: ["simulate", "--steps", "x"], ("argument --steps",)),
    Case("sweep --steps x", lambda t: ["sweep", "--steps", "x"], ("argument --steps", "(see gdro sweep --help)")),
    Case("sweep without --grid", lambda t: ["sweep", "--out", "o"], ("--grid",)),
    Case("calibrate without --samples", lambda t: ["calibrate"], ("--samples", "(see gdro calibrate --help)")),
    Case("predict --draws x", lambda t: ["predict", "w.toml", "--draws", "x"],
         ("argument --draws", "(see gdro predict --help)")),
    Case("predict without WORLD", lambda t: ["predict"], ("WORLD",)),
    Case("predict --optimizer misspelt", lambda t: ["predict", "w.toml", "--optimizer", "adamw"],
         ("invalid choice: 'adamw'", "did you mean 'adam'")),
    Case("report --step x", lambda t: ["report", "run", "--step", "x"], ("argument --step",)),
    Case("sweep --grid without values", lambda t: ["sweep", "--grid", "world.transfer", "--out", "o"],
         ("--grid",)),
    Case("calibrate --plan missing", lambda t: ["calibrate", "--plan", "nosuch"], ("nosuch",)),
    # Ctrl-C: one line that says what was kept (rc 130)
    Case("Ctrl-C in simulate", lambda t: WRITERS["simulate"][0](t, "o"), ("interrupted", "kept"), rc=130,
         interrupt="simulators.studies.curriculum_study:run", writes=True),
    Case("Ctrl-C in sweep", lambda t: WRITERS["sweep"][0](t, "o"), ("gdro sweep: interrupted", "kept"), rc=130,
         interrupt="simulators.parallel:run_jobs", writes=True),
    Case("Ctrl-C in arena", lambda t: WRITERS["arena"][0](t, "o"), ("gdro arena: interrupted", "reused"), rc=130,
         interrupt="simulators.studies.allocation_arena:run", writes=True),
    Case("Ctrl-C in calibrate", lambda t: WRITERS["calibrate"][0](t, "o"), ("gdro calibrate: interrupted",),
         rc=130, interrupt="simulators.calibrate.calibration:calibrate", writes=True),
    Case("Ctrl-C in predict", lambda t: WRITERS["predict"][0](t, "o"), ("gdro predict: interrupted",), rc=130,
         interrupt="simulators.calibrate.predict:predict", writes=True),
    Case("Ctrl-C in report", lambda t: WRITERS["report"][0](t, "o"), ("gdro report: interrupted", "--overwrite"),
         rc=130, interrupt="apps.report.cli:write_reports", writes=True),
]

TORCH_CASES = [
    Case("train --resume missing", lambda t: ["train", "--resume", "nosuchdir"], ("--resume nosuchdir does not exist",)),
    Case("train --resume a file", lambda t: ["train", "--resume", "afile"], ("--resume afile", "is a file, not a run")),
    Case("train --resume a simulator run", lambda t: ["train", "--resume", sim_run(t)], ("not gdro train",)),
    Case("train --resume with a CONFIG", lambda t: ["train", "tiny-cpu", "--resume", "mine"], ("--resume continues",)),
    Case("train a folder as CONFIG", lambda t: ["train", "mine"], ("config mine is a folder", "--resume RUN_DIR")),
    Case("train a missing TOML", lambda t: ["train", "nosuch.toml"], ("config file nosuch.toml does not exist",)),
    Case("train a misspelt preset", lambda t: ["train", "tiny-cp"], ("'tiny-cp'", "did you mean 'tiny-cpu'")),
    Case("train a misspelt key", lambda t: ["train", "tiny-cpu", "train.stepz=3", "--dry-run"],
         ("train.stepz", "did you mean 'train.steps'")),
    Case("train a misspelt section", lambda t: ["train", "tiny-cpu", "trian.steps=3", "--dry-run"],
         ("[trian]", "did you mean 'train'")),
    Case("train a misspelt method", lambda t: ["train", "tiny-cpu", "method.name=promt_gdro", "--dry-run"],
         ("method.name='promt_gdro'", "did you mean 'prompt_gdro'")),
    Case("train an override without a value", lambda t: ["train", "tiny-cpu", "train.steps", "--dry-run"],
         ("train.steps",)),
    Case("train train.steps=0", lambda t: ["train", "tiny-cpu", "train.steps=0", "--dry-run"], ("train.steps",)),
    Case("train --dry-run --rehearse", lambda t: ["train", "tiny-cpu", "--dry-run", "--rehearse"],
         ("--dry-run", "--rehearse", "give one")),
    Case("train --stop-after 0", lambda t: ["train", "tiny-cpu", "--stop-after", "0"], ("--stop-after 0",)),
    Case("train without CONFIG", lambda t: ["train"], ("give a CONFIG",)),
    Case("train --out a file", lambda t: ["train", "tiny-cpu", "--out", "afile", "--dry-run"], ("is a file",)),
    Case("train --out unwritable", lambda t: ["train", "tiny-cpu", "--out", UNWRITABLE, "train.steps=1"],
         ("/sys",)),
    Case("train --nosuchflag", lambda t: ["train", "tiny-cpu", "--nosuchflag"],
         ("unrecognized arguments: --nosuchflag", "(see gdro train --help)")),
    Case("eval --temperature -1", lambda t: ["eval", "--model", "tiny", "--temperature", "-1"], ("--temperature -1",)),
    Case("eval --top-p 2", lambda t: ["eval", "--model", "tiny", "--top-p", "2"], ("--top-p 2.0", "(0, 1]")),
    Case("eval --top-p 0", lambda t: ["eval", "--model", "tiny", "--top-p", "0"], ("--top-p 0.0",)),
    Case("eval --top-k -1", lambda t: ["eval", "--model", "tiny", "--top-k", "-1"], ("--top-k -1",)),
    Case("eval --reward-timeout 0", lambda t: ["eval", "--model", "tiny", "--reward-timeout", "0"],
         ("--reward-timeout 0",)),
    Case("eval --k 0", lambda t: ["eval", "--model", "tiny", "--k", "0"], ("--k 0",)),
    Case("eval --k above --n", lambda t: ["eval", "--model", "tiny", "--k", "8", "--n", "4"], ("--k 8", "raise --n")),
    Case("eval --limit 0", lambda t: ["eval", "--model", "tiny", "--limit", "0"], ("--limit 0",)),
    Case("eval misspelt benchmark", lambda t: ["eval", "--model", "tiny", "--benchmarks", "math50"],
         ("unknown benchmark 'math50'", "did you mean 'math500'")),
    Case("eval --engine misspelt", lambda t: ["eval", "--model", "tiny", "--engine", "vllmm"],
         ("invalid choice: 'vllmm'", "did you mean 'vllm'")),
    Case("eval both --out and --run", lambda t: ["eval", "--model", "tiny", "--out", "o", "--run", "r"],
         ("either --out",)),
    Case("eval --run a simulator run", lambda t: ["eval", "--model", "tiny", "--run", sim_run(t)],
         ("--run simrun is a run of 'gdro-lab simulator'", "give --out")),
    Case("eval --run missing", lambda t: ["eval", "--model", "tiny", "--run", "nosuch"], ("nosuch",)),
    Case("eval --run with a torn eval.jsonl", lambda t: ["eval", "--model", "tiny", "--run", trained(t, "torn eval")],
         ("half-written line",)),
    Case("eval --model a truncated checkpoint", lambda t: ["eval", "--model", trained(t, "truncate"), "--out", "o"],
         ("--model ", "model.safetensors is truncated (1,000 bytes")),
    Case("eval --device tpu", lambda t: ["eval", "--model", "tiny", "--device", "tpu", "--benchmarks", "math500",
                                         "--limit", "1", "--k", "1", "--out", "o"], ("unknown device 'tpu'",),
         data=True, writes=True),
    Case("eval without --model", lambda t: ["eval"], ("--model", "(see gdro eval --help)")),
    Case("export a missing run", lambda t: ["export", "nosuch", "o"], ("nosuch does not exist",)),
    Case("export a user's folder", lambda t: ["export", "mine", "o"], ("mine is neither a gdro train run",)),
    Case("export a simulator run", lambda t: ["export", sim_run(t), "o"],
         ("simrun is a run of 'gdro-lab simulator'", "not of gdro train")),
    Case("export a truncated checkpoint", lambda t: ["export", trained(t, "truncate"), "o"],
         ("model.safetensors is truncated (1,000 bytes", "earlier checkpoint")),
    Case("export --dtype bfloat16 of a truncated checkpoint", lambda t: ["export", trained(t, "truncate"), "o",
                                                                       "--dtype", "bfloat16"], ("is truncated",)),
    Case("export --dtype int8", lambda t: ["export", trained(t), "o", "--dtype", "int8"], ("--dtype int8",)),
    Case("export OUT a file", lambda t: ["export", checkpoint_stub(t), "afile"], ("OUT afile is a file, not a folder",)),
    Case("export OUT a user's folder", lambda t: ["export", checkpoint_stub(t), "mine"],
         ("OUT mine is a folder that is not empty",)),
    Case("export OUT unwritable", lambda t: ["export", trained(t), UNWRITABLE], ("cannot be written",)),
    Case("export without OUT", lambda t: ["export", "run"], ("required: out", "(see gdro export --help)")),
    Case("export without arguments", lambda t: ["export"], ("required: source, out",)),
    Case("study --report a user's folder", lambda t: ["study", "lm", "--quick", "--out", "o", "--report", "mine"],
         ("--report mine", "gdro study did not write (report.md, 2 entries in all)")),
    Case("study --report-only --report a user's folder",
         lambda t: ["study", "lm", "--quick", "--report-only", "--out", "o", "--report", "mine"],
         ("--report mine", "gdro study did not write")),
    Case("study --calibration-data a user's folder", lambda t: ["study", "lm", "--quick", "--calibration-data", "mine"],
         ("--calibration-data mine", "gdro study did not write (report.md, 2 entries in all)")),
    Case("study misspelt", lambda t: ["study", "lmm"], ("invalid choice: 'lmm'", "did you mean 'lm'")),
    Case("study --seeds 0", lambda t: ["study", "lm", "--seeds", "0"], ("argument --seeds", "(see gdro study --help)")),
    Case("Ctrl-C in eval", lambda t: WRITERS["eval"][0](t, "o"), ("gdro eval: interrupted", "no results"), rc=130,
         interrupt="real_runs.eval_cli:generate_and_score", writes=True, data=True),
    Case("Ctrl-C in export", lambda t: ["export", trained(t), "o", "--dtype", "bfloat16"],
         ("gdro export: interrupted", "OUT was not written"), rc=130, interrupt="real_runs.export:_rebuild", writes=True),
    Case("Ctrl-C in train", lambda t: ["train", "tiny-cpu", "--out", "runs", "train.steps=2", "eval.every=0",
                                       "train.progress=false"],
         ("gdro train: interrupted", "status 'interrupted'", "--resume runs/grpo-tiny-s0"), rc=130,
         interrupt="real_runs.train:_step", writes=True),
]
for _case in TORCH_CASES:
    _case.torch = True
CASES += TORCH_CASES
#: The answer of every case run so far in this session (for the docs table).
ANSWERS: dict[str, tuple[str, int, str]] = {}


def run_gdro(argv: list[str]) -> int:
    """``gdro ARGV`` in this process; argparse's exit status counts as the command's."""
    try:
        return gdro(argv)
    except SystemExit as done:
        return int(done.code or 0)


def _raise_interrupt(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


def run_case(case: Case, scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
             ) -> tuple[list[str], int, str, dict[str, str], dict[str, str]]:
    """Run one case from ``scratch`` (the user's files in it): (argv, status, stderr, files before, after)."""
    scratch.mkdir()
    user_files(scratch)
    monkeypatch.chdir(scratch)
    for name in ("GDRO_APP_ROOT", "GDRO_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GDRO_DATA", str(REPO / "tests" / "fixtures" / "data"))
    before = snapshot(scratch)
    argv = case.args(scratch)
    before.update({k: v for k, v in snapshot(scratch).items() if k not in before})  # the case's own inputs
    if case.interrupt:
        module, attr = case.interrupt.split(":")
        monkeypatch.setattr(importlib.import_module(module), attr, _raise_interrupt)
    capsys.readouterr()
    rc = run_gdro(argv)
    err = capsys.readouterr().err.strip()
    for path, shown in ((str(scratch.resolve()) + "/", ""), (str(scratch) + "/", ""), (str(REPO) + "/", "CLONE/")):
        err = err.replace(path, shown)
        argv = [arg.replace(path, shown) for arg in argv]
    return argv, rc, err, before, snapshot(scratch)


def _skip_without(case: Case) -> None:
    if case.torch and not HAS_TORCH:
        pytest.skip("needs the train extra (torch, transformers)")
    if UNWRITABLE in " ".join(case.name.split()) or "unwritable" in case.name:
        if not Path("/sys").is_dir():
            pytest.skip("no /sys to stand for an unwritable folder")


def _answer_of(err: str) -> str:
    """The line the user saw (progress lines of a command that began are not the answer)."""
    lines = [line for line in err.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_cli_input_is_one_line_and_keeps_every_file(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _skip_without(case)
    argv, rc, err, before, after = run_case(case, tmp_path / "scratch", monkeypatch, capsys)
    answer = _answer_of(err)
    ANSWERS[case.name] = (" ".join(["gdro", *argv]), rc, answer)
    assert rc == case.rc, (rc, err)
    assert "Traceback" not in err and "usage:" not in err, err
    if not case.writes:
        assert "\n" not in err, err
    assert re.match(rf"gdro( {argv[0]}( lm)?)?: ", answer), answer
    for needle in case.needles:
        assert needle in answer, (needle, answer)
    changed = sorted(k for k, v in before.items() if after.get(k) != v)
    assert changed == [], f"the user's files changed: {changed}"
    if not case.writes:
        assert sorted(set(after) - set(before)) == [], "something was written"


def _shortened(answer: str) -> str:
    """A list of more than four names cut to its first one and "...": the table stays current when a
    method, a key or a preset is added or moved (the test itself checks the whole answer)."""
    name = r"'?[\w./-]+'?"
    return re.sub(rf"({name}, )(?:{name}, ){{3,}}{name}\b'?", r"\1...", answer)


def _table(answers: dict[str, tuple[str, int, str]]) -> str:
    rows = ["| bad input | command (from a folder of the user's files) | exit | answer on stderr |",
            "|---|---|---|---|"]
    for case in CASES:
        command, rc, answer = answers[case.name]
        cells = [case.name, f"`{command}`", str(rc), _shortened(answer).replace("|", "\\|")]
        rows.append("| " + " | ".join(c.replace("\n", " ") for c in cells) + " |")
    return "\n".join(rows)


def test_the_table_of_bad_inputs_in_docs_is_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """docs/testing.md#bad-inputs lists every case and its answer as they are now (cases not run yet in
    this session run here); ``GDRO_UPDATE_DOCS=1`` rewrites the table."""
    if not HAS_TORCH or not Path("/sys").is_dir():
        pytest.skip("the table holds every case: it needs the train extra and /sys")
    assert len(CASES) >= 140
    for number, case in enumerate(CASES):
        if case.name not in ANSWERS:
            with monkeypatch.context() as patch:
                argv, rc, err, _, _ = run_case(case, tmp_path / f"case{number}", patch, capsys)
            ANSWERS[case.name] = (" ".join(["gdro", *argv]), rc, _answer_of(err))
    table = _table(ANSWERS)
    text = DOCS.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    if os.environ.get("GDRO_UPDATE_DOCS"):
        DOCS.write_text(text[:start] + "\n" + table + "\n" + text[end:], encoding="utf-8")
    assert text[start:end].strip() == table, "docs/testing.md's table is stale: rerun with GDRO_UPDATE_DOCS=1"


# ----------------------------------------------------------------------------- the helpers

def test_did_you_mean_and_the_path_checks(tmp_path: Path) -> None:
    assert did_you_mean("transfr", ["transfer", "curvature", "interference"]) == "did you mean 'transfer'?"
    assert did_you_mean("xyz", ["transfer"]) == ""
    assert did_you_mean("eta", ["zeta", "eta", "delta"]) == "did you mean 'eta', 'zeta' or 'delta'?"
    assert with_suggestion("argument S: invalid choice: 'lmm' (choose from 'lm', 'arena')") == \
        "argument S: invalid choice: 'lmm' (choose from 'lm', 'arena'): did you mean 'lm'?"
    assert with_suggestion("argument --k: invalid int value: 'x'") == "argument --k: invalid int value: 'x'"
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


def test_the_write_policy_claims_new_empty_and_own_folders_only(tmp_path: Path) -> None:
    """A command may write into a new, an empty or its own folder; a user's, another command's, a file or an
    unwritable path is refused in one line with nothing written; a second command may share a folder only
    when the first one's marker names it."""
    new, empty, mine = tmp_path / "a" / "new", tmp_path / "empty", tmp_path / "mine"
    empty.mkdir()
    mine.mkdir()
    (mine / "report.md").write_text("mine")
    assert claim_output(new, "gdro predict") == new and owners(new) == {"gdro predict"}
    assert claim_output(new, "gdro predict") == new and (new / MARKER).read_text().count("\n") == 1  # no repeat
    assert output_problem(new, "gdro calibrate") == "was written by gdro predict, not gdro calibrate"
    claim_output(empty, "gdro eval")
    assert owners(empty) == {"gdro eval"}
    assert output_problem(mine, "gdro arena") == "holds files gdro arena did not write (report.md, 1 entries in all)"
    assert output_problem(mine, "gdro arena", accept=lambda folder: True) is None
    assert output_problem(tmp_path / "mine" / "report.md", "gdro eval") == "is a file, not a folder"
    with pytest.raises(ConfigError, match=r"^--out \S+mine holds files gdro eval did not write .*nothing was written"):
        claim_output(mine, "gdro eval")
    assert sorted(p.name for p in mine.iterdir()) == ["report.md"]
    if Path("/sys").is_dir():
        with pytest.raises(ConfigError, match=rf"^--out {UNWRITABLE} cannot be written \(.+\): give a folder"):
            claim_output(Path(UNWRITABLE), "gdro eval")
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / ".gdro-simulator-output").write_text("written by gdro simulate\n")
    (legacy / "report.md").write_text("an earlier report")
    assert output_problem(legacy, "gdro sweep") is None and output_problem(legacy, "gdro eval") is not None


# ----------------------------------------------------------------------------- the first line

#: Each writing command's first line once its output check passed (the Ctrl-C cases: stopped right after).
FIRST_LINES = {"Ctrl-C in simulate": "gdro simulate curriculum: writing to {o}",
               "Ctrl-C in sweep": "gdro sweep: writing to {o}", "Ctrl-C in arena": "gdro arena: writing to {o} (",
               "Ctrl-C in calibrate": "gdro calibrate: writing to {o}", "Ctrl-C in predict": "gdro predict: writing to {o}",
               "Ctrl-C in report": "gdro report: writing to o", "Ctrl-C in eval": "gdro eval: run directory o (",
               "Ctrl-C in export": "gdro export: writing o",
               "Ctrl-C in train": "gdro train: run directory runs/grpo-tiny-s0 ("}


@pytest.mark.parametrize("name", FIRST_LINES)
def test_the_output_folder_is_the_first_line(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """stdout and stderr read as one stream, as a terminal shows them: the first line names the folder
    the command writes (before its minutes of compute; here it is stopped by Ctrl-C right there)."""
    import io
    case = next(c for c in CASES if c.name == name)
    _skip_without(case)
    if name == "Ctrl-C in export":  # its input run is trained once per session, before the lines are read
        (tmp_path / "warm").mkdir()
        trained(tmp_path / "warm")
    merged = io.StringIO()
    monkeypatch.setattr(sys, "stdout", merged)
    monkeypatch.setattr(sys, "stderr", merged)
    run_case(case, tmp_path / "scratch", monkeypatch, capsys)
    lines = [line for line in merged.getvalue().splitlines() if line.strip()]
    assert lines[0].startswith(FIRST_LINES[name].format(o=(tmp_path / "scratch" / "o").resolve())), lines
    assert "interrupted" in lines[-1], lines


def test_gdro_data_fetch_names_its_folder_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from real_runs import datafetch
    monkeypatch.setattr(datafetch, "fetch", lambda out, sources, mirror: print("fetching"))
    assert run_gdro(["data", "fetch", "--out", str(tmp_path / "d"), "--mirror", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [f"gdro data fetch: writing to {tmp_path / 'd'}", "fetching"]


# ----------------------------------------------------------------------------- reruns are welcome

def test_a_rerun_into_its_own_folder_and_a_folder_of_its_runs_are_welcome(tmp_path: Path, capsys) -> None:
    """The policy refuses only what is not the command's: a second sweep into the same --out works, and so
    does a folder of simulator runs written before the marker existed (a runs/ of simulator runs only)."""
    from simulated_run import write_tiny_run
    from simulators.reporting import claim_output as claim_simulator
    from simulators.reporting import simulator_folder
    out = tmp_path / "sweep"
    args = ["sweep", "--grid", "world.transfer=0", "--methods", "grpo", "--steps", "3", "--seeds", "1",
            "--prompts", "200", "--batch", "16", "--workers", "1", "--no-progress", "--out", str(out)]
    assert run_gdro(args) == 0
    assert owners(out) == {"gdro sweep"} and (out / "report.md").is_file()
    assert run_gdro(args) == 0
    capsys.readouterr()
    legacy = tmp_path / "legacy"
    write_tiny_run(legacy / "runs" / "grpo", steps=3)
    (legacy / "report.md").write_text("an earlier simulator report\n")
    assert simulator_folder(legacy) and claim_simulator(legacy, command="gdro simulate") == legacy
    (legacy / "runs" / "stray.txt").write_text("x")
    (legacy / MARKER).unlink()
    assert not simulator_folder(legacy)
    with pytest.raises(ConfigError, match="holds files gdro simulate did not write"):
        claim_simulator(legacy, command="gdro simulate")


def test_calibrate_and_predict_rerun_into_their_own_folders(tmp_path: Path, monkeypatch, capsys) -> None:
    """The first-run defect: `gdro predict --out DIR` and `gdro calibrate --out DIR` replaced the user's
    report.md (rc 0; the table's cases). Their own folders are still theirs on a rerun: each run here stops
    with Ctrl-C right after its output check (the compute replaced), the second one too, not refused."""
    from simulators.calibrate import calibration, predict
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(predict, "predict", _raise_interrupt)
    monkeypatch.setattr(calibration, "calibrate", _raise_interrupt)
    for args, command in ((["predict", world(tmp_path), "--out", "pred"], "gdro predict"),
                          (["calibrate", "--samples", samples(tmp_path), "--batch", "8", "--out", "cal"], "gdro calibrate")):
        assert run_gdro(args) == 130 and run_gdro(args) == 130, capsys.readouterr().err
        assert owners(tmp_path / args[-1]) == {command}
        assert output_problem(tmp_path / args[-1], "gdro eval") == f"was written by {command}, not gdro eval"
    capsys.readouterr()


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
    assert owners(tmp_path / "o") == {"gdro simulate"} and output_problem(tmp_path / "o", "gdro simulate") is None


# ----------------------------------------------------------------------------- gdro --version

def test_gdro_version_is_the_package_version() -> None:
    """`gdro --version` prints the installed metadata's version, which is pyproject.toml's."""
    import tomllib
    from importlib.metadata import version
    result = subprocess.run([sys.executable, "-m", "gdro_cli", "--version"], capture_output=True, text=True,
                            timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    expected = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert result.returncode == 0 and result.stdout == f"gdro {expected}\n" and version("gdro-lab") == expected


# ----------------------------------------------------------------------------- a torn steps.jsonl on resume

@pytest.mark.skipif(not HAS_TORCH, reason="needs the train extra (torch, transformers)")
def test_a_resume_after_a_torn_last_step_line_leaves_no_gap(tmp_path: Path, monkeypatch, capsys) -> None:
    """The first-run defect: the last line of steps.jsonl torn by a crash, `gdro train --resume` continued
    after the last checkpoint and the log read steps 1, 3. Now the resume starts from the newest checkpoint
    the log covers, says so, and the log holds every step once."""
    import torch

    from gdro_lab.runformat.runlog import read_run
    torch.set_num_threads(1)  # tests/conftest.py restores the count
    monkeypatch.chdir(tmp_path)
    common = ["eval.every=0", "train.progress=false", "train.save_every=1", "train.keep_optimizer_last=3",
              "train.run_name=r", "--out", "runs"]
    assert run_gdro(["train", "tiny-cpu", "train.steps=3", *common, "--stop-after", "2"]) == 0
    steps = tmp_path / "runs" / "r" / "steps.jsonl"
    text = steps.read_text(encoding="utf-8")
    steps.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 40], encoding="utf-8")  # step 2's line torn
    capsys.readouterr()
    assert run_gdro(["train", "--resume", "runs/r"]) == 0
    err = capsys.readouterr().err
    assert "torn last line was dropped" in err and "resuming from the checkpoint of step 1" in err, err
    assert read_run(tmp_path / "runs" / "r").steps.tolist() == [1, 2, 3]
