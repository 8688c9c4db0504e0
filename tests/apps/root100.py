"""A runs folder of 100+ runs like a real user's, built in a temporary folder (never committed).

:func:`build_root` writes, under ``root``:

* ``study/``  one ``gdro simulate curriculum`` study: 3 methods x 6 learning-rate scales + 2
  step-matched GRPO baselines, x 5 seeds = 100 runs (tiny worlds and :data:`SIM_STEPS` steps, so
  it takes seconds), in the simulator's own layout ``study/runs/<method>/lr<s>/seed<k>``;
* ``sweep/``  one ``gdro sweep`` over ``world.transfer`` (3 values) x 2 methods x 2 seeds = 12 runs
  (``sweep/runs/cell<i>/<method>/seed<k>``);
* ``train/``  3 runs in ``gdro train``'s layout (``train/<method>-tiny-s0``): the trainer's own
  resolved config of the ``tiny-cpu`` preset (``real_runs.config``), :data:`TRAIN_STEPS` steps
  with step times and agreed-name evaluations (written with ``gdro_lab.runformat.runlog.RunWriter``: a real
  ``gdro train tiny-cpu`` takes 15 s a run);
* ``damaged/truncated``  a copy of a study run whose ``steps.jsonl`` was cut in the middle of a
  line (status still "finished": a crash or a full disk);
* ``damaged/newer``  a copy whose ``meta.json`` says format version 99;
* ``notes/``  a folder that is not a run (no ``meta.json``).

The simulator and the sweep run as the user would run them (``python -m gdro_cli.main``), so the
configs, folder names and files are the producers' own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gdro_app_synthetic import SyntheticCurriculum, trainer_config
from gdro_lab.runformat.runlog import RunWriter

REPO = Path(__file__).resolve().parents[2]
SIM_STEPS, SIM_SEEDS, TRAIN_STEPS = 60, 5, 6
LR_GRID = "0.353553,0.5,0.707107,1,1.41421,2"
SWEEP_GRID = "world.transfer=0,0.5,1"
TRAIN_METHODS = ("grpo", "prompt_gdro", "rollout_gdro")
#: The run whose copy is truncated, and the one whose copy claims a newer format.
TRUNCATED_FROM = "study/runs/prompt_gdro/lr1/seed0"
TRUNCATED, NEWER, NOT_A_RUN = "damaged/truncated", "damaged/newer", "notes"


@dataclass(frozen=True)
class Root100:
    """The generated root and the labels (folders relative to it) of each kind of run in it."""

    root: Path
    study: tuple[str, ...]
    sweep: tuple[str, ...]
    train: tuple[str, ...]
    truncated: str = TRUNCATED
    newer: str = NEWER
    not_a_run: str = NOT_A_RUN

    @property
    def readable(self) -> tuple[str, ...]:
        """Every run the app can open (the truncated one included: it is damaged, not unreadable)."""
        return (*self.study, *self.sweep, *self.train, self.truncated)


def _cli(*args: str) -> None:
    """Run ``gdro ARGS`` as a user would (a child process; its output kept for the error message)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "gdro_cli.main", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"gdro {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")


def _labels(root: Path, folder: str) -> tuple[str, ...]:
    return tuple(sorted(path.parent.relative_to(root).as_posix() for path in (root / folder).rglob("meta.json")))


def simulate_study(out: Path, steps: int = SIM_STEPS, seeds: int = SIM_SEEDS) -> None:
    """``gdro simulate curriculum``: 3 methods x 6 lr scales + 2 matched baselines, x ``seeds``."""
    _cli("simulate", "curriculum", "--out", str(out), "--seeds", str(seeds), "--steps", str(steps),
         "--prompts", "32", "--batch", "8", "--workers", "2", "--no-progress", "--log-every", "2",
         "--eval-every", "20", "--lr-grid", LR_GRID, "--lr-extend", "0")


def sweep(out: Path) -> None:
    """``gdro sweep``: world.transfer in {0, 0.5, 1} x GRPO, Prompt-GDRO x 2 seeds."""
    _cli("sweep", "--grid", SWEEP_GRID, "--methods", "grpo,prompt_gdro", "--seeds", "2", "--steps", "20",
         "--prompts", "32", "--batch", "8", "--workers", "2", "--out", str(out), "--no-progress")


def train_config(method: str, seed: int, out: Path) -> dict[str, Any]:
    """The trainer's resolved config of ``tiny-cpu`` for a method and seed (the synthetic trainer
    layout when the trainer's config module cannot be imported)."""
    try:
        from real_runs.config import config_to_dict, load_config
    except ImportError:
        return trainer_config(method, seed, 1.0, 10, TRAIN_STEPS, 4)
    method_name = "joint" if method == "both" else method
    config = config_to_dict(load_config("tiny-cpu", [f"method.name={method_name}", f"train.seed={seed}",
                                                      f"train.out={out}"]))
    return dict(config)


def write_train_run(path: Path, method: str, seed: int = 0) -> Path:
    """A finished run in ``gdro train``'s layout: steps 1..TRAIN_STEPS with step times, evaluations."""
    curriculum = SyntheticCurriculum(num_bins=10, total_steps=TRAIN_STEPS + 1, method=method, seed=seed, batch=4,
                                     real=True, layout="trainer")
    labels = [f"accbin_{b}" for b in range(10)]
    with RunWriter(path, train_config(method, seed, path.parent), 10, producer="gdro train",
                   bin_labels=labels) as writer:
        for step in range(1, TRAIN_STEPS + 1):
            writer.log_step(step, *curriculum.record(step))
            if step % 3 == 0:
                writer.log_eval(step, curriculum.eval_metrics(step))
    return path


def truncate(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose steps.jsonl stops in the middle of a line, about halfway."""
    shutil.copytree(source, target)
    steps = target / "steps.jsonl"
    text = steps.read_bytes()
    lines = text.splitlines(keepends=True)
    half = sum(len(line) for line in lines[: len(lines) // 2])
    steps.write_bytes(text[: half + len(lines[len(lines) // 2]) // 2])
    return target


def newer_format(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose meta.json says format version 99 (a newer gdro-lab wrote it)."""
    shutil.copytree(source, target)
    meta = json.loads((target / "meta.json").read_text())
    (target / "meta.json").write_text(json.dumps({**meta, "version": 99}, indent=1))
    return target


def build_root(root: Path, with_study: bool = True) -> Root100:
    """Write the whole root (see the module docstring) and return what it holds."""
    root.mkdir(parents=True, exist_ok=True)
    if with_study:
        simulate_study(root / "study")
    sweep(root / "sweep")
    for method in TRAIN_METHODS:
        write_train_run(root / "train" / f"{method}-tiny-s0", method)
    source = root / TRUNCATED_FROM if with_study else next((root / "sweep").rglob("meta.json")).parent
    truncate(source, root / TRUNCATED)
    newer_format(source, root / NEWER)
    (root / NOT_A_RUN).mkdir()
    (root / NOT_A_RUN / "README.txt").write_text("notes about the runs, not a run\n")
    return Root100(root, _labels(root, "study") if with_study else (), _labels(root, "sweep"), _labels(root, "train"))


if __name__ == "__main__":  # python tests/apps/root100.py OUT: build a root to look at (benchmarks, screenshots)
    built = build_root(Path(sys.argv[1]))
    print(f"{built.root}: {len(built.study)} study, {len(built.sweep)} sweep, {len(built.train)} train runs, "
          f"{built.truncated}, {built.newer}, {built.not_a_run}")
