"""Replays of the three training loops, hashed: the simulator (simulators/loop.py), ``gdro train``'s
step loop (real_runs/train.py) and the verl plugin's controller (real_runs/verl/controller.py).

Each loop runs a few hundred steps per method (the trainer fewer: a tiny model behind a stand-in
engine and reward, its PPO update skipped, so only the controllers' path is exercised), under full
and bandit feedback where the allocator has both. Every call of a controller's ``bins``, ``plan``,
``screen``, ``accept``, ``multipliers`` and ``update`` is recorded at the class (so the record does not
depend on where a loop keeps its controllers): the outputs, and after each ``update`` the controller's
whole ``state_dict`` (Prompt-GDRO's and Rollout-GDRO's logit tables, RNG included). So are every step
record (with ``signal`` and ``score`` per bin in a stream of their own), the scaled advantages (the
plugin) and the state each loop saves (its on-disk format). The hashes must equal those recorded in
``tests/fixtures/loop_replay.json``.

Hashes are of exact float bits: a machine whose numpy computes differently (another numpy, other
SIMD paths) cannot compare them, so each section holds one recording per machine (its environment:
numpy's version, the architecture and a digest of the CPU features numpy uses) and a machine with
none is skipped with that reason. To record a section: ``GDRO_REPLAY_RECORD=1 pytest
tests/gdro_lab/test_loop_replay.py`` (the plugin's section in the verl venv). To add a machine,
record at the commit that made the others (``git log -1 tests/fixtures/loop_replay.json``) in a git
worktree with ``GDRO_REPLAY_RECORD=add`` and copy that fixture back: the new machine then checks
every later commit against the same code (see check_section).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import struct
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pytest

from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.runformat.runlog import encode_state

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "loop_replay.json"
RECORD = os.environ.get("GDRO_REPLAY_RECORD", "")
"""``1``: record whole sections; a stream's name (e.g. ``record.signal_score``): update that stream only,
after checking that every other one is unchanged (a deliberate change of one logged field)."""
CALLS = ("bins", "plan", "screen", "accept", "multipliers", "update")
SIGNAL_ROWS = ("signal", "score")


# ----------------------------------------------------------------------------- hashing

def feed(sink: Any, value: Any) -> None:
    """Feed ``value``'s exact content to a hash: floats by their bits, arrays as float64 / int64 / bool
    bytes with their shape (the dtype's width does not matter, the values do), mappings by sorted key."""
    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
        if kind not in "biuf":
            feed(sink, value.tolist())
            return
        canon = value.astype(np.float64 if kind == "f" else bool if kind == "b" else np.int64, copy=False)
        sink.update(b"a" + kind.replace("u", "i").encode() + repr(value.shape).encode())
        sink.update(np.ascontiguousarray(canon).tobytes())
    elif isinstance(value, (dict, Mapping)):
        keys = sorted(value, key=str)
        if keys and all(type(value[key]) is float for key in keys):  # a record's scalars: one update
            sink.update(b"D" + "\x00".join(map(str, keys)).encode()
                        + struct.pack(f"<{len(keys)}d", *[value[key] for key in keys]))
            return
        sink.update(b"{%d" % len(value))
        for key in keys:
            sink.update(str(key).encode() + b":")
            feed(sink, value[key])
    elif isinstance(value, (list, tuple)):
        if value and all(type(item) is str for item in value):
            sink.update(b"S%d:" % len(value) + "\x00".join(value).encode())
        elif value and all(type(item) is float for item in value):
            sink.update(b"F%d:" % len(value) + struct.pack(f"<{len(value)}d", *value))
        else:
            sink.update(b"[%d" % len(value))
            for item in value:
                feed(sink, item)
    elif isinstance(value, (bool, np.bool_)):
        sink.update(b"T" if value else b"F")
    elif isinstance(value, (int, np.integer)):
        sink.update(b"i%d;" % int(value))
    elif isinstance(value, (float, np.floating)):
        sink.update(b"f" + struct.pack("<d", float(value)))
    elif isinstance(value, str):
        sink.update(b"s%d:" % len(value) + value.encode())
    elif value is None:
        sink.update(b"N")
    else:
        feed(sink, np.asarray(value))


class Recorder:
    """Named streams of hashed values: ``{stream: "count:sha256 prefix"}``."""

    def __init__(self) -> None:
        self.hashes: dict[str, Any] = {}
        self.counts: Counter[str] = Counter()
        self.depth: Counter[tuple[int, str]] = Counter()

    def add(self, stream: str, value: Any) -> None:
        if stream not in self.hashes:
            self.hashes[stream] = hashlib.sha256()
        feed(self.hashes[stream], value)
        self.counts[stream] += 1

    def add_record(self, stream: str, scalars: dict, rows: dict) -> None:
        """A step record; ``signal`` and ``score`` per bin go to ``<stream>.signal_score``."""
        self.add(stream, {"scalars": scalars, "rows": {k: v for k, v in rows.items() if k not in SIGNAL_ROWS}})
        self.add(f"{stream}.signal_score", {k: rows[k] for k in SIGNAL_ROWS if k in rows})

    def digest(self) -> dict[str, str]:
        return {k: f"{self.counts[k]}:{h.hexdigest()[:20]}" for k, h in sorted(self.hashes.items())}


def instrument(monkeypatch: pytest.MonkeyPatch, recorder: Recorder, classes: Iterable[type]) -> None:
    """Wrap the controller calls of ``classes`` where they are defined, recording into ``recorder``."""
    done: set[tuple[type, str]] = set()
    for cls in classes:
        for name in CALLS:
            owner = next((k for k in cls.__mro__ if name in vars(k)), None)
            if owner is None or (owner, name) in done:
                continue
            done.add((owner, name))
            monkeypatch.setattr(owner, name, _wrapped(vars(owner)[name], name, recorder))


def _wrapped(original: Any, name: str, recorder: Recorder) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = (id(self), name)  # a subclass's call through super() is recorded once, when the outer one returns
        recorder.depth[key] += 1
        try:
            out = original(self, *args, **kwargs)
        finally:
            recorder.depth[key] -= 1
        if recorder.depth[key]:
            return out
        stream = f"{type(self).__name__}.{name}"
        recorder.add(stream, out)
        if name == "update":
            recorder.add(f"{type(self).__name__}.state", self.state_dict())
        return out
    return call


def environment() -> str:
    """What exact float bits depend on: numpy's version, the machine and the SIMD paths it uses."""
    from numpy._core._multiarray_umath import __cpu_features__ as features

    simd = hashlib.sha256(",".join(sorted(k for k, v in features.items() if v)).encode()).hexdigest()[:12]
    return f"numpy {np.__version__}, {platform.machine()}, cpu features {simd}"


def recordings(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A section's recordings: its first machine's, then those under ``more`` (one per machine)."""
    return [{"environment": entry["environment"], "runs": entry["runs"]}, *entry.get("more", [])]


def section_entry(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The stored form of a section's recordings (the first machine's at the top, the others under ``more``)."""
    first, *others = found
    return {**first, "more": others} if others else dict(first)


def check_section(section: str, runs: dict[str, dict[str, str]]) -> None:
    """Compare ``runs`` with the fixture's recording for this machine (or, recording, write it).

    ``GDRO_REPLAY_RECORD=1`` records this machine's section and drops the other machines' recordings
    (a deliberate change of the loops invalidates them); ``=add`` adds this machine's recording
    beside the others (run it at the commit that recorded them, e.g. in a git worktree, so that all
    recordings are of the same code); ``=<stream>`` updates that stream alone on this machine after
    checking every other stream, and drops the other machines' recordings."""
    stored = json.loads(FIXTURE.read_text(encoding="utf-8")) if FIXTURE.exists() else {}
    mine = {"environment": environment(), "runs": runs}
    if RECORD in ("1", "add"):
        kept = [r for r in recordings(stored[section]) if r["environment"] != mine["environment"]] \
            if RECORD == "add" and section in stored else []
        stored[section] = section_entry([*kept, mine])
        FIXTURE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    if section not in stored:
        pytest.fail(f"{FIXTURE.name} has no {section!r} section: record it (GDRO_REPLAY_RECORD=1)")
    found = recordings(stored[section])
    expected = next((r for r in found if r["environment"] == mine["environment"]), None)
    if expected is None:
        machines = "; ".join(r["environment"] for r in found)
        pytest.skip(f"{section} replay recorded under {machines}, this is {environment()}")
    assert sorted(runs) == sorted(expected["runs"])
    changed = {f"{run}: {stream}" for run, streams in runs.items()
               for stream in set(streams) | set(expected["runs"][run])
               if streams.get(stream) != expected["runs"][run].get(stream) and stream != RECORD}
    if RECORD and not changed:
        for run, streams in runs.items():
            expected["runs"][run][RECORD] = streams[RECORD]
        stored[section] = section_entry([expected])
        FIXTURE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert not changed, f"{len(changed)} stream(s) differ from the recorded replay: " + ", ".join(sorted(changed))


# ----------------------------------------------------------------------------- the simulator

SIM_STEPS = 200
SIM_EXTRA: dict[str, tuple[str, dict[str, Any]]] = {
    "rollout_gdro/bandit": ("rollout_gdro", {"allocator": {"feedback": "bandit"}}),
    "joint/bandit": ("joint", {"allocator": {"feedback": "bandit"}}),
    "prompt_gdro/surrogate": ("prompt_gdro", {"weighter": {"signal": "surrogate"}, "ppo_minibatches": 2})}


def sim_runs() -> dict[str, tuple[str, dict[str, Any]]]:
    from gdro_lab.methods import METHODS

    runs: dict[str, tuple[str, dict[str, Any]]] = {f"{m}/full": (m, {}) for m in METHODS}
    runs.update(SIM_EXTRA)
    return runs


def test_simulator_replays_bit_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every simulator method (the arena's allocators and selectors and the references included),
    200 steps each on a small world: controller calls, step records, evaluations and the final
    snapshot state hash as recorded."""
    from simulators.loop import Simulation
    from simulators.simulator_config import SimConfig
    from simulators.simulator_methods import LOCAL_CONTROLLERS
    from simulators.world import WorldConfig

    classes = [c for family in REGISTRY.values() for c in family.values()]
    classes += [c for family in LOCAL_CONTROLLERS.values() for c in family.values()]
    world = WorldConfig(num_prompts=300, num_groups=6)
    out = {}
    for run, (method, extra) in sim_runs().items():
        recorder = Recorder()
        with monkeypatch.context() as patch:
            instrument(patch, recorder, classes)
            sim = Simulation(SimConfig(method=method, steps=SIM_STEPS, batch=16, world=world, **extra))
            for t in range(SIM_STEPS):
                result = sim.step()
                assert result is not None
                recorder.add_record("record", *result)
                if (t + 1) % 50 == 0:
                    recorder.add("eval", sim.evaluate())
            recorder.add("saved_state", json.dumps(encode_state(sim.state_dict())))
        out[run] = recorder.digest()
    check_section("simulator", out)


# ----------------------------------------------------------------------------- gdro train

TRAIN_STEPS = 60
TRAIN_RUNS: dict[str, tuple[str, ...]] = {
    "grpo": ("method.name=grpo",),
    "prompt_gdro": ("method.name=prompt_gdro",),
    "prompt_gdro/mean1": ("method.name=prompt_gdro", 'method.weighter_config.weight_mode="mean1"'),
    "rollout_gdro": ("method.name=rollout_gdro",),
    "rollout_gdro/bandit": ("method.name=rollout_gdro", 'method.allocator_config.feedback="bandit"'),
    "joint": ("method.name=joint",),
    "joint/bandit": ("method.name=joint", 'method.allocator_config.feedback="bandit"'),
    "joint/bayes": ("method.name=joint", "method.classifier=bayes"),
    "knapsack": ("method.name=custom", "method.weighter=uniform", "method.allocator=knapsack"),
    "vip": ("method.name=custom", "method.weighter=uniform", "method.allocator=vip"),
    "duet": ("method.name=custom", "method.weighter=uniform", "method.allocator=duet"),
    "gdro_prompt": ("method.name=custom", "method.weighter=uniform", "method.allocator=gdro_prompt"),
    "sqrt": ("method.name=custom", "method.weighter=gdro", "method.allocator=sqrt"),
    "dynamic_sampling": ("method.name=grpo", "method.selector=dynamic_sampling"),
    "greso": ("method.name=rollout_gdro", "method.selector=greso"),
}
NUM_RECORDS = 48


class StandInEngine:
    """Two fixed tokens per response, instantly (the controllers' path needs no real generation)."""

    def generate(self, prompts: Any, counts_P: np.ndarray, sampling: Any) -> Any:
        from real_runs.types import Rollouts

        total = int(np.sum(counts_P))
        return Rollouts(np.asarray(counts_P), [[1, 2, 3] for _ in prompts], [[4, 5] for _ in range(total)],
                        [np.zeros(2, np.float32) for _ in range(total)], [""] * total, ["stop"] * total)

    def load_weights(self, state_dict: Any) -> None:
        pass


class OddsReward:
    """+1 with probability p(answer), from its own seeded RNG: a world with spread difficulties."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(5)
        self.p = (np.arange(NUM_RECORDS) * 0.6180339887) % 1.0

    def score(self, responses: Any, answers: Any) -> Any:
        from real_runs.types import RewardResult

        success = self.rng.random(len(responses)) < self.p[np.asarray(answers, int)]
        return RewardResult(np.where(success, 1.0, -1.0), success, {})


def test_trainer_replays_bit_identically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gdro train's _loop for every method it supports (the paper's four, bandit feedback, the
    arena's allocators and selectors, the bayes classifier): controller calls, step records
    (timings left out), the snapshots and the last checkpoint's controllers.json hash as recorded."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from real_runs import ppo, train
    from real_runs.config import load_config
    from real_runs.models import load_policy
    from real_runs.types import Problem

    torch.set_num_threads(1)
    records = [Problem(f"toy:train:{i}", f"Say {i}.", str(i), "toy", "toy") for i in range(NUM_RECORDS)]
    classes = [c for family in REGISTRY.values() for c in family.values()]
    model, tokenizer = load_policy("tiny", seed=0)
    monkeypatch.setattr(ppo, "ppo_update", lambda *args, **kwargs: ({}, [0.0], [0.0], []))
    monkeypatch.setattr(ppo, "recompute_logprobs", lambda *args, **kwargs: [])
    out = {}
    for run, overrides in TRAIN_RUNS.items():
        name = run.replace("/", "-")
        cfg = load_config("tiny-cpu", [f"train.out={json.dumps(str(tmp_path))}", f"train.run_name={name}",
                                       "train.progress=false", "eval.every=0", f"train.steps={TRAIN_STEPS}",
                                       "train.prompts_per_step=8", "train.mini_batches=1", "train.save_every=30",
                                       "loss.kl_coef=0", "method.n_max=8", *overrides])
        recorder = Recorder()
        with monkeypatch.context() as patch:
            instrument(patch, recorder, classes)
            run_dir = train.main(cfg, model=model, tokenizer=tokenizer, train_records=records, reward=OddsReward(),
                                 engine=StandInEngine())
        for line in (run_dir / "steps.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            scalars = {k: v for k, v in row["scalars"].items() if not k.startswith(("time/", "perf/"))}
            recorder.add_record("record", scalars, row.get("bins", {}))
        for snapshot in sorted((run_dir / "snapshots").glob("*.json")):
            recorder.add("snapshot", snapshot.read_text(encoding="utf-8"))
        last = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
        recorder.add("controllers.json", (last / "controllers.json").read_text(encoding="utf-8"))
        out[run] = recorder.digest()
    check_section("trainer", out)


# ----------------------------------------------------------------------------- the verl plugin

PLUGIN_STEPS = 200
PLUGIN_RUNS: dict[str, dict[str, Any]] = {
    "joint": {},
    "joint/bandit": {"allocator_config": {"feedback": "bandit"}},
    "prompt_gdro": {"allocator": "uniform"},
    "rollout_gdro": {"weighter": "uniform"},
    "grpo": {"weighter": "uniform", "allocator": "uniform"},
    "joint/bayes": {"classifier": "bayes", "classifier_config": {}},
    "knapsack": {"weighter": "uniform", "allocator": "knapsack"},
    "vip": {"weighter": "uniform", "allocator": "vip"},
    "gdro_prompt": {"weighter": "uniform", "allocator": "gdro_prompt"},
    "sqrt": {"allocator": "sqrt"},
    "dynamic_sampling": {"weighter": "uniform", "allocator": "uniform", "selector": "dynamic_sampling"},
    "greso": {"selector": "greso"},
}


def test_verl_plugin_replays_bit_identically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's GDROController on DataProto batches of a toy world (12 candidate prompts of
    which 8 are generated, rows shuffled as verl's balancing does): plans, scaled advantages, the
    trained rows, the tracker metrics, the run directory's records (time left out) and the
    controller file's state hash as recorded."""
    pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs this)")
    import torch
    from verl import DataProto

    from real_runs.verl import batch as vb
    from real_runs.verl.controller import GDROController, GDROSettings

    classes = [c for family in REGISTRY.values() for c in family.values()]
    success = (np.arange(40) * 0.6180339887) % 1.0
    out = {}
    for run, values in PLUGIN_RUNS.items():
        settings = GDROSettings.from_mapping({"classifier_config": {"edges": [0.3, 0.7], "window": 4}, "seed": 3,
                                              "run_dir": str(tmp_path / run.replace("/", "-")), **values})
        recorder = Recorder()
        rng = np.random.default_rng(11)
        with monkeypatch.context() as patch:
            instrument(patch, recorder, classes)
            controller = GDROController(settings, 4, {"toy": True}, batch_size=8)
            controller.open_run()
            for step in range(1, PLUGIN_STEPS + 1):
                rows = rng.choice(success.size, size=12, replace=False)
                ids = [f"toy:train:{k}" for k in rows]
                data = DataProto.from_single_dict({
                    "prompt_row": torch.arange(len(ids)),
                    "extra_info": np.array([{"index": i} for i in ids], dtype=object),
                    "uid": np.array([f"u{step}-{r}" for r in range(len(ids))], dtype=object)})
                counts = controller.plan(ids)
                recorder.add("plan", counts)
                expanded = vb.expand(data, counts)
                prompt_rows = rows[expanded.batch["prompt_row"].numpy()]
                scores = np.where(rng.random(len(expanded)) < success[prompt_rows], 1.0, -1.0)
                length = rng.integers(1, 4, size=len(expanded))
                mask = (torch.arange(3)[None, :] < torch.as_tensor(length)[:, None]).float()
                level = torch.zeros(len(expanded), 3)
                level[torch.arange(len(expanded)), torch.as_tensor(length - 1)] = torch.as_tensor(scores).float()
                expanded.batch["response_mask"] = mask
                expanded.batch["token_level_scores"] = level
                expanded.batch["advantages"] = level * 0.5 + mask
                expanded = expanded.select_idxs(rng.permutation(len(expanded)))
                metrics = controller.observe(expanded, step)
                recorder.add("metrics", {k: v for k, v in metrics.items() if "time/" not in k})
                recorder.add("advantages", expanded.batch["advantages"].double().numpy())
                recorder.add("trained_rows", controller._train_rows)
            recorder.add("saved_state", json.dumps(encode_state(controller.state_dict())))
            controller.close()
        for line in (tmp_path / run.replace("/", "-") / "steps.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            recorder.add_record("record", {k: v for k, v in row["scalars"].items() if not k.startswith("time/")},
                                row.get("bins", {}))
        out[run] = recorder.digest()
    check_section("verl_plugin", out)
