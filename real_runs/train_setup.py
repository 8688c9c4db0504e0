"""The parts of one `gdro train` run, built once before step 1 (:func:`build`), and its run directory,
new or resumed (:func:`open_run_dir`): everything :mod:`real_runs.train`'s step loop reads, in one
:class:`TrainRun`. The run directory is created only after everything loaded, so a failed start
leaves nothing behind. The order of a start: docs/train-notes.md#real_runs-train_setup.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from gdro_lab import MethodStep, PromptIndex, RunWriter
from gdro_lab.runformat.runlog import RunLock, is_run_dir, read_run
from real_runs import checkpoint as ckpt
from real_runs import data, preflight
from real_runs.batching import DataOrder
from real_runs.config import TrainConfig, config_from_dict, config_to_dict
from real_runs.overhead import RunClock, logged_elapsed
from real_runs.preflight import TrainError
from real_runs.progress import phase
from real_runs.types import Problem, Reward

PRODUCER = "gdro train"
#: The prefix of the start-up's progress lines (real_runs.progress.phase, on stdout after the run directory).
STARTUP = "gdro train: start-up: "
#: ``main(warm_start=...)``: called as f(method step, record_index, prompts, records) before step 1 of a new run.
WarmStart = Callable[[MethodStep, np.ndarray, PromptIndex, list[Problem]], None]
#: Top-level config.json keys that label a run for the app (real_runs.lmstudy.learning_study.label_matched).
LABEL_KEYS = frozenset({"matched_to", "match"})


@dataclass(frozen=True)
class Given:
    """What the caller of ``main`` passes instead of what the config would load (None: load it)."""

    model: Any = None
    tokenizer: Any = None
    train_records: Sequence[Problem] | None = None
    eval_records: dict[str, list[Problem]] | None = None  #: benchmark name -> its problems
    reward: Reward | None = None  #: scores training and evaluation (:func:`make_rewards`)
    engine: Any = None
    warm_start: WarmStart | None = None  #: runs once on the fresh controllers of a new run


@dataclass
class TrainRun:
    """One run's state: the parts :func:`build` loads, then the run directory :func:`open_run_dir` opens."""

    cfg: TrainConfig
    config_dict: dict[str, Any]  #: ``cfg`` as config.json holds it (config_to_dict): the run writer's and the sinks'
    device: torch.device
    policy: Any  #: the trained model (fp32 master weights unless model.dtype says otherwise)
    tokenizer: Any
    records: list[Problem]  #: the training problems kept (prompts no longer than rollout.max_prompt_tokens)
    prompt_texts: list[str]  #: their formatted prompts
    answers: np.ndarray  #: their gold answers (dtype object)
    data_summary: dict[str, int]  #: counts written to data.json
    eval_problems: list[Problem]
    prompts: PromptIndex
    record_index: np.ndarray  #: record i -> its interned prompt index
    method_step: MethodStep  #: the method's step (its four controllers)
    order: DataOrder
    autocast: Callable[[], Any]
    reference: Any  #: the frozen policy as loaded (None without a KL term)
    engine: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    pad_id: int
    reward: Reward | None  #: the caller's reward (None: from rollout.reward)
    writer: RunWriter = field(init=False)  #: set by open_run_dir
    start: int = field(init=False)  #: the last step already done (0 for a new run)
    clock: RunClock = field(init=False)  #: time/elapsed, start-up included, continued across a resume


def _say(line: str) -> None:
    """A start-up progress line on stdout with the run directory's line, flushed (a cluster log keeps it)."""
    print(line, flush=True)


def build(cfg: TrainConfig, given: Given, resuming: bool) -> TrainRun:
    """Seeds, device, model and data, controllers, reference, engine, optimizer (before any run directory)."""
    tc, lc, mc = cfg.train, cfg.loss, cfg.method
    config_dict = config_to_dict(cfg)
    if tc.deterministic:
        torch.use_deterministic_algorithms(True)
    device = preflight.resolve_device(cfg.model.device)
    random.seed(tc.seed)
    np.random.seed(tc.seed)
    torch.manual_seed(tc.seed)
    autocast = _autocast(cfg, device)

    policy, tokenizer = _load_model(cfg, given.model, given.tokenizer, device)
    records, prompt_texts, eval_problems, data_summary = _load_data(cfg, given.train_records, given.eval_records,
                                                                    tokenizer)
    prompts = PromptIndex()  # stable ids interned once: record i -> record_index[i]
    record_index = prompts.intern([r.id for r in records])
    method_step = MethodStep(mc.method(), mc.step_configs(), tc.seed, prompts)
    if given.warm_start is not None and not resuming:
        given.warm_start(method_step, record_index, prompts, records)
    order = DataOrder(len(records), tc.seed, cfg.data.shuffle)
    reference = None
    if lc.kl_coef > 0:  # the frozen reference is the policy as loaded, before any checkpoint
        reference = copy.deepcopy(policy).eval().requires_grad_(False)
        if autocast is not nullcontext:
            reference.to(torch.bfloat16)
    if cfg.model.gradient_checkpointing:
        enable = getattr(policy, "activation_checkpointing_enable", None) or policy.gradient_checkpointing_enable
        enable()  # transformers 5 renamed gradient_checkpointing_enable
    if cfg.model.compile:
        policy.base_model.compile(dynamic=True)  # the module response_logprobs and generate call
    engine = given.engine
    if engine is None:
        from real_runs.engines import make_engine
        settings = engine_settings(cfg, device)
        with phase(f"engine start (rollout.engine={cfg.rollout.engine})", prefix=STARTUP, out=_say):
            engine = make_engine(cfg.rollout.engine, policy, tokenizer, **settings)
    optim = cfg.optim
    optimizer = torch.optim.AdamW(policy.parameters(), lr=optim.lr * optim.lr_scale, betas=(optim.beta1, optim.beta2),
                                  eps=optim.eps, weight_decay=optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / optim.warmup_steps) if optim.warmup_steps else 1.0)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return TrainRun(cfg=cfg, config_dict=config_dict, device=device, policy=policy, tokenizer=tokenizer,
                    records=records, prompt_texts=prompt_texts,
                    answers=np.array([p.answer for p in records], dtype=object), data_summary=data_summary,
                    eval_problems=eval_problems, prompts=prompts, record_index=record_index,
                    method_step=method_step, order=order, autocast=autocast, reference=reference, engine=engine,
                    optimizer=optimizer, scheduler=scheduler, pad_id=pad_id, reward=given.reward)


def open_run_dir(run: TrainRun, run_dir: Path, lock: RunLock, resuming: bool, started: float) -> None:
    """A new run directory (``lock`` claimed it) with its data.json, or the resumed one with its last
    checkpoint loaded into ``run``'s parts; sets ``run.writer``, ``run.start`` and ``run.clock``."""
    if not resuming:
        run.start, run.clock = 0, RunClock(started)
        run.writer = _new_run(run.config_dict, run_dir, lock)
        (run_dir / "data.json").write_text(json.dumps(run.data_summary, indent=1), encoding="utf-8")
    else:
        loaded: dict[str, Any] = {}
        slots = {**state_slots(loaded, saved_state(run.method_step)), "data_order": run.order}
        step = resume_step(run_dir)
        run.start, _ = ckpt.load_checkpoint(run_dir, model=run.policy, optimizer=run.optimizer,
                                            scheduler=run.scheduler, step=step, controllers=slots)
        run.method_step.load_state_dict(loaded)
        run.clock = RunClock(started, logged_elapsed(run_dir, run.start))
        run.writer = RunWriter.resume(run_dir, run.start, lock=lock)
    sync_engine(run)  # a separate engine (vLLM) holds the weights it was built with, or a given engine's


def engine_settings(cfg: TrainConfig, device: torch.device) -> dict[str, Any]:
    """The engine's keyword arguments: none for ``hf`` (it shares the policy module); for ``vllm`` the
    generation dtype (bf16 on a GPU while fp32 master weights stay in the trainer; fp32 on the CPU), the
    longest sequence it must hold (prompt + the longer of rollout and evaluation lengths) and the seed."""
    if cfg.rollout.engine != "vllm":
        return {}
    longest = cfg.rollout.max_prompt_tokens + max(cfg.rollout.max_new_tokens, cfg.eval.max_new_tokens)
    return {"dtype": "bfloat16" if device.type == "cuda" else "float32", "max_model_len": longest,
            "seed": cfg.train.seed}


def sync_engine(run: TrainRun) -> None:
    """Push the policy's weights to an engine that does not share its module (vLLM), so that the
    next generation samples from them: after every update, and when a run opens (a resumed run's
    checkpoint was loaded after the engine was built; a given engine holds whatever it last had)."""
    engine = run.engine
    if hasattr(engine, "wake_up"):
        engine.wake_up()
    if getattr(engine, "model", None) is not run.policy:
        engine.load_weights(run.policy.state_dict())


def _load_model(cfg: TrainConfig, model: Any, tokenizer: Any, device: torch.device) -> tuple[Any, Any]:
    """The policy on ``device`` and its tokenizer: those given, the rest loaded from ``model.name``."""
    if model is None or tokenizer is None:
        from real_runs.models import load_policy
        dtype = "float32" if cfg.model.dtype == "auto" else cfg.model.dtype  # auto: fp32 master weights
        with phase(f"model load ({cfg.model.name} on {device})", prefix=STARTUP, out=_say):
            seed_model, seed_tok = load_policy(cfg.model.name, device=str(device), dtype=dtype,
                                               attn_implementation=None if cfg.model.attn_implementation == "auto"
                                               else cfg.model.attn_implementation, seed=cfg.train.seed)
        model, tokenizer = model or seed_model, tokenizer or seed_tok
    return model.to(device), tokenizer


def _load_data(cfg: TrainConfig, train_records: Sequence[Problem] | None,
               eval_records: dict[str, list[Problem]] | None,
               tokenizer: Any) -> tuple[list[Problem], list[str], list[Problem], dict[str, int]]:
    """(the training problems kept, their formatted prompts, the evaluation problems, the counts for
    data.json): the records given or ``data.train``'s, less prompts over ``rollout.max_prompt_tokens``;
    every benchmark's problems in turn (given or loaded; none when ``eval.every`` is 0)."""
    summary: dict[str, int] = {}
    if train_records is None:
        with phase(f"data load (data.train={cfg.data.train})", prefix=STARTUP, out=_say):
            train_records, summary = data.load_train_records(cfg)
    if not train_records:
        raise TrainError(f"data.train={cfg.data.train!r} has no usable records (every row lacked a "
                         "problem or an answer): pass a data set with answers")
    limit = cfg.rollout.max_prompt_tokens
    records, prompt_texts, too_long = data.prompt_texts(list(train_records), tokenizer, limit)
    if too_long:
        print(f"gdro train: dropped {too_long} of {too_long + len(records)} training prompts longer than "
              f"rollout.max_prompt_tokens={limit}", file=sys.stderr)
    summary.update({"dropped_too_long": too_long, "prompts": len(records)})
    problems: list[Problem] = []
    if cfg.eval.every:
        if eval_records is None:
            with phase(f"evaluation sets load ({', '.join(cfg.eval.benchmarks)})", prefix=STARTUP, out=_say):
                eval_records = {b: data.load_dataset_records(b, limit=cfg.eval.limit or None) for b in cfg.eval.benchmarks}
        problems = [p for group in eval_records.values() for p in group]
        if not problems:
            raise TrainError("eval.every > 0 but the evaluation sets hold no problem: set eval.benchmarks or "
                             "eval.every=0")
    return records, prompt_texts, problems, summary


def _new_run(config: dict[str, Any], run_dir: Path, lock: RunLock) -> RunWriter:
    """A fresh run directory for the resolved ``config`` (config_to_dict's; RunWriter refuses a folder
    that already holds a run), under ``lock``."""
    num_bins = config["method"]["num_bins"]
    return RunWriter(run_dir, config, num_bins, PRODUCER, bin_labels=[f"accbin_{b}" for b in range(num_bins)],
                     lock=lock)


def check_resumable(resume: str | os.PathLike[str]) -> Path:
    """The run directory to resume, checked: a gdro train run, not finished, with a checkpoint."""
    run_dir = Path(resume)
    if not is_run_dir(run_dir):
        raise TrainError(f"--resume {run_dir}: not a gdro run directory: pass a folder written by gdro train")
    run = read_run(run_dir)
    if run.meta.get("producer") != PRODUCER:
        raise TrainError(f"--resume {run_dir}: written by {run.meta.get('producer')!r}, not gdro train: "
                         "only gdro train runs can be resumed")
    if run.meta.get("status") == "finished":
        raise TrainError(f"--resume {run_dir}: the run already finished: start a new run to train more")
    if not ckpt.resumable_steps(run_dir):
        raise TrainError(f"--resume {run_dir}: no complete checkpoint yet: delete the folder and start the run "
                         "again (or use another train.run_name)")
    return run_dir


def resume_step(run_dir: Path) -> int:
    """The checkpoint a resume starts from: the newest one whose steps all have a record in steps.jsonl.

    A crash mid-write leaves a torn last line, which is dropped; resuming from a checkpoint after it would
    leave a gap in the log (steps 1, 3), so an earlier checkpoint is taken and the steps after it are run
    again. Without one, the gap is said on stderr, never silent.
    """
    steps = ckpt.resumable_steps(run_dir)
    run = read_run(run_dir)
    logged = {int(s) for s in run.steps}
    complete = 0
    while complete + 1 in logged:
        complete += 1
    usable = [s for s in steps if s <= complete]
    chosen = usable[-1] if usable else steps[-1]
    torn = "steps.jsonl's torn last line was dropped; " if run.torn_tail else ""
    if chosen < steps[-1]:
        print(f"gdro train: {torn}resuming from the checkpoint of step {chosen} (the log has every step up to "
              f"{complete}, not {steps[-1]}): steps {chosen + 1}..{steps[-1]} are run again", file=sys.stderr)
    elif chosen > complete:
        print(f"gdro train: {torn}steps {complete + 1}..{chosen} have no record in steps.jsonl and no earlier "
              f"checkpoint to rerun them from: the log continues after step {chosen} with that gap",
              file=sys.stderr)
    return chosen


def load_run_config(run_dir: str | os.PathLike[str]) -> TrainConfig:
    """The resolved config a run was started with (its config.json), without the labels a study adds for
    the app (:data:`LABEL_KEYS`: a step-matched baseline's ``matched_to`` / ``match``; not trainer settings)."""
    return config_from_dict({k: v for k, v in read_run(run_dir).config.items() if k not in LABEL_KEYS})


def make_rewards(cfg: TrainConfig, reward: Reward | None) -> tuple[Reward, Reward | None, list[Any]]:
    """(training reward, evaluation reward or None = the math reward built on first use, owned
    objects to close). A reward passed in scores both; ``rollout.reward=toy`` scores training only."""
    if reward is not None:
        return reward, reward, []
    from real_runs.rewards.math import MathReward
    if cfg.rollout.reward == "toy":
        from real_runs.rewards.toy import ToyOddsReward
        print("gdro train: rollout.reward=toy: a toy reward with known per-prompt odds, NOT the math reward "
              "(real_runs/rewards/toy.py); evaluation uses the math reward", file=sys.stderr)
        return ToyOddsReward(), None, []
    math = MathReward(timeout_s=cfg.rollout.reward_timeout_s, num_workers=cfg.rollout.reward_workers)
    return math, math, [math]


def _autocast(cfg: TrainConfig, device: torch.device) -> Any:
    """bf16 autocast on CUDA (``model.autocast=auto``) or on any device (``bf16``), else none."""
    mode = cfg.model.autocast
    if mode == "bf16" or (mode == "auto" and device.type == "cuda"):
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext


def saved_state(method_step: MethodStep) -> dict[str, Any]:
    """What a checkpoint and a snapshot hold of the method: MethodStep.state_dict, less the selector when
    the method has none (runs without a selector keep the layout written before the selector family)."""
    state = method_step.state_dict()
    if method_step.method.selector == "none":
        del state["selector"]
    return state


class StateSlot:
    """One family's entry of ``states`` as real_runs.checkpoint writes and reads its entries (``state_dict``
    / ``load_state_dict``), so the method's state goes through MethodStep.state_dict / load_state_dict whole."""

    def __init__(self, states: dict[str, Any], family: str):
        self.states, self.family = states, family

    def state_dict(self) -> Any:
        return self.states[self.family]

    def load_state_dict(self, state: Any) -> None:
        self.states[self.family] = state


def state_slots(states: dict[str, Any], families: Iterable[str]) -> dict[str, StateSlot]:
    """A checkpoint entry per family, each a :class:`StateSlot` of ``states``."""
    return {family: StateSlot(states, family) for family in families}


