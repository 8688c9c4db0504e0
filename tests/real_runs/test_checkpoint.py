"""Checkpoints: a round trip restores everything; SIGKILL mid-step + --resume = an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gdro_lab import build  # noqa: E402
from real_runs import checkpoint as ckpt  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class Counter:
    def __init__(self, value: int = 0):
        self.value = value

    def state_dict(self):
        return {"value": self.value, "array": np.arange(3) * self.value}

    def load_state_dict(self, state):
        self.value = int(state["value"])


def _parts(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 5))
    controllers = {"allocator": build("allocator", "gdro", {"num_bins": 3, "n_max": 6}, seed=seed),
                   "data_order": Counter()}
    return model, optimizer, scheduler, controllers


def _train_one(model, optimizer, scheduler):
    optimizer.zero_grad()
    loss = model(torch.randn(4, 3)).square().sum()
    loss.backward()
    optimizer.step()
    scheduler.step()


def test_round_trip_restores_model_optimizer_scheduler_controllers_and_rngs(tmp_path: Path):
    model, optimizer, scheduler, controllers = _parts()
    _train_one(model, optimizer, scheduler)
    controllers["data_order"].value = 7
    controllers["allocator"].rng.random(5)
    ckpt.save_checkpoint(tmp_path, 3, model=model, optimizer=optimizer, scheduler=scheduler,
                         controllers=controllers, data_state={"position": 12})
    draws = (random.random(), np.random.rand(), torch.rand(1).item(), controllers["allocator"].rng.random())
    _train_one(model, optimizer, scheduler)           # the uninterrupted continuation
    want = [p.detach().clone() for p in model.parameters()]

    model2, optimizer2, scheduler2, controllers2 = _parts(seed=99)   # a fresh process, other seeds
    step, data = ckpt.load_checkpoint(tmp_path, model=model2, optimizer=optimizer2, scheduler=scheduler2,
                                      controllers=controllers2)
    assert (step, data, controllers2["data_order"].value) == (3, {"position": 12}, 7)
    assert (random.random(), np.random.rand(), torch.rand(1).item(), controllers2["allocator"].rng.random()) == draws
    assert scheduler2.last_epoch == scheduler.last_epoch - 1
    _train_one(model2, optimizer2, scheduler2)        # same RNG -> same batch, same Adam state -> same step
    for a, b in zip(model2.parameters(), want):
        assert torch.equal(a, b)


def test_keep_last_and_torn_saves(tmp_path: Path):
    model, optimizer, scheduler, controllers = _parts()
    for step in (1, 2, 3, 4):
        ckpt.save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, scheduler=scheduler,
                             controllers=controllers, data_state={}, keep_last=2)
    assert ckpt.checkpoint_steps(tmp_path) == [3, 4]
    torn = tmp_path / "checkpoints" / ".tmp-step_00000005"   # a save killed half-way
    torn.mkdir()
    (torn / "model.pt").write_bytes(b"partial")
    assert ckpt.checkpoint_steps(tmp_path) == [3, 4]
    step, _ = ckpt.load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler,
                                   controllers=controllers)
    assert step == 4
    ckpt.save_checkpoint(tmp_path, 5, model=model, optimizer=optimizer, scheduler=scheduler,
                         controllers=controllers, data_state={}, keep_last=2)
    assert ckpt.checkpoint_steps(tmp_path) == [4, 5] and not torn.exists()


def test_unreadable_or_missing_checkpoints_are_one_line_errors(tmp_path: Path):
    model, optimizer, scheduler, controllers = _parts()
    with pytest.raises(ckpt.CheckpointError, match="no complete checkpoint"):
        ckpt.load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, controllers=controllers)
    path = ckpt.save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, scheduler=scheduler,
                                controllers=controllers, data_state={})
    (path / "model.pt").write_bytes(b"garbage")
    with pytest.raises(ckpt.CheckpointError, match="unreadable") as info:
        ckpt.load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, controllers=controllers)
    assert "\n" not in str(info.value)


def test_keep_optimizer_last_keeps_older_checkpoints_model_only(tmp_path: Path):
    """train.keep_optimizer_last=1: older kept checkpoints lose optimizer.pt (2x the model) and are
    no longer resumable; the newest one is, and a resume picks it."""
    model, optimizer, scheduler, controllers = _parts()
    for step in (1, 2, 3):
        _train_one(model, optimizer, scheduler)
        ckpt.save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, scheduler=scheduler,
                             controllers=controllers, data_state={}, keep_last=3, keep_optimizer_last=1)
    folders = {s: ckpt.step_folder(tmp_path, s) for s in (1, 2, 3)}
    assert ckpt.checkpoint_steps(tmp_path) == [1, 2, 3] and ckpt.resumable_steps(tmp_path) == [3]
    assert [(folders[s] / "optimizer.pt").exists() for s in (1, 2, 3)] == [False, False, True]
    assert all((folders[s] / "model.pt").exists() for s in (1, 2, 3))
    step, _ = ckpt.load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler,
                                   controllers=controllers)
    assert step == 3
    everything = tmp_path / "all"
    for step in (1, 2):
        ckpt.save_checkpoint(everything, step, model=model, optimizer=optimizer, scheduler=scheduler,
                             controllers=controllers, data_state={}, keep_last=3)
    assert ckpt.resumable_steps(everything) == [1, 2]


def test_a_transformers_model_is_checkpointed_as_a_hugging_face_folder(tmp_path: Path):
    """save_pretrained layout (safetensors, config, generation config, tokenizer): the folder loads
    with AutoModelForCausalLM / AutoTokenizer with identical logits, and restore_model puts the
    weights (tied embeddings included) back into a differently seeded model."""
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from real_runs.models import load_policy
    model, tokenizer = load_policy("tiny", seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    model.gradient_checkpointing_enable()   # training switches use_cache off; the saved config must not
    path = ckpt.save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, scheduler=scheduler,
                                controllers={}, data_state={}, tokenizer=tokenizer)
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "optimizer.pt",
            "trainer.pt", "controllers.json"} <= names and "model.pt" not in names
    assert json.loads((path / "config.json").read_text())["use_cache"] is True
    ids = torch.tensor([tokenizer("Solve 1 + 1.")["input_ids"]])
    loaded = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model.eval()(ids).logits)
    assert AutoTokenizer.from_pretrained(path)("Solve 1 + 1.")["input_ids"] == ids[0].tolist()
    other, _ = load_policy("tiny", seed=7)
    ckpt.restore_model(other, path)
    for (name, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), name
    assert other.lm_head.weight.data_ptr() == other.model.embed_tokens.weight.data_ptr()   # still tied
    wrong, _ = load_policy("tiny-rehearsal")
    with pytest.raises(ckpt.CheckpointError, match="does not fit the model"):
        ckpt.restore_model(wrong, path)


# ----------------------------------------------------------------------------- kill and resume

ARGS = ["train", "tiny-cpu", "train.steps=6", "train.save_every=2", "data.limit=8", "eval.every=3",
        "eval.limit=2", "train.deterministic=true", "train.progress=false", "method.name=joint",
        "train.run_name=run"]
VOLATILE = ("time/", "perf/")


def _gdro(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "gdro_cli.main", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _records(run_dir: Path, name: str) -> list[dict]:
    out = []
    for line in (run_dir / name).read_text().splitlines():
        record = json.loads(line)
        for part in ("scalars", "metrics"):   # evaluations carry time/eval too (one vocabulary with gdro eval)
            if part in record:
                record[part] = {k: v for k, v in record[part].items() if not k.startswith(VOLATILE)}
        out.append(record)
    return out


@pytest.mark.slow
def test_sigkill_mid_step_then_resume_matches_an_uninterrupted_run(tmp_path: Path):
    full = _gdro(ARGS + [f"--out={tmp_path / 'full'}"])
    killed = _gdro(ARGS + [f"--out={tmp_path / 'killed'}"])
    steps_file = tmp_path / "killed" / "run" / "steps.jsonl"
    deadline = time.monotonic() + 1800   # a hang guard: the wait is for step 3's record, however long it takes
    while time.monotonic() < deadline and killed.poll() is None:
        if steps_file.exists() and len(steps_file.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    assert killed.poll() is None, killed.communicate()[1][-2000:]
    assert len(steps_file.read_text().splitlines()) >= 3, "no third step within the hang guard"
    time.sleep(0.3)   # about step 4 (after step 3's eval and log; step 3, the first evaluation, is kept as the best)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert json.loads((tmp_path / "killed" / "run" / "meta.json").read_text())["status"] == "running"
    assert ckpt.checkpoint_steps(tmp_path / "killed" / "run")[-1] in (2, 3, 4)   # step 3's is written after its log
    resumed = _gdro(["train", "--resume", str(tmp_path / "killed" / "run")])
    _, err = resumed.communicate(timeout=1800)
    assert resumed.returncode == 0, err[-2000:]
    _, err = full.communicate(timeout=1800)
    assert full.returncode == 0, err[-2000:]
    want_steps = _records(tmp_path / "full" / "run", "steps.jsonl")
    got_steps = _records(tmp_path / "killed" / "run", "steps.jsonl")
    assert [r["step"] for r in got_steps] == [1, 2, 3, 4, 5, 6]   # no gap, no duplicate
    assert got_steps == want_steps
    assert _records(tmp_path / "killed" / "run", "eval.jsonl") == _records(tmp_path / "full" / "run", "eval.jsonl")
    a = ckpt.read_model_state(tmp_path / "full" / "run" / "checkpoints" / "step_00000006")
    b = ckpt.read_model_state(tmp_path / "killed" / "run" / "checkpoints" / "step_00000006")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
