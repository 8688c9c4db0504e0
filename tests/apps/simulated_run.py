"""A small complete simulator run for the tests (the app's, the CLI's, the docs'): importable by name
(``tests/apps`` is on pytest's path); without the simulator the import fails and the app's tests write
a synthetic run instead (tests/apps/conftest.py)."""

from __future__ import annotations

import pathlib

from simulators.loop import run_simulation
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig


def tiny_config(steps: int = 30, seed: int = 0) -> SimConfig:
    """Joint Prompt+Rollout GDRO, 10 bins, 400 prompts in 8 groups, 32 per step, evals every 5 steps."""
    return SimConfig(method="joint", seed=seed, steps=steps, batch=32, num_bins=10, eval_every=5,
                     snapshot_every=10, world=WorldConfig(num_prompts=400, num_groups=8))


def write_tiny_run(out_dir: pathlib.Path, steps: int = 30, seed: int = 0) -> pathlib.Path:
    """Write ONE small complete run directory into ``out_dir`` (which must not hold a run); return it.

    Joint Prompt+Rollout GDRO on a 400-prompt world: steps.jsonl every step, eval.jsonl every 5 steps
    (and at the end), controller snapshots every 10 steps and at the end. Takes well under a second.
    """
    return run_simulation(tiny_config(steps, seed), pathlib.Path(out_dir))
