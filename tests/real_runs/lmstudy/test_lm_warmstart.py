"""Warm start: the loss falls on a tiny budget with the trainer's model code; the cache is reused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from real_runs.lmstudy import tasks
from real_runs.lmstudy.tokenizer import build_tokenizer
from real_runs.lmstudy.warmstart import (WarmStartConfig, load_warm_start, supervised_batch,
                                         warm_start, with_slips)

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
    keys = {TINY.key(), WarmStartConfig().key(), WarmStartConfig(seed=1).key(), WarmStartConfig(lr=2e-3).key(),
            WarmStartConfig(slip_rate=0.3).key(), WarmStartConfig(slip_rate=0.2).key()}
    assert len(keys) == 6


def test_clean_key_is_unchanged_by_the_slip_setting():
    """A clean warm start keeps the key it had before slip_rate existed (its cache stays valid)."""
    import dataclasses
    import hashlib

    from real_runs.lmstudy.warmstart import FORMAT

    fields = {k: v for k, v in dataclasses.asdict(WarmStartConfig()).items() if k != "slip_rate"}
    blob = json.dumps({"format": FORMAT, **fields}, sort_keys=True)
    assert WarmStartConfig().key() == hashlib.sha256(blob.encode()).hexdigest()[:12]


def test_with_slips_replaces_exactly_the_flagged_answers():
    problems = tasks.sample_supervised(np.random.default_rng(3), 400, set())
    flags = np.random.default_rng(4).random(len(problems)) < 0.3
    out = with_slips(problems, flags)
    for p, q, flag in zip(problems, out, flags):
        assert q.problem == p.problem and q.id == p.id
        assert q.answer == (tasks.slipped_answer(p) if flag else p.answer)
    wrong = [q.answer != p.answer for p, q in zip(problems, out)]
    assert 0.15 < np.mean(wrong) <= np.mean(flags)  # a slip can coincide with the right answer


def test_bad_settings_and_missing_checkpoint_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="num_heads"):
        WarmStartConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="steps"):
        WarmStartConfig(steps=0)
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="slip_rate"):
            WarmStartConfig(slip_rate=bad)
    with pytest.raises(FileNotFoundError, match="not a warm-start checkpoint"):
        load_warm_start(tmp_path)
