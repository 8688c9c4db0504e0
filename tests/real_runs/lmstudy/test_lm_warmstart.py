"""Warm start: the loss falls on a tiny budget with the trainer's model code; the cache is reused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from real_runs.lmstudy import tasks
from real_runs.lmstudy.tokenizer import build_tokenizer
from real_runs.lmstudy.warmstart import (WarmStartConfig, load_warm_start, supervised_batch,
                                         warm_start)

TINY = WarmStartConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, steps=40,
                       batch_size=32, lr=3e-3, warmup_steps=5, heldout_per_group=4)


def test_supervised_batch_masks_the_prompt():
    tok = build_tokenizer()
    problems = tasks.heldout_split(tasks.TaskConfig(heldout_per_group=2))[:3]
    batch = supervised_batch(tok, problems)
    for row, p in enumerate(problems):
        n_prompt, n_resp = len(p.problem), len(tasks.boxed(p.answer)) + 1
        labels = batch["labels"][row]
        assert torch.all(labels[:n_prompt] == -100)
        kept = labels[labels != -100].tolist()
        assert tok.decode(kept[:-1]) == tasks.boxed(p.answer) and kept[-1] == tok.eos_token_id
        assert int(batch["attention_mask"][row].sum()) == n_prompt + n_resp


def test_loss_falls_and_cache_is_reused(tmp_path):
    pytest.importorskip("real_runs.models")
    torch.set_num_threads(1)
    path = warm_start(TINY, cache_root=tmp_path, log=lambda _: None)
    summary = json.loads((path / "warmstart.json").read_text())
    assert summary["loss_last"] < 0.7 * summary["loss_first"]
    assert set(summary["heldout_greedy_accuracy"]) == set(tasks.SKILLS)
    assert path.name == f"warmstart-{TINY.key()}"

    def must_not_build(*_args, **_kwargs):
        raise AssertionError("the cached checkpoint should have been reused")

    assert warm_start(TINY, cache_root=tmp_path, build_model=must_not_build, log=lambda _: None) == path
    model, tok, _ = load_warm_start(path)
    assert sum(p.numel() for p in model.parameters()) == summary["parameters"]
    batch = supervised_batch(tok, tasks.heldout_split(tasks.TaskConfig(heldout_per_group=5)))
    with torch.no_grad():
        assert float(model(**batch).loss) < summary["loss_first"]


def test_key_depends_on_every_setting():
    keys = {TINY.key(), WarmStartConfig().key(), WarmStartConfig(seed=1).key(), WarmStartConfig(lr=2e-3).key()}
    assert len(keys) == 4


def test_bad_settings_and_missing_checkpoint_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="num_heads"):
        WarmStartConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="steps"):
        WarmStartConfig(steps=0)
    with pytest.raises(FileNotFoundError, match="not a warm-start checkpoint"):
        load_warm_start(tmp_path)
