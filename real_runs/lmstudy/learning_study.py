"""``gdro study lm``: GRPO (same lr, step-matched, tuned) vs Prompt-GDRO / Rollout-GDRO / joint on CPU.

Every run goes through the real trainer (:func:`real_runs.train.main`); only the model, the tokenizer
and the data are small. Within a seed every method starts from the same weights and spends exactly the
same rollouts. Departures from the paper, all because the study must run on CPU:
- a 0.5 M-parameter model on synthetic arithmetic, whose held-out groups are the suite's skills;
- 64 prompts per step and a few hundred steps instead of 256 and 1,000.
Baselines and scheduling: docs/lm-study-notes.md#real_runs-lmstudy-learning_study.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gdro_lab._validate import ConfigError, require_int, require_range
from real_runs.lmstudy import tasks
from real_runs.lmstudy.warmstart import WarmStartConfig

#: The warm start's demonstrator slips in 30% of its answers (measured in reports/lm-study/README.md:
#: from a clean warm start GRPO does not improve held-out accuracy; from this one it does).
SLIP_RATE = 0.3
METHODS = ("grpo", "grpo_matched_first", "grpo_matched_second", "prompt_gdro", "rollout_gdro", "joint")
#: step-matched GRPO runs -> which moment of Prompt-GDRO's multipliers scales their advantages
MATCHED = {"grpo_matched_first": "first", "grpo_matched_second": "second"}
#: The top-level keys a step-matched run's config.json gets (the app names runs by top-level string keys).
MATCH_LABELS = {"grpo_matched_first": {"matched_to": "prompt_gdro", "match": "first_moment"},
                "grpo_matched_second": {"matched_to": "prompt_gdro", "match": "second_moment"}}
EVAL_K = 8  # samples per held-out problem: mean@8 (pass@1) and pass@8, as in the paper


@dataclass(frozen=True)
class StudyConfig:
    """Settings of one study (the CLI's --quick picks :data:`QUICK`, else :data:`DEFAULT`).

    seeds: seeds per method (>= 1), paired across methods; seed s warm-starts from ``warm.seed + s``.
    steps, prompts_per_step: RL steps and prompts per step (>= 1).
    n_bar, n_min, n_max: mean and range of rollouts per prompt (the paper: 4, 2..12).
    lr: every method's AdamW learning rate (> 0), the centre of tuned GRPO's grid.
    lr_extend: most sqrt(2) steps tuned GRPO's grid {lr/√2, lr, lr√2} grows beyond each end.
    mini_batches: optimizer steps per RL step; eval_every: held-out evaluation period in steps.
    train_size, heldout_per_group: sizes of the suite (:class:`tasks.TaskConfig`); heldout_per_group
        must stay the warm start's (400).
    jobs: runs in parallel; threads: torch threads per run. warm: the warm start's settings.
    Why these: docs/lm-study-notes.md#real_runs-lmstudy-learning_study.
    """

    seeds: int = 3
    steps: int = 200
    prompts_per_step: int = 64
    n_bar: int = 4
    n_min: int = 2
    n_max: int = 12
    lr: float = 3e-5
    lr_extend: int = 2
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
        require_int("StudyConfig", "lr_extend", self.lr_extend, 0)
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
QUICK = StudyConfig(seeds=2, steps=4, prompts_per_step=8, eval_every=2, train_size=16, lr_extend=1,
                    heldout_per_group=10, warm=WarmStartConfig(steps=60, batch_size=64, warmup_steps=10,
                                                                heldout_per_group=10, slip_rate=SLIP_RATE))


def warm_config(cfg: StudyConfig, seed: int) -> WarmStartConfig:
    """The warm start of study seed ``seed``: the configured one with its supervised seed shifted by ``seed``."""
    return dataclasses.replace(cfg.warm, seed=cfg.warm.seed + seed)


def trainer_config(cfg: StudyConfig, method: str, seed: int, out: Path, lr_scale: float = 1.0,
                   adv_scale: float = 1.0, name: str | None = None) -> Any:
    """The trainer's TrainConfig of one run (the paper's loss settings, our sizes); every GRPO variant
    (step-matched, tuned) is the ``grpo`` method with another ``loss.adv_scale`` or ``optim.lr_scale``."""
    from real_runs.config import config_from_dict

    return config_from_dict({
        "model": {"name": "lmstudy-warmstart", "dtype": "float32", "device": "cpu",
                  "attn_implementation": "sdpa"},
        "data": {"train": "lmstudy", "shuffle": True},
        "rollout": {"engine": "hf", "temperature": 1.0, "max_new_tokens": 16, "max_prompt_tokens": 32},
        "method": {"name": method if method in ("prompt_gdro", "rollout_gdro", "joint") else "grpo",
                   "num_bins": 10, "n_bar": cfg.n_bar, "n_min": cfg.n_min, "n_max": cfg.n_max},
        "loss": {"kl_coef": 0.001, "kl_estimator": "k3", "agg": "token-mean", "adv_clip": 5.0,
                 "adv_scale": float(adv_scale)},
        "optim": {"lr": cfg.lr, "lr_scale": float(lr_scale), "warmup_steps": 0},
        "train": {"steps": cfg.steps, "prompts_per_step": cfg.prompts_per_step, "mini_batches": cfg.mini_batches,
                  "micro_batch_tokens": 65536, "seed": seed, "save_every": 0, "keep_last": 1,
                  "out": str(out), "run_name": run_name(name or method, seed), "progress": False},
        "eval": {"every": cfg.eval_every, "benchmarks": sorted(eval_records(cfg)), "k": EVAL_K,
                 "temperature": 0.6, "top_p": 0.8, "top_k": 20, "max_new_tokens": 16},
    })


def label_matched(run_dir: Path) -> bool:
    """Give a finished step-matched run's config.json its top-level ``matched_to`` / ``match`` keys
    (:data:`MATCH_LABELS`, by the run's name ``<name>-s<seed>``), so that the app names it
    "grpo matched_to=prompt_gdro match=second_moment" rather than by its ``adv_scale``. The trainer's
    config has no such keys (``real_runs.train_setup.load_run_config`` ignores them); idempotent, atomic
    (a temporary file renamed over config.json). True when it wrote."""
    import os

    labels = MATCH_LABELS.get(run_dir.name.rsplit("-s", 1)[0])
    path = run_dir / "config.json"
    if labels is None or not finished(run_dir) or not path.is_file():
        return False
    config = json.loads(path.read_text(encoding="utf-8"))
    if all(config.get(k) == v for k, v in labels.items()):
        return False
    tmp = path.with_name("config.json.tmp")
    tmp.write_text(json.dumps({**config, **labels}, indent=2), encoding="utf-8")
    os.replace(tmp, path)
    return True


def run_name(name: str, seed: int) -> str:
    return f"{name}-s{seed}"


def grid_name(lr_scale: float) -> str:
    """The run name of GRPO at ``lr_scale`` x the study's lr (``grpo`` itself at 1)."""
    return "grpo" if lr_scale == 1.0 else f"grpo_lr{lr_scale:g}"


def eval_records(cfg: StudyConfig) -> dict[str, list[Any]]:
    """Both halves of the held-out split as the trainer's ``eval_records``: one benchmark per half and skill."""
    out: dict[str, list[Any]] = {}
    for problems in tasks.heldout_halves(cfg.task_config()).values():
        for problem in problems:
            out.setdefault(problem.source, []).append(problem)
    return out


def _worker_setup(cfg: StudyConfig) -> None:
    import torch

    torch.set_num_threads(cfg.threads)


def unfinished_run(target: Path, command: str) -> FileExistsError:
    """The error for a run folder left by a study (or arena) stopped mid-run. Its runs save no
    checkpoint (``save_every: 0``: a run is minutes long), so it cannot be resumed: it is the user's
    to delete (the study never deletes a folder), and the study then makes it again."""
    return FileExistsError(f"{target} holds an unfinished run, which cannot be resumed (the {command}'s runs "
                           f"save no checkpoint): delete that folder, then run the {command} again (finished "
                           "runs are kept)")


def run_one(cfg: StudyConfig, name: str, seed: int, out: Path, warm_path: Path, lr_scale: float = 1.0,
            adv_scale: float = 1.0) -> str:
    """One training run in this process (called in a worker): returns its run directory."""
    _worker_setup(cfg)
    from real_runs.lmstudy.warmstart import load_warm_start
    from real_runs.rewards.math import MathReward
    from real_runs.train import main as train_main

    target = out / run_name(name, seed)
    if finished(target):
        label_matched(target)
        return str(target)
    if target.exists():
        raise unfinished_run(target, "study")
    model, tokenizer, _ = load_warm_start(warm_path)
    method = name if name in ("prompt_gdro", "rollout_gdro", "joint") else "grpo"
    with MathReward(num_workers=1) as reward:  # exact matches skip math-verify; one worker suffices
        run_dir = train_main(trainer_config(cfg, method, seed, out, lr_scale, adv_scale, name), model=model,
                             tokenizer=tokenizer, train_records=tasks.train_split(cfg.task_config()),
                             eval_records=eval_records(cfg), reward=reward)
    label_matched(Path(run_dir))
    return str(run_dir)


def initial_eval(cfg: StudyConfig, seed: int, out: Path, warm_path: Path) -> str:
    """Seed ``seed``'s warm start evaluated on both held-out halves (step 0), with the trainer's evaluator."""
    _worker_setup(cfg)
    from real_runs.engines import make_engine
    from real_runs.eval_scoring import evaluate
    from real_runs.lmstudy.warmstart import load_warm_start
    from real_runs.rewards.math import MathReward

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


def finished(path: Path) -> bool:
    meta = path / "meta.json"
    try:
        return json.loads(meta.read_text())["status"] == "finished"
    except (OSError, ValueError, KeyError):
        return False
