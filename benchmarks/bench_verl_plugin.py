"""Cost of the GDRO verl plugin per step (verl venv only), in two modes.

    OMP_NUM_THREADS=1 .venv-verl/bin/python benchmarks/bench_verl_plugin.py [--prompts 512] [--n 4] [--steps 30]

Driver side, on real DataProto batches. Times, per step: plan (classifier bins + allocator plan, ids
read from extra_info), the planned expansion of the prompt batch (sample_level_repeat), verl's own
GRPO advantage on the expanded batch (for scale), and observe (feedback from the reordered batch,
three controller updates, advantage scaling, step record). Prints a markdown table of medians and
p90 in ms.

    OMP_NUM_THREADS=1 .venv-verl/bin/python benchmarks/bench_verl_plugin.py --fit [--fit-steps 8] [--rounds 1]

Whole steps of verl's real ``fit()`` on CPU (the CPU launcher's setup: 2 FSDP2 ranks over gloo, the
``hf_cpu`` rollout, the smoke's tiny model and toy data, full determinism), one launch per arm, back
to back in one run, ``--rounds`` times in turn: ``verl`` (verl's own ``RayPPOTrainer``, GRPO),
``plugin-uniform`` (``GDRORayPPOTrainer`` with uniform allocator and weighter: the plugin's whole
path, while every prompt gets rollout.n rollouts and multiplier 1, so with the same seed it
generates and trains on exactly what verl does) and ``plugin-gdro`` (Prompt-GDRO + Rollout-GDRO, the
smoke's settings: ragged counts, other rollouts). Per step: the wall time between the starts of
consecutive steps (``cycle``, everything the loop does), verl's own ``timing_s/*`` from its file
logger (``timing_s/step`` does not contain the plan, which runs before verl's step timer), and the
plugin's ``plan`` and ``observe``. The first step of each launch is left out (warm-up). Prints a
markdown table of medians, the ratios to ``verl``, and the load average around each launch.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "real_runs" / "verl"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--fit", action="store_true", help="whole fit() steps: plain verl against the plugin")
    parser.add_argument("--fit-steps", type=int, default=8, help="steps per launch (--fit)")
    parser.add_argument("--rounds", type=int, default=1, help="launches per arm, in turn (--fit)")
    parser.add_argument("--arms", default=",".join(FIT_ARMS), help="comma-separated (--fit)")
    parser.add_argument("--out", default=None, help="keep the launches' files here (--fit)")
    parser.add_argument("--child", nargs=3, metavar=("ARM", "DIR", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return fit_child(args.child[0], Path(args.child[1]), int(args.child[2]))
    if args.fit:
        return fit_benchmark(args.arms.split(","), args.fit_steps, args.rounds, args.out)
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl_helpers import compose_config, prompt_batch, with_rewards

    from real_runs.verl import batch as vb
    from real_runs.verl.trainer import controller_from_config

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_config([f"actor_rollout_ref.rollout.n={args.n}", f"data.train_batch_size={args.prompts}",
                              f"gdro.run_dir={tmp}/run"])
        ctrl = controller_from_config(cfg)
        ctrl.open_run()
        pool = np.arange(4 * args.prompts)
        success = np.random.default_rng(0).beta(0.6, 0.6, size=pool.size)
        times: dict[str, list[float]] = {"plan": [], "expand": [], "verl grpo advantage": [], "observe": []}
        for step in range(1, args.steps + 1):
            rng = np.random.default_rng(step)
            rows = rng.choice(pool, size=args.prompts, replace=False)
            batch = prompt_batch([f"dapo:train:{k}" for k in rows], seed=step)
            t0 = time.perf_counter()
            counts = ctrl.plan(vb.prompt_ids(batch))
            t1 = time.perf_counter()
            expanded = vb.expand(batch, counts)
            t2 = time.perf_counter()
            scores = np.where(rng.random(len(expanded)) < success[rows[expanded.batch["prompt_row"].numpy()]], 1., -1.)
            with_rewards(expanded, scores, length=8)
            expanded = expanded.select_idxs(rng.permutation(len(expanded)))
            t3 = time.perf_counter()
            adv, _ = compute_grpo_outcome_advantage(expanded.batch["token_level_rewards"],
                                                    expanded.batch["response_mask"], expanded.non_tensor_batch["uid"])
            t4 = time.perf_counter()
            expanded.batch["advantages"] = adv
            t5 = time.perf_counter()
            ctrl.observe(expanded, step)
            t6 = time.perf_counter()
            for key, value in zip(times, (t1 - t0, t2 - t1, t4 - t3, t6 - t5)):
                times[key].append(1e3 * value)
        ctrl.close()
    print(f"| step part ({args.prompts} prompts x n_bar {args.n}, {args.steps} steps) | median ms | p90 ms |")
    print("|---|---:|---:|")
    for key, values in times.items():
        print(f"| {key} | {np.median(values):.2f} | {np.percentile(values, 90):.2f} |")


# ---------------------------------------------------------------------- --fit: whole steps of fit()

FIT_ARMS = ("verl", "plugin-uniform", "plugin-gdro")
ARM_OVERRIDES = {"verl": ["gdro.run_dir=null"],
                 "plugin-uniform": ["gdro.allocator=uniform", "gdro.weighter=uniform"],
                 "plugin-gdro": []}
TIMINGS = ("timing_s/step", "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/adv",
           "timing_s/update_actor", "timing_s/update_weights")


def fit_child(arm: str, folder: Path, steps: int) -> None:
    """One launch (in its own process): verl's fit() on CPU with the arm's trainer, timed per step."""
    from real_runs.verl import cpu, smoke

    cpu.install()
    import ray
    from verl.trainer.main_ppo import run_ppo

    from real_runs.verl.runner import _GDROTaskRunner, check_launch_config

    config = cpu.compose([*cpu.cpu_overrides(2), *smoke.overrides(folder, steps, save_freq=-1, ranks=2),
                          "trainer.resume_mode=disable", "trainer.logger=[console,file]",
                          "actor_rollout_ref.rollout.full_determinism=true", *ARM_OVERRIDES[arm]])
    check_launch_config(config)
    cpu.ray_init(2)
    events = str(folder / "events.jsonl")

    class _Runner(_GDROTaskRunner):
        def trainer_class(self) -> type:
            return _timed_trainer(arm == "verl", events)

    run_ppo(config, task_runner_class=ray.remote(num_cpus=1)(_Runner))


def _timed_trainer(plain: bool, events: str) -> type:
    """verl's RayPPOTrainer (``plain``) or GDRORayPPOTrainer, writing when each step starts and how
    long the plugin's plan and observe take to ``events`` (JSON lines)."""
    import json as json_
    import time as time_
    from types import SimpleNamespace

    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from real_runs.verl.trainer import GDRORayPPOTrainer

    def record(**fields: object) -> None:
        with open(events, "a") as handle:
            handle.write(json_.dumps(fields) + "\n")

    def timed(name: str, function, trainer):  # noqa: ANN001
        def call(*args, **kwargs):  # noqa: ANN002, ANN003
            start = time_.perf_counter()
            result = function(*args, **kwargs)
            record(event=name, step=int(trainer.global_steps), seconds=time_.perf_counter() - start)
            return result
        return call

    class TimedTrainer(RayPPOTrainer if plain else GDRORayPPOTrainer):  # type: ignore[misc]
        def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            if plain:
                self.gdro = SimpleNamespace(close=lambda status: None)  # what the task runner closes
            else:
                self.gdro.plan = timed("plan", self.gdro.plan, self)
                self.gdro.observe = timed("observe", self.gdro.observe, self)

        def _get_gen_batch(self, batch):  # noqa: ANN001
            if not getattr(self, "_gdro_validating", False):
                record(event="step_start", step=int(self.global_steps), time=time_.perf_counter())
            return super()._get_gen_batch(batch)

        def _stop_profiling(self, *args, **kwargs):  # noqa: ANN002, ANN003
            record(event="step_end", step=int(self.global_steps), time=time_.perf_counter())
            return super()._stop_profiling(*args, **kwargs)

    return TimedTrainer


def _launch(arm: str, folder: Path, steps: int) -> dict:
    """Run :func:`fit_child` in a subprocess; per-step figures of the launch (step 1 left out)."""
    import json
    import os
    import subprocess

    from real_runs.verl import smoke

    folder.mkdir(parents=True)
    smoke.prepare(folder)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "VERL_FILE_LOGGER_PATH": str(folder / "tracker.jsonl")}
    load_before = os.getloadavg()
    start = time.perf_counter()
    with open(folder / "log.txt", "w") as log:
        rc = subprocess.run([sys.executable, __file__, "--child", arm, str(folder), str(steps)], cwd=root, env=env,
                            stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - start
    if rc != 0:
        raise SystemExit(f"the {arm} launch failed (exit {rc}): see {folder / 'log.txt'}")
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    starts = {e["step"]: e["time"] for e in events if e["event"] == "step_start"}
    ends = {e["step"]: e["time"] for e in events if e["event"] == "step_end"}
    tracker = {r["step"]: r["data"] for r in map(json.loads, (folder / "tracker.jsonl").read_text().splitlines())}
    kept = [s for s in sorted(starts) if s > 1 and s in ends]
    figures: dict[str, list[float]] = {"cycle": [ends[s] - starts[s] for s in kept]}
    for key in TIMINGS:
        figures[key] = [float(tracker[s][key]) for s in kept if key in tracker.get(s, {})]
    for name in ("plan", "observe"):
        figures[name] = [e["seconds"] for e in events if e["event"] == name and e["step"] in kept]
    figures["response_length/mean"] = [float(tracker[s]["response_length/mean"]) for s in kept]
    return {"figures": figures, "wall": wall, "load": (load_before, os.getloadavg()), "steps": kept}


def fit_benchmark(arms: list[str], steps: int, rounds: int, out: str | None) -> None:
    """Launch every arm ``rounds`` times in turn and print the medians and the ratios to ``verl``."""
    import shutil

    unknown = [arm for arm in arms if arm not in FIT_ARMS]
    if unknown:
        raise SystemExit(f"unknown arm {unknown[0]!r}: choose from {', '.join(FIT_ARMS)}")
    base = Path(out) if out else Path(tempfile.mkdtemp(prefix="bench_verl_fit_"))
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    for round_ in range(rounds):
        for arm in arms:
            result = _launch(arm, base / f"{arm}_{round_}", steps)
            results[arm].append(result)
            load = " -> ".join(f"{a[0]:.1f}" for a in result["load"])
            print(f"{arm} round {round_ + 1}: {result['wall']:.0f} s wall, load average {load}", flush=True)
    merged = {arm: {key: [v for r in runs for v in r["figures"][key]] for key in runs[0]["figures"]}
              for arm, runs in results.items()}
    _print_fit_table(merged, steps, rounds)
    if not out:
        shutil.rmtree(base, ignore_errors=True)


def _print_fit_table(merged: dict[str, dict[str, list[float]]], steps: int, rounds: int) -> None:
    arms = list(merged)
    print(f"\n| median s per step (steps 2..{steps}, {rounds} launch(es) per arm) | " + " | ".join(arms) + " |")
    print("|---|" + "---:|" * len(arms))
    for key in ("cycle", *TIMINGS, "plan", "observe", "response_length/mean"):
        cells = [f"{np.median(merged[a][key]):.4f}" if merged[a][key] else "-" for a in arms]
        print(f"| {key} | " + " | ".join(cells) + " |")
    if "verl" in merged:
        for key in ("cycle", "timing_s/step"):
            ratios = [f"{np.median(merged[a][key]) / np.median(merged['verl'][key]):.3f}" for a in arms]
            print(f"| ratio of {key} to verl | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
