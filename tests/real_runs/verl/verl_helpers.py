"""Builders shared by the verl plugin tests: DataProto batches, a tiny tokenizer, a verl config, and
the launch of a CPU fit in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
CONFIG_DIR = ROOT / "real_runs" / "verl" / "configs"


def launch(args: list[str], log: Path, timeout_s: int, **env_vars: str) -> tuple[int | None, str]:
    """Run ``python ARGS`` from the repository in its own session, niced, with one OpenMP thread and
    ``env_vars``, its output in ``log``; killed with its whole process group (Ray, vLLM) past
    ``timeout_s``. -> (exit status, None when killed; the log's text)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", **env_vars}
    with open(log, "w") as handle:
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: os.nice(10))
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, log.read_text(errors="replace")


def prompt_batch(ids: list[str], seed: int = 0):
    """A DataProto of P prompts as verl's dataloader gives them (extra_info.index = id) plus a uid."""
    from verl import DataProto

    num = len(ids)
    data = DataProto.from_single_dict({
        "prompt_row": torch.arange(num),
        "dummy_tensor": torch.zeros(num, 1, dtype=torch.uint8),
        "data_source": np.array(["toy"] * num, dtype=object),
        "extra_info": np.array([{"index": i, "group": "g"} for i in ids], dtype=object),
        "reward_model": np.array([{"ground_truth": "1", "style": "rule"} for _ in ids], dtype=object),
    })
    rng = np.random.default_rng(seed)
    data.non_tensor_batch["uid"] = np.array([str(uuid.UUID(int=int(rng.integers(2**62)))) for _ in ids],
                                            dtype=object)
    return data


def with_rewards(expanded, scores_R: np.ndarray, length: int = 3):
    """Add responses with outcome scores on the last valid token, as verl's reward manager does."""
    rows = len(expanded)
    mask = torch.ones(rows, length, dtype=torch.float32)
    lengths = np.random.default_rng(rows).integers(1, length + 1, size=rows)
    for row, valid in enumerate(lengths):
        mask[row, valid:] = 0
    scores = torch.zeros(rows, length, dtype=torch.float32)
    scores[torch.arange(rows), torch.as_tensor(lengths - 1)] = torch.as_tensor(scores_R, dtype=torch.float32)
    expanded.batch["response_mask"] = mask
    expanded.batch["token_level_scores"] = scores
    expanded.batch["token_level_rewards"] = scores.clone()
    expanded.non_tensor_batch["acc"] = np.asarray(scores_R) > 0
    return expanded


def compose_config(overrides: list[str] | None = None):
    """The plugin's hydra config (verl's ppo_trainer + gdro) with overrides."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose("gdro_trainer", overrides=list(overrides or []))


def tiny_tokenizer(words: list[str], path: Path):
    """A word-level fast tokenizer with a chat template (the converter's, shared with the smoke run)."""
    from real_runs.verl.convert import word_level_tokenizer

    return word_level_tokenizer(words, path)
