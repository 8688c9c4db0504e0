"""``gdro study lm``: GRPO vs step-matched GRPO vs Prompt-GDRO / Rollout-GDRO / joint on CPU.

Every run goes through the real trainer (:func:`real_runs.train.main`) with the real loss,
engine, sampler and math reward; only the model (a small Qwen3 from
:mod:`.warmstart`), the tokenizer (:mod:`.tokenizer`) and the data (:mod:`.tasks`) are small.
All methods and seeds start from the same cached warm-start checkpoint and spend exactly the
same rollouts (``prompts_per_step * n_bar`` per step). Step-matched GRPO is GRPO with its
learning rate multiplied by Prompt-GDRO's measured mean advantage multiplier (mean over its
seeds and steps of the prompt-weighted multiplier), so any gain of Prompt-GDRO that is only a
larger step shows up as a gain of this baseline too.

Runs are independent single-thread processes (two single-thread jobs beat one two-thread job
on 2 cores); a finished run directory is reused when the study is run again with the same
settings, so an interrupted study continues where it stopped.

Departures from the paper: a 0.5 M-parameter model on synthetic arithmetic instead of Qwen3
1.7-8B on DAPO-Math; 64 prompts per step and a few hundred steps instead of 256 and 1,000; the
held-out groups are the suite's skills (not benchmarks). Everything else (bins, controllers,
loss, KL, clip, advantage clipping, arms 2..12 with mean 4) is the trainer's paper setting.
"""

from __future__ import annotations

import dataclasses
import json
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gdro_lab._validate import ConfigError, require_int, require_range
from real_runs.lmstudy import tasks
from real_runs.lmstudy.warmstart import WarmStartConfig

#: The warm start's demonstrator slips in 30% of its answers (measured in reports/lm-study/README.md:
#: from a clean warm start GRPO does not improve held-out accuracy; from this one it does).
SLIP_RATE = 0.3
METHODS = ("grpo", "grpo_matched", "prompt_gdro", "rollout_gdro", "joint")
EVAL_K = 8  # samples per held-out problem: mean@8 (pass@1) and pass@8, as in the paper


@dataclass(frozen=True)
class StudyConfig:
    """Settings of one study (the CLI's --quick picks :data:`QUICK`, else :data:`DEFAULT`).

    seeds: seeds per method (>= 1); every method uses seeds 0..seeds-1, paired across methods.
    steps, prompts_per_step: RL steps and prompts per step (>= 1).
    n_bar, n_min, n_max: mean and range of rollouts per prompt (the paper: 4, 2..12).
    lr: GRPO's AdamW learning rate (> 0); step-matched GRPO multiplies it by the measured factor.
        Measured (reports/lm-study/README.md): 2e-4, twice the SFT's final rate, lowers held-out accuracy within
        60 steps; 2e-5..5e-5 keeps or slightly raises it; 3e-5 is the default.
    mini_batches: optimizer steps per RL step (1 = one on-policy update of the whole batch).
    eval_every: held-out evaluation period in steps (the trainer also evaluates at the end).
    train_size, heldout_per_group: sizes of the suite (:class:`tasks.TaskConfig`). The classifier
        bins a prompt only once it has been seen, so the pool is small enough for several epochs
        (3,200 prompts / 64 per step = 50 steps per epoch, 4 epochs in 200 steps; the paper
        makes about 15 passes over DAPO-Math-17k); a smaller pool is memorised (training
        reward rises, held-out accuracy does not). heldout_per_group must stay the warm
        start's (400): the warm start excluded exactly those problems from its stream.
    jobs: runs in parallel (single-thread processes each); threads: torch threads per run.
    warm: the warm start's settings (cached by them).
    """

    seeds: int = 3
    steps: int = 200
    prompts_per_step: int = 64
    n_bar: int = 4
    n_min: int = 2
    n_max: int = 12
    lr: float = 3e-5
    mini_batches: int = 1
    eval_every: int = 50
    train_size: int = 3200
    heldout_per_group: int = 400
    jobs: int = 2
    threads: int = 1
    warm: WarmStartConfig = field(default_factory=lambda: WarmStartConfig(slip_rate=SLIP_RATE))

    def __post_init__(self) -> None:
        for name in ("seeds", "steps", "prompts_per_step", "mini_batches", "train_size",
                     "heldout_per_group", "jobs", "threads"):
            require_int("StudyConfig", name, getattr(self, name), 1)
        if not 2 <= self.n_min <= self.n_bar <= self.n_max:
            raise ConfigError(f"StudyConfig needs 2 <= n_min <= n_bar <= n_max, got "
                              f"{self.n_min}, {self.n_bar}, {self.n_max}")
        require_range("StudyConfig", "lr", self.lr, 0.0, lo_open=True)
        if self.heldout_per_group != self.warm.heldout_per_group:
            raise ConfigError(f"StudyConfig.heldout_per_group ({self.heldout_per_group}) must equal the warm "
                              f"start's ({self.warm.heldout_per_group}): the warm start excludes exactly that "
                              "held-out split from its training stream")

    def task_config(self) -> tasks.TaskConfig:
        return tasks.TaskConfig(train_size=self.train_size, heldout_per_group=self.heldout_per_group,
                                seed=self.warm.task_seed)


DEFAULT = StudyConfig()
#: A reduced setting: the same model, warm start and held-out split, 60 steps of 32 prompts
#: over an 800-prompt pool (about 2.4 epochs), one evaluation at the end.
SMALL = StudyConfig(steps=60, prompts_per_step=32, eval_every=60, train_size=800)
QUICK = StudyConfig(seeds=2, steps=4, prompts_per_step=8, eval_every=2, train_size=16,
                    heldout_per_group=10, warm=WarmStartConfig(steps=60, batch_size=64, warmup_steps=10,
                                                                heldout_per_group=10, slip_rate=SLIP_RATE))


def trainer_config(cfg: StudyConfig, method: str, seed: int, out: Path, lr_scale: float = 1.0) -> Any:
    """The trainer's TrainConfig of one run (the paper's loss settings, our sizes)."""
    from real_runs.config import config_from_dict

    return config_from_dict({
        "model": {"name": "lmstudy-warmstart", "dtype": "float32", "device": "cpu",
                  "attn_implementation": "sdpa"},
        "data": {"train": "lmstudy", "shuffle": True},
        "rollout": {"engine": "hf", "temperature": 1.0, "max_new_tokens": 16, "max_prompt_tokens": 32},
        "method": {"name": "grpo" if method == "grpo_matched" else method, "num_bins": 10,
                   "n_bar": cfg.n_bar, "n_min": cfg.n_min, "n_max": cfg.n_max},
        "loss": {"kl_coef": 0.001, "kl_estimator": "k3", "agg": "token-mean", "adv_clip": 5.0},
        "optim": {"lr": cfg.lr, "lr_scale": float(lr_scale), "warmup_steps": 0},
        "train": {"steps": cfg.steps, "prompts_per_step": cfg.prompts_per_step, "mini_batches": cfg.mini_batches,
                  "micro_batch_tokens": 65536, "seed": seed, "save_every": 0, "keep_last": 1,
                  "out": str(out), "run_name": run_name(method, seed), "progress": False},
        "eval": {"every": cfg.eval_every, "benchmarks": sorted(eval_records(cfg)), "k": EVAL_K,
                 "temperature": 0.6, "top_p": 0.8, "top_k": 20, "max_new_tokens": 16},
    })


def run_name(method: str, seed: int) -> str:
    return f"{method}-s{seed}"


def eval_records(cfg: StudyConfig) -> dict[str, list[Any]]:
    """The held-out split as the trainer's ``eval_records``: one benchmark per skill."""
    out: dict[str, list[Any]] = {}
    for problem in tasks.heldout_split(cfg.task_config()):
        out.setdefault(problem.source, []).append(problem)
    return out


def _worker_setup(cfg: StudyConfig) -> None:
    import torch

    torch.set_num_threads(cfg.threads)


def run_one(cfg: StudyConfig, method: str, seed: int, out: Path, warm_path: Path,
            lr_scale: float = 1.0) -> str:
    """One training run in this process (called in a worker): returns its run directory."""
    _worker_setup(cfg)
    from real_runs.lmstudy.warmstart import load_warm_start
    from real_runs.reward import MathReward
    from real_runs.train import main as train_main

    target = out / run_name(method, seed)
    if _finished(target):
        return str(target)
    if target.exists():
        raise FileExistsError(f"{target} holds an unfinished run: resume it with `gdro train --resume {target}` "
                              "or delete it, then run the study again")
    model, tokenizer, _ = load_warm_start(warm_path)
    with MathReward(num_workers=1) as reward:  # exact matches skip math-verify; one worker suffices
        run_dir = train_main(trainer_config(cfg, method, seed, out, lr_scale), model=model,
                             tokenizer=tokenizer, train_records=tasks.train_split(cfg.task_config()),
                             eval_records=eval_records(cfg), reward=reward)
    return str(run_dir)


def initial_eval(cfg: StudyConfig, seed: int, out: Path, warm_path: Path) -> str:
    """The warm start's held-out evaluation (step 0) with the trainer's evaluator and seed scheme."""
    _worker_setup(cfg)
    from real_runs.engines import make_engine
    from real_runs.lmstudy.warmstart import load_warm_start
    from real_runs.reward import MathReward
    from real_runs.train import evaluate

    target = out / f"initial-s{seed}.json"
    if target.is_file():
        return str(target)
    model, tokenizer, _ = load_warm_start(warm_path)
    problems = [p for group in eval_records(cfg).values() for p in group]
    train_cfg = trainer_config(cfg, "grpo", seed, out)
    with MathReward(num_workers=1) as reward:
        metrics = evaluate(train_cfg, make_engine("hf", model, tokenizer), tokenizer, problems, reward, 0)
    out.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": 0, "metrics": metrics}))
    tmp.rename(target)
    return str(target)


def _finished(path: Path) -> bool:
    meta = path / "meta.json"
    try:
        return json.loads(meta.read_text())["status"] == "finished"
    except (OSError, ValueError, KeyError):
        return False


def mean_multiplier(run_dir: Path) -> float:
    """Prompt-GDRO's mean advantage multiplier over a run: mean over steps of the per-prompt mean.

    Per step: (sum_b count_b * multiplier_b + unassigned) / prompts, where unassigned prompts
    (not yet binned) keep multiplier 1, read from the step record's bins and scalars.
    """
    from gdro_lab.runlog import read_run

    run = read_run(run_dir)
    counts_TG, mult_TG = run.bins.get("count"), run.bins.get("multiplier")
    prompts_T, unassigned_T = run.scalars.get("num_prompts"), run.scalars.get("num_unassigned")
    if counts_TG is None or mult_TG is None or prompts_T is None or unassigned_T is None:
        raise ValueError(f"{run_dir} logs no per-bin count/multiplier or num_prompts/num_unassigned: "
                         "cannot match GRPO's step size")
    weighted_T = np.nansum(np.where(counts_TG > 0, counts_TG * mult_TG, 0.0), axis=1)
    return float(np.mean((weighted_T + unassigned_T) / prompts_T))


ORDER = {"initial": 0, "prompt_gdro": 1, "grpo": 2, "rollout_gdro": 3, "joint": 4, "grpo_matched": 5}


def run_study(cfg: StudyConfig, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Warm start, then every (method, seed) in a pool of ``cfg.jobs`` processes, seed by seed.

    Seed s is complete (all methods, step-matched GRPO included) before seed s+1 starts, so an
    interrupted study still has whole seeds to report. Step-matched GRPO of seed s starts when
    Prompt-GDRO of seed s has finished, with lr x that run's mean advantage multiplier.
    """
    from real_runs.lmstudy.warmstart import warm_start

    import torch

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    torch.set_num_threads(cfg.jobs * cfg.threads)  # nothing else runs yet: the warm start gets every core
    warm_path = warm_start(cfg.warm, log=log)
    _worker_setup(cfg)
    warm_seconds = time.perf_counter() - started
    waiting = sorted(((seed, ORDER[m], m) for seed in range(cfg.seeds) for m in ORDER), reverse=True)
    running: dict[Future[str], tuple[str, int]] = {}
    runs: dict[str, dict[int, Path]] = {m: {} for m in METHODS}
    initial: dict[int, Path] = {}
    scales: dict[int, float] = {}
    with ProcessPoolExecutor(max_workers=cfg.jobs, mp_context=get_context("spawn")) as pool:
        while waiting or running:
            ready = [t for t in waiting if t[2] != "grpo_matched" or t[0] in scales]
            while ready and len(running) < cfg.jobs:
                task = ready.pop()
                waiting.remove(task)
                seed, _, method = task
                if method == "initial":
                    future = pool.submit(initial_eval, cfg, seed, out / "initial", warm_path)
                else:
                    future = pool.submit(run_one, cfg, method, seed, out / "runs", warm_path,
                                         scales.get(seed, 1.0) if method == "grpo_matched" else 1.0)
                running[future] = (method, seed)
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                method, seed = running.pop(future)
                path = Path(future.result())
                if method == "initial":
                    initial[seed] = path
                else:
                    runs[method][seed] = path
                if method == "prompt_gdro":
                    scales[seed] = mean_multiplier(path)
                    log(f"step-matched GRPO seed {seed}: lr x {scales[seed]:.3f} (Prompt-GDRO's mean multiplier)")
                log(f"done: {method} seed {seed} ({(time.perf_counter() - started) / 60:.1f} min)")
    return {"runs": runs, "initial": initial, "lr_scale": float(np.mean(list(scales.values()))),
            "warm_path": str(warm_path), "warm_seconds": warm_seconds,
            "seconds": time.perf_counter() - started, "config": dataclasses.asdict(cfg)}


def finished_study(cfg: StudyConfig, out: Path) -> dict[str, Any]:
    """What a (possibly interrupted) study folder holds: finished runs and initial evaluations only."""
    from real_runs.lmstudy.warmstart import default_cache_root

    runs: dict[str, dict[int, Path]] = {m: {} for m in METHODS}
    initial: dict[int, Path] = {}
    scales = []
    for seed in range(cfg.seeds):
        for method in METHODS:
            path = out / "runs" / run_name(method, seed)
            if _finished(path):
                runs[method][seed] = path
                if method == "prompt_gdro":
                    scales.append(mean_multiplier(path))
        if (out / "initial" / f"initial-s{seed}.json").is_file():
            initial[seed] = out / "initial" / f"initial-s{seed}.json"
    complete = [s for s in range(cfg.seeds) if all(s in runs[m] for m in METHODS) and s in initial]
    if not complete:
        raise FileNotFoundError(f"{out} holds no seed with every method finished: run the study first")
    runs = {m: {s: r[s] for s in complete} for m, r in runs.items()}
    return {"runs": runs, "initial": {s: initial[s] for s in complete}, "lr_scale": float(np.mean(scales)),
            "warm_path": str(default_cache_root() / f"warmstart-{cfg.warm.key()}"), "warm_seconds": float("nan"),
            "seconds": _span_seconds(runs, initial), "config": dataclasses.asdict(cfg), "complete_seeds": complete}


def _span_seconds(runs: dict[str, dict[int, Path]], initial: dict[int, Path]) -> float:
    """Wall time of the RL part from the files: first run created to last evaluation written."""
    import datetime as dt

    paths = [p for by_seed in runs.values() for p in by_seed.values()]
    created = [dt.datetime.fromisoformat(json.loads((p / "meta.json").read_text())["created"]).timestamp()
               for p in paths]
    ends = [(p / "eval.jsonl").stat().st_mtime for p in paths] + [p.stat().st_mtime for p in initial.values()]
    return float(max(ends) - min(created)) if created else float("nan")


CAVEATS = [
    "- **The first pass over the pool is plain GRPO for every method**: the classifier bins a prompt only "
    "after its first visit, so during the first train_size / prompts_per_step steps every prompt is unassigned "
    "(multiplier 1, n̄ rollouts) and all methods of a seed produce identical runs (the step-50 evaluations "
    "match exactly, a check of the pairing); the controllers act in the remaining steps.",
    "- **Why this need not reproduce the paper's +10%**: the paper trains 1.7-8B models for 1,000 steps on "
    "17k real problems and scores benchmarks whose hard tail is large; here a 0.5 M-parameter model learns for "
    "200 steps, and much of GRPO's held-out gain comes in the first pass over the pool, while every method is "
    "still GRPO (bullet above), so the controllers can only change the remaining 150 steps. What RL learns "
    "here is mostly to drop the demonstrator's slips (the section below); every method drops them about "
    "equally. With Adam, scaling advantages by a constant changes the update far less than scaling the "
    "learning rate does, so the step-matched baseline is a stronger control for step-size effects than for "
    "Prompt-GDRO's re-weighting across bins.",
]


def _log(text: str) -> None:
    print(text, flush=True)


SETTING_NOTES = {"default": "", "quick": " — QUICK setting (CI smoke run; numbers are not evidence)",
                 "small": " — SMALL setting (60 steps; not the default study)"}


def study_and_report(cfg: StudyConfig, out: Path, report_dir: Path, setting: str = "default",
                     report_only: bool = False, log: Callable[[str], None] = _log) -> Path:
    """Run the study (reusing finished runs) and write its report; returns report.md.

    ``report_only``: no training; report the seeds of ``out`` whose runs all finished.
    """
    from real_runs.lmstudy.report import write_report
    from real_runs.lmstudy.warmstart import format_accuracy

    result = finished_study(cfg, out) if report_only else run_study(cfg, out, log=log)
    warm_file = Path(result["warm_path"]) / "warmstart.json"
    warm_summary = json.loads(warm_file.read_text()) if warm_file.is_file() else {}
    if warm_summary:
        log(format_accuracy(warm_summary["heldout_greedy_accuracy"], "warm start, held-out greedy accuracy:"))
    note = SETTING_NOTES[setting]
    complete = result.get("complete_seeds")
    if complete is not None and len(complete) < cfg.seeds:
        note += f" — PARTIAL: {len(complete)} of {cfg.seeds} seeds finished"
    from real_runs.lmstudy import slips
    from real_runs.lmstudy.report import METHOD_LABELS
    from simulators.reporting import write_json

    measured = slips.measure_study(Path(result["warm_path"]), result["runs"], tasks.heldout_split(cfg.task_config()))
    report_dir.mkdir(parents=True, exist_ok=True)
    write_json(report_dir / "slips.json", measured)
    return write_report(result, list(tasks.SKILLS), report_dir, note, warm_summary,
                        CAVEATS + slips.markdown(measured, METHOD_LABELS))
