"""`gdro train PRESET --rehearse`: the preset's whole path, on CPU, in minutes, before a GPU is rented.

The preset's own settings through the trainer with only the model and lengths shrunk (:data:`SHRINK`,
printed as a diff), 2 steps (the second a ``--resume``) after :func:`seeded_history`; then it checks
what ran (:func:`gdro_path`, exact budget, every benchmark scored, the checkpoint loads) and prints
phase times, overhead and projected GPU memory. Anything else is a one-line :class:`RehearsalError`
(exit status 2). What is shrunk and why: docs/train-notes.md#real_runs-rehearse.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from gdro_lab.step import MethodStep
from real_runs import memory
from real_runs.progress import phase
from real_runs.config import TrainConfig, config_to_dict, load_config, replace
from real_runs.preflight import model_shape

#: The only settings a rehearsal changes (section -> key -> value); "auto" autocast becomes bf16.
SHRINK: dict[str, dict[str, Any]] = {
    "model": {"name": "tiny-rehearsal"},
    "rollout": {"max_new_tokens": 8, "max_prompt_tokens": 96},
    "eval": {"max_new_tokens": 8, "limit": 2},
    "train": {"steps": 2, "progress": False},
}
#: Synthetic steps of the seeded history (at least enough to visit every prompt once).
HISTORY_STEPS = 50
PHASES = ("plan", "generate", "reward", "controllers", "logprobs", "update", "sync", "record", "step", "eval")


class RehearsalError(ValueError):
    """The preset's path did not run (or ran differently); one line naming what."""


def rehearsal_config(real: TrainConfig, preset: str, keep: Sequence[str] = ()) -> TrainConfig:
    """The preset's config with :data:`SHRINK` applied (and bf16 autocast where it was ``auto``),
    except the ``section.key`` names in ``keep`` (set by the user on the command line)."""
    changes = {section: {k: v for k, v in values.items() if f"{section}.{k}" not in keep}
               for section, values in SHRINK.items()}
    if real.model.autocast == "auto":
        changes["model"]["autocast"] = "bf16"
    name = Path(preset).stem if preset.endswith(".toml") else preset
    changes["train"]["run_name"] = real.train.run_name or f"rehearsal-{name}-{real.method.name}"
    return replace(real, **changes)


def config_diff(a: TrainConfig, b: TrainConfig) -> dict[str, tuple[Any, Any]]:
    """``section.key -> (a's value, b's value)`` for every key that differs."""
    da, db = config_to_dict(a), config_to_dict(b)
    return {f"{s}.{k}": (da[s][k], db[s][k]) for s in da for k in da[s] if da[s][k] != db[s][k]}


def seeded_history(method_step: MethodStep, record_index: np.ndarray, prompts: Any, *, prompts_per_step: int,
                   seed: int, steps: int = HISTORY_STEPS) -> dict[str, int]:
    """Feed the fresh method step ``max(steps, ceil(N / P))`` synthetic steps before step 1.

    Each takes the next P of the N prompts in a seeded cycling order, plans them (MethodStep.plan: bins,
    the allocator's counts, the budget checked), draws response j of prompt i a success with known
    probability p_i = (r_i + 1/2) / N (r a seeded permutation) and observes it (MethodStep.observe: every
    controller's update, the selector's and the multipliers included). Nothing is generated or trained.
    Returns counts: steps, prompts, rollouts, prompts with a bin. Detail: docs/train-notes.md#real_runs-rehearse.
    """
    from real_runs.batching import DataOrder
    ids_N = np.unique(np.asarray(record_index, np.int64))
    rng = np.random.default_rng([seed, 20_601])
    odds_N = (rng.permutation(ids_N.size) + 0.5) / ids_N.size
    steps = max(steps, -(-ids_N.size // prompts_per_step))
    order = DataOrder(ids_N.size, seed + 20_601, shuffle=True)
    rollouts = 0
    for _ in range(steps):
        rows = order.take(prompts_per_step)
        plan = method_step.plan(ids_N[rows])
        successes_R = rng.random(int(plan.counts_P.sum())) < np.repeat(odds_N[rows], plan.counts_P)
        feedback, _, _ = method_step.feedback(plan, np.where(successes_R, 1.0, -1.0), successes_R)
        assert feedback is not None  # no early stopping here: every prompt is scored
        method_step.observe(feedback)
        rollouts += int(plan.counts_P.sum())
    return {"steps": steps, "prompts": int(ids_N.size), "per_step": prompts_per_step, "rollouts": rollouts,
            "assigned": int(np.count_nonzero(method_step.classifier.bins(ids_N) >= 0))}


def gdro_path(run: Any, cfg: TrainConfig, distinct_prompts: int = 0) -> list[str]:
    """Check that each logged step exercised the method's controllers; returns one line per step.

    From steps.jsonl's per-bin ``rollouts`` and ``multiplier``: ``uniform`` allocator/weighter give n_bar
    and 1 everywhere, ``gdro`` ones differ somewhere; other controllers are reported only.
    ``distinct_prompts`` adds a hint when the data set is smaller than a step.
    """
    mc = cfg.method
    _, weighter, allocator = mc.controller_names()
    size = cfg.train.prompts_per_step
    hint = "" if not 0 < distinct_prompts < size else (
        f" (the data set has {distinct_prompts} prompts for {size} per step: each recurs ~{size // distinct_prompts} "
        "times a step, and step 1's outcomes fill its classifier window; rehearse on the full data set, or lower "
        "train.prompts_per_step)")
    lines = []

    def check(condition: bool, message: str) -> None:
        _check(condition, message + hint)

    for t, step in enumerate(run.steps.tolist()):
        prompts, unassigned = int(run.scalars["num_prompts"][t]), int(run.scalars["num_unassigned"][t])
        arms = run.bins["rollouts"][t][np.isfinite(run.bins["rollouts"][t])]
        multipliers = run.bins["multiplier"][t][np.isfinite(run.bins["multiplier"][t])]
        where = f"step {step}"
        if "gdro" in (weighter, allocator):
            check(unassigned < prompts, f"{where}: all {prompts} prompts unassigned (no bin): the GDRO "
                  "controllers never acted")
        if allocator == "uniform":
            check(bool(np.all(arms == mc.n_bar)), f"{where}: rollouts per bin {np.round(arms, 2).tolist()}, "
                  f"not n_bar = {mc.n_bar} for all (allocator uniform)")
        elif allocator == "gdro":
            check(arms.size > 0 and arms.min() < mc.n_bar < arms.max(),
                  f"{where}: rollouts per bin {np.round(arms, 2).tolist()}: Rollout-GDRO's plan is not "
                  f"ragged around n_bar = {mc.n_bar}")
        if weighter == "uniform":
            check(bool(np.all(multipliers == 1.0)), f"{where}: multipliers per bin "
                  f"{np.round(multipliers, 3).tolist()}, not 1 (weighter uniform)")
        elif weighter == "gdro":
            check(bool(np.any(multipliers != 1.0)), f"{where}: every Prompt-GDRO multiplier is 1")
        arm_text = f"{arms.min():.2f}..{arms.max():.2f}" if arms.size else "-"
        mult_text = f"{multipliers.min():.3f}..{multipliers.max():.3f}" if multipliers.size else "-"
        lines.append(f"{where}: {prompts - unassigned} of {prompts} prompts in a bin, rollouts per bin (mean) "
                     f"{arm_text} around n_bar {mc.n_bar}, multipliers per bin {mult_text} "
                     f"(weighter {weighter}, allocator {allocator})")
    return lines


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RehearsalError(f"rehearsal: {message}")


def verify(run_dir: Path, cfg: TrainConfig) -> list[str]:
    """Check the rehearsal ran the preset's path; returns the lines of what was verified."""
    import torch

    from gdro_lab.runformat.runlog import read_run
    from real_runs.checkpoint import checkpoint_steps, step_folder
    run = read_run(run_dir)
    tc, mc, ec = cfg.train, cfg.method, cfg.eval
    _check(run.meta["status"] == "finished", f"the run ended with status {run.meta['status']!r}")
    _check(run.steps.tolist() == list(range(1, tc.steps + 1)), f"steps logged {run.steps.tolist()}, not 1..{tc.steps}")
    budget = tc.prompts_per_step * mc.n_bar
    _check(bool(np.all(run.scalars["total_rollouts"] == budget)), f"rollouts per step {run.scalars['total_rollouts']}, "
           f"not {budget}")
    arms = run.bins["rollouts"][np.isfinite(run.bins["rollouts"])]   # prompts in a bin (the rest get n_bar)
    arms = np.append(arms, mc.n_bar) if np.any(run.scalars["num_unassigned"] > 0) else arms
    _check(arms.min() >= mc.n_min and arms.max() <= mc.n_max, f"rollouts per bin {sorted(set(arms))} outside "
           f"the arms {mc.n_min}..{mc.n_max}")
    data = json.loads((run_dir / "data.json").read_text(encoding="utf-8")) if (run_dir / "data.json").exists() else {}
    path_lines = gdro_path(run, cfg, int(data.get("prompts", 0)))
    _check([e["step"] for e in run.evals] == [tc.steps], f"evaluations at steps {[e['step'] for e in run.evals]}")
    scored = run.evals[-1]["metrics"]
    missing = [b for b in ec.benchmarks if not isinstance(scored.get(f"{b}/mean@{ec.k}"), (int, float))
               or not np.isfinite(scored[f"{b}/mean@{ec.k}"])]
    _check(not missing, f"benchmark(s) not scored at k={ec.k}: {', '.join(missing)}")
    _check(scored["eval/samples"] == scored["pooled/num_prompts"] * ec.k, "evaluation samples != prompts x k")
    steps = checkpoint_steps(run_dir)
    _check(steps[-1] == tc.steps and 1 in steps, f"checkpoints at steps {steps}, not 1 and {tc.steps}")
    final = step_folder(run_dir, tc.steps)
    adam = torch.load(final / "optimizer.pt", map_location="cpu", weights_only=True)["state"]
    optimizer_steps = int(next(iter(adam.values()))["step"])
    _check(optimizer_steps == tc.steps * tc.mini_batches * tc.ppo_epochs,
           f"{optimizer_steps} optimizer steps in {tc.steps} steps, not {tc.mini_batches} mini-batches per step")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    AutoTokenizer.from_pretrained(final, local_files_only=True)
    AutoModelForCausalLM.from_pretrained(final, local_files_only=True)
    hf_logging.enable_progress_bar()
    return [f"verified: steps 1..{tc.steps} (step 2 after a resume), {budget} rollouts per step, per-bin "
            f"means {arms.min():.2f}..{arms.max():.2f} in the arms {mc.n_min}..{mc.n_max}, {optimizer_steps} optimizer steps ({tc.mini_batches} mini-batches "
            f"per step), {len(ec.benchmarks)} benchmarks scored at k={ec.k} ({int(scored['eval/samples'])} samples), "
            f"checkpoints {steps} loadable by AutoModelForCausalLM"] + [f"GDRO path, {line}" for line in path_lines]


def phase_table(run_dir: Path) -> list[str]:
    """Seconds of each phase per step (steps.jsonl ``time/*``)."""
    from gdro_lab.runformat.runlog import read_run
    run = read_run(run_dir)
    lines = ["| step | " + " | ".join(PHASES) + " |", "|---|" + "---:|" * len(PHASES)]
    for index, step in enumerate(run.steps):
        cells = [run.scalars.get(f"time/{p}", np.full(run.steps.size, np.nan))[index] for p in PHASES]
        lines.append(f"| {int(step)} | " + " | ".join("-" if not np.isfinite(c) else f"{c:.2f}" for c in cells) + " |")
    return lines


def _print(line: str) -> None:
    """One line to stdout, flushed (a cluster log keeps it if the process is killed)."""
    print(line, flush=True)


def rehearse(preset: str, overrides: Sequence[str] = (), out: Callable[[str], None] = _print) -> Path:
    """Run the rehearsal of ``preset`` (with the user's ``overrides``); returns the run directory."""
    from real_runs.train import main
    from real_runs.config import parse_override
    from real_runs.preflight import run_dir_of
    real = load_config(preset, overrides)
    cfg = rehearsal_config(real, preset, keep=[".".join(parse_override(o)[:2]) for o in overrides])
    out(f"rehearsal: run directory {run_dir_of(cfg)}")
    out(f"rehearsal of {preset}: the preset's settings and code path, shrunk only in:")
    for key, (was, now) in config_diff(real, cfg).items():
        out(f"  {key}: {was!r} -> {now!r}")
    shape, source = model_shape(real.model.name)
    if shape is not None:
        projection = memory.project(shape, micro_batch_tokens=real.train.micro_batch_tokens, kl=real.loss.kl_coef > 0,
                                    gradient_checkpointing=real.model.gradient_checkpointing)
        out(f"{real.model.name}: {shape.parameters:,} parameters ({source}); one checkpoint "
            f"{memory.human(memory.checkpoint_bytes(shape.parameters)['total'])} (model 4N + optimizer.pt 8N bytes)")
        for line in memory.format_projection(real.model.name, projection, shape.parameters):
            out(line)

    def warm_start(method_step: MethodStep, record_index: np.ndarray, prompts: Any, records: Sequence[Any]) -> None:
        done = seeded_history(method_step, record_index, prompts, prompts_per_step=cfg.train.prompts_per_step,
                              seed=cfg.train.seed)
        out(f"rehearsal: seeded history: {done['steps']} synthetic steps of {done['per_step']} prompts "
            f"(of {done['prompts']:,}; {done['rollouts']:,} rollouts at known per-prompt odds spread over (0, 1); nothing generated or trained) observed by "
            f"the method's controllers before step 1: {done['assigned']:,} prompts now in a bin")

    started, cpu_started = time.perf_counter(), time.process_time()
    with phase("step 1 (start-up, data, model, seeded history, step, checkpoint)", out=out, prefix="rehearsal: "):
        run_dir = main(cfg, stop_after=1, warm_start=warm_start)
    first = json.loads((run_dir / "timing.json").read_text(encoding="utf-8"))
    resumed = time.perf_counter()
    with phase("step 2 (resume: load, step, evaluation, checkpoint)", out=out, prefix="rehearsal: "):
        main(None, resume=str(run_dir))
    ended = time.perf_counter()
    second = json.loads((run_dir / "timing.json").read_text(encoding="utf-8"))
    out(f"seconds per phase (steps.jsonl; step 1 before the stop, step 2 after the resume):")
    for line in phase_table(run_dir):
        out("  " + line)
    for label, timing in (("step 1", first), ("step 2", second)):
        out(f"  {label}: log {timing['seconds/log']:.2f} s, checkpoint {timing['seconds/checkpoint']:.2f} s; trainer "
            f"overhead {100 * timing['share/overhead']:.2f}% of the loop (plan, reward, controllers, record, other, "
            f"log, checkpoint), compute {100 * timing['share/compute']:.1f}%")
    out(f"  wall: {resumed - started:.1f} s to step 1 (start, data, model, step, checkpoint), "
        f"{ended - resumed:.1f} s for the resume (load, step 2, evaluation, checkpoint); "
        f"{time.process_time() - cpu_started:.1f} CPU s in this process (reward workers aside)")
    with phase("checking the run (log, evaluation, checkpoints load)", out=out, prefix="rehearsal: "):
        verified = verify(run_dir, cfg)
    for line in verified:
        out(line)
    out(f"rehearsal passed: {run_dir}")
    return run_dir
