"""``gdro study lm --calibration-data OUT``: what ``gdro calibrate`` needs from the LM study, as plain files.

Seed 0's warm start sampled on the training pool (``OUT/warmstart-eval/``, as ``gdro eval
--save-samples``) and a short plain-GRPO learning-rate sweep (``OUT/sweep/grpo-lr<lr>/``), both through
the real code path; nothing here imports the simulator. Finished pieces are reused. Detail:
docs/lm-study-notes.md#real_runs-lmstudy-calibration_data.
"""

from __future__ import annotations

import dataclasses
import json
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from real_runs.lmstudy import learning_study, tasks

SWEEP_LRS = (1e-5, 3e-5, 1e-4, 3e-4)
"""Around the study's 3e-5 in half-decades: the README's exploratory runs put GRPO's best held-out lr near 3e-5..5e-5."""
SWEEP_STEPS = 60
"""A bit more than one pass over the 3,200-prompt pool at 64 prompts per step (50 steps)."""
SWEEP_EVAL_EVERY = 20
SAMPLES_K = 8


def lr_name(lr: float) -> str:
    return f"grpo-lr{lr:g}"


def sweep_config(cfg: learning_study.StudyConfig, steps: int = SWEEP_STEPS) -> learning_study.StudyConfig:
    """The study's config for the sweep: seed 0 only, ``steps`` steps, held-out evaluations at a third of them."""
    return dataclasses.replace(cfg, seeds=1, steps=steps, eval_every=max(1, min(SWEEP_EVAL_EVERY, steps // 3)))


def sweep_run(cfg: learning_study.StudyConfig, lr: float, out: Path, warm_path: Path) -> str:
    """One sweep run (a worker process): GRPO at ``lr`` through the study's own ``run_one``."""
    target = out / lr_name(lr)
    if learning_study.finished(target):
        return str(target)
    tmp_root = out / f".{lr_name(lr)}-tmp"
    run_dir = Path(learning_study.run_one(cfg, "grpo", 0, tmp_root, warm_path, lr_scale=lr / cfg.lr))
    run_dir.rename(target)
    tmp_root.rmdir()
    return str(target)


def warm_start_eval(cfg: learning_study.StudyConfig, out: Path, warm_path: Path, k: int = SAMPLES_K,
                    log: Callable[[str], None] = print) -> Path:
    """Sample the warm start ``k`` times on every training prompt at the training sampling (see the module)."""
    from gdro_lab import RunWriter
    from real_runs.data import format_prompt
    from real_runs.engines import make_engine
    from real_runs.eval_metrics import evaluation_metrics
    from real_runs.eval_scoring import generate_and_score
    from real_runs.lmstudy.warmstart import load_warm_start
    from real_runs.rewards.choice import ChoiceReward
    from real_runs.rewards.math import MathReward
    from real_runs.types import SamplingParams

    target = out / "warmstart-eval"
    if (target / "eval_samples_step0.jsonl").is_file():
        return target
    learning_study._worker_setup(cfg)
    model, tokenizer, _ = load_warm_start(warm_path)
    problems = tasks.train_split(cfg.task_config())
    train = learning_study.trainer_config(cfg, "grpo", 0, out)
    sampling = SamplingParams(train.rollout.temperature, train.rollout.top_p, train.rollout.top_k,
                              train.rollout.max_new_tokens, seed=0)
    started = time.perf_counter()
    with MathReward(num_workers=1) as reward:
        successes, _, samples = generate_and_score(problems, make_engine("hf", model, tokenizer), tokenizer, k,
                                                   sampling, 256, {"math": reward, "choice": ChoiceReward()},
                                                   log=lambda _: None, keep_samples=True)
    by_id = {p.id: p for p in problems}
    for sample in samples:
        sample.update(group=by_id[sample["id"]].group, source=by_id[sample["id"]].source)
    metrics = evaluation_metrics(successes, np.full(len(problems), k), [p.source for p in problems],
                                 [p.group for p in problems], k)
    metrics["time/eval"] = time.perf_counter() - started
    tmp = out / ".warmstart-eval-tmp"
    config = {"eval": {"model": str(warm_path), "k": k, "n": k, "temperature": sampling.temperature,
                       "top_p": sampling.top_p, "top_k": sampling.top_k, "max_new_tokens": sampling.max_new_tokens,
                       "benchmarks": "lmstudy training pool", "prompt_format": format_prompt.__name__}}
    with RunWriter(tmp, config, num_bins=1, producer="gdro study lm --calibration-data", bin_labels=["all"]) as w:
        w.log_eval(0, metrics)
    with open(tmp / "eval_samples_step0.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(s) + "\n" for s in samples)
    tmp.rename(target)
    log(f"calibration data: warm start sampled {k}x on {len(problems)} training prompts "
        f"(mean success {successes.mean():.3f}, {metrics['time/eval']:.0f} s)")
    return target


def calibration_data(cfg: learning_study.StudyConfig, out: Path, lrs: Sequence[float] = SWEEP_LRS, steps: int = SWEEP_STEPS,
                     log: Callable[[str], None] = print) -> dict[str, Any]:
    """Warm start (cached), its training-pool samples, then the sweep runs ``cfg.jobs`` at a time."""
    import torch

    from real_runs.lmstudy.warmstart import warm_start

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    torch.set_num_threads(cfg.jobs * cfg.threads)
    warm_path = warm_start(learning_study.warm_config(cfg, 0), log=log)  # seed 0's warm start, as the study's seed 0
    samples_dir = warm_start_eval(cfg, out, warm_path, log=log)
    eval_seconds = time.perf_counter() - started
    sweep_cfg = sweep_config(cfg, steps)
    (out / "sweep").mkdir(exist_ok=True)
    with ProcessPoolExecutor(max_workers=cfg.jobs, mp_context=get_context("spawn")) as pool:
        runs = list(pool.map(sweep_run, [sweep_cfg] * len(lrs), list(lrs), [out / "sweep"] * len(lrs),
                             [warm_path] * len(lrs)))
    summary: dict[str, Any] = {"samples": str(samples_dir), "sweep": runs, "lrs": list(lrs), "study_lr": cfg.lr,
               "pool_size": cfg.train_size, "steps": sweep_cfg.steps, "eval_seconds": eval_seconds,
               "seconds": time.perf_counter() - started, "warm_path": str(warm_path)}
    (out / "calibration-data.json").write_text(json.dumps(summary, indent=1))
    log(f"calibration data in {out} ({summary['seconds'] / 60:.1f} min): gdro calibrate --samples {samples_dir} "
        f"--sweep {' '.join(runs)} --lr {cfg.lr:g}")
    return summary
