"""`gdro train`: GRPO with Prompt-GDRO and/or Rollout-GDRO on a real language model, one machine.

One step, top to bottom (style: nanochat ``chat_rl.py``, CleanRL ``ppo.py``):
  1. next P prompts in a seeded order (those the prompt selector skips replaced by the next ones);
     the classifier gives their bins; the allocator plans n_i (sum exactly P n_bar, checked every step);
  2. the engine generates n_i responses per prompt; the reward scores them (+1 / -1);
  3. ``StepFeedback`` -> classifier, Prompt-GDRO, Rollout-GDRO and selector updates; the selector's
     ``accept`` keeps the groups trained on (the others' rollouts count as generated, compute/*);
  4. GRPO advantages (Eq. 3, ragged groups, clipped to +-5) x the Prompt-GDRO multipliers (Eq. 16);
  5. old and reference log-probs recomputed here by a teacher-forced forward pass (the engine's
     log-probs are not used: with vLLM they come from another kernel and precision); with one
     optimizer step per batch (one PPO epoch, one mini-batch) the old ones are the update's own
     log-probs, detached (exactly equal before that step; TRL's GRPOTrainer does the same), so
     only the reference pass runs here;
  6. PPO epochs over mini-batches, micro-batches by token budget (sorted by length), loss of
     ``real_runs.loss`` (Eq. 4-6), gradient clipping, AdamW with linear warm-up;
  7. weights to the engine (a no-op when the hf engine shares the module);
  8. ``step_record`` + losses, timings (``time/*``; ``time/elapsed`` = wall-clock seconds since the
     run started, start-up, evaluation and checkpoints included, continued across a resume), tokens/s,
     memory -> steps.jsonl (and sinks); evaluation and checkpoint on schedule.

Before anything loads, :mod:`real_runs.preflight` checks the output folder, the device and the
model source; the run directory is held under an exclusive lock (``gdro_lab.runlog.RunLock``) by the
one process that writes it. At the end the share of time outside generate / forward / backward is
printed (:mod:`real_runs.overhead`) and kept in ``timing.json``.

Follows the paper (arXiv 2601.19280 §2-3, App. A) in the update rules of the controllers (all
from ``gdro_lab``), the asymmetric clip, the KL loss and the advantage clip. Departs:
- log-probs are of the raw distribution (temperature 1), as the engines report them; verl divides
  the logits by the sampling temperature (identical at the released scripts' training temperature 1.0);
- the controllers update before the advantages are weighted (docs/core.md), so the
  weights used at step t already include step t's signal;
- fp32 master weights with bf16 autocast on GPU (lr 1e-6 updates vanish in bf16 weights);
- the paper presets train on the English rows of DAPO-Math-17k (14,485 here, the paper's 14.1k)
  with the ``hf`` engine (transformers ``generate``), not vLLM (``rollout.engine=vllm`` where
  vLLM is installed).

The batching helpers (data order, token-budget micro-batches, teacher-forced log-probs) are in
:mod:`real_runs.batching`, the loss in :mod:`real_runs.loss`, checkpoints in :mod:`real_runs.checkpoint`.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from gdro_lab import MethodStep, PromptIndex, RunWriter, StepFeedback
from gdro_lab.runlog import RunLock, is_run_dir, read_run
from real_runs import checkpoint as ckpt
from real_runs import loss as L
from real_runs import preflight
from real_runs.batching import DataOrder, RolloutBatch, Timer, micro_batches, peak_memory_gb, response_logprobs  # noqa: F401
from real_runs.config import TrainConfig, config_from_dict, config_to_dict
from real_runs.eval_scoring import evaluate
from real_runs.overhead import RunClock, RunTimes, logged_elapsed
from real_runs.preflight import TrainError
from real_runs.sinks import Sinks, check_sinks
from real_runs.types import Problem, Reward, SamplingParams

PRODUCER = "gdro train"
#: ``main(warm_start=...)``: called as f(controllers, record_index, prompts, records) before step 1 of a new run.
WarmStart = Callable[[dict[str, Any], np.ndarray, PromptIndex, list[Problem]], None]
REPO_ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- small helpers

def on_policy_update(cfg: TrainConfig, policy: torch.nn.Module) -> bool:
    """True when the update takes one optimizer step on the whole batch (one PPO epoch, one
    mini-batch) of a model without dropout: its log-probs then equal the old ones exactly, so the
    update uses their detached values as ``old_logp`` (ratio exactly 1, as TRL's GRPOTrainer does
    when it generates every step) and the separate old-log-prob pass is skipped."""
    tc = cfg.train
    dropout = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in policy.modules())
    config = getattr(policy, "config", None)
    dropout = dropout or any(float(getattr(config, name, 0.0) or 0.0) > 0
                             for name in ("attention_dropout", "hidden_dropout", "resid_pdrop", "dropout"))
    return tc.ppo_epochs == 1 and tc.mini_batches == 1 and not dropout


def recompute_logprobs(batch: RolloutBatch, policy: torch.nn.Module, reference: torch.nn.Module | None,
                       token_budget: int, engine_logprobs: Sequence[np.ndarray], old: bool = True) -> list[float]:
    """Fill ``batch.old_logp`` (policy before the update; only when ``old``) and ``batch.ref_logp``
    (frozen reference; only with one).

    Returns the largest |trainer - engine| log-prob gap per sample (a consistency metric only;
    empty when ``old`` is False: :func:`ppo_update` measures it then).
    """
    policy.eval()
    count = len(batch.responses)
    batch.old_logp = [torch.empty(0)] * count if old else []
    batch.ref_logp = [torch.empty(0)] * count
    gaps: list[float] = []
    if not old and reference is None:
        return gaps
    for rows in micro_batches(batch.lengths, token_budget):
        if reference is not None:
            ref = batch.forward(reference, rows)[0]
            for j, r in enumerate(rows):
                batch.ref_logp[r] = ref[j, :len(batch.responses[r])].float()
        if not old:
            continue
        logp = batch.forward(policy, rows)[0]
        for j, r in enumerate(rows):
            batch.old_logp[r] = logp[j, :len(batch.responses[r])].float()
        gaps += engine_gaps(batch, rows, logp, engine_logprobs)
    return gaps


def engine_gaps(batch: RolloutBatch, rows: np.ndarray, logp_BT: torch.Tensor,
                engine_logprobs: Sequence[np.ndarray]) -> list[float]:
    """max |trainer - engine| log-prob over each row's real tokens (rows with no token are skipped)."""
    gaps = []
    for j, r in enumerate(rows):
        if batch.real_lengths[r]:
            gap = logp_BT[j, :batch.real_lengths[r]].detach().float().cpu() - torch.as_tensor(engine_logprobs[r])
            gaps.append(float(gap.abs().max()))
    return gaps


def ppo_update(batch: RolloutBatch, policy: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
               cfg: TrainConfig, step: int, autocast: Any, engine_logprobs: Sequence[np.ndarray] | None = None,
               ) -> tuple[dict[str, float], list[float], list[float], list[float]]:
    """PPO epochs over mini-batches (seeded shuffle), micro-batches by token budget, one optimizer
    step per mini-batch. Returns (metric token sums, loss per mini-batch, grad norm per mini-batch,
    engine log-prob gaps).

    Without ``batch.old_logp`` (an on-policy update, :func:`on_policy_update`) the old log-probs
    are the update's own, detached, and the engine gaps are measured on them (``engine_logprobs``)."""
    tc, lc = cfg.train, cfg.loss
    device = next(policy.parameters()).device
    sums: dict[str, float] = {}
    losses, grad_norms, gaps = [], [], []
    on_policy = not batch.old_logp
    if on_policy and (tc.ppo_epochs != 1 or tc.mini_batches != 1):
        raise ValueError("ppo_update: old log-probs are needed for more than one optimizer step per batch")
    policy.train()
    for epoch in range(tc.ppo_epochs):
        shuffled = np.random.default_rng([tc.seed, step, epoch]).permutation(len(batch.responses))
        for mini in np.array_split(shuffled, tc.mini_batches):
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for rows in micro_batches(batch.lengths[mini], tc.micro_batch_tokens):
                rows = mini[rows]
                with autocast():
                    logp, mask, entropy = batch.forward(policy, rows, with_entropy=True,
                                                        entropy_grad=lc.entropy_coef > 0)
                if on_policy:
                    old_logp = logp.detach().float()
                    if engine_logprobs is not None:
                        gaps += engine_gaps(batch, rows, old_logp, engine_logprobs)
                else:
                    old_logp = batch.padded(batch.old_logp, rows, device)
                loss, part = L.policy_loss(
                    logp, old_logp, torch.as_tensor(batch.advantages[rows], device=device),
                    mask, clip_low=lc.clip_low, clip_high=lc.clip_high, clip_ratio_c=lc.clip_ratio_c, agg=lc.agg,
                    ref_logp_BT=batch.padded(batch.ref_logp, rows, device) if lc.kl_coef > 0 else None,
                    kl_coef=lc.kl_coef, kl_estimator=lc.kl_estimator, entropy_BT=entropy, entropy_coef=lc.entropy_coef,
                    num_tokens=float(max(batch.real_lengths[mini].sum(), 1)),
                    num_seqs=float(max(int(np.count_nonzero(batch.real_lengths[mini])), 1)),  # verl: non-empty only
                    norm_length=float(cfg.rollout.max_new_tokens))
                loss.backward()
                total += float(loss.detach())
                for key, value in part.items():
                    sums[key] = sums.get(key, 0.0) + float(value)
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(),
                                                                    cfg.optim.grad_clip or float("inf"))))
            losses.append(total)
            optimizer.step()
            scheduler.step()
    policy.eval()
    return sums, losses, grad_norms, gaps


# ----------------------------------------------------------------------------- setup

def _load_parts(cfg: TrainConfig, model: Any, tokenizer: Any, train_records: Any,
                device: torch.device) -> tuple[Any, Any, list[Problem], dict[str, int]]:
    summary: dict[str, int] = {}
    if model is None or tokenizer is None:
        from real_runs.models import load_policy
        dtype = "float32" if cfg.model.dtype == "auto" else cfg.model.dtype  # auto: fp32 master weights
        seed_model, seed_tok = load_policy(cfg.model.name, device=str(device), dtype=dtype,
                                           attn_implementation=None if cfg.model.attn_implementation == "auto"
                                           else cfg.model.attn_implementation, seed=cfg.train.seed)
        model, tokenizer = model or seed_model, tokenizer or seed_tok
    if train_records is None:
        train_records, summary = preflight.load_train_records(cfg)
    if not train_records:
        raise TrainError(f"data.train={cfg.data.train!r} has no usable records (every row lacked a "
                         "problem or an answer): pass a data set with answers")
    return model.to(device), tokenizer, list(train_records), summary


def _new_run(cfg: TrainConfig, run_dir: Path, lock: RunLock) -> RunWriter:
    """A fresh run directory (RunWriter refuses a folder that already holds a run), under ``lock``."""
    return RunWriter(run_dir, config_to_dict(cfg), cfg.method.num_bins, PRODUCER,
                     bin_labels=[f"accbin_{b}" for b in range(cfg.method.num_bins)], lock=lock)


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


#: Top-level config.json keys that label a run for the app (real_runs.lmstudy.study.label_matched).
LABEL_KEYS = frozenset({"matched_to", "match"})


def load_run_config(run_dir: str | os.PathLike[str]) -> TrainConfig:
    """The resolved config a run was started with (its config.json), without the labels a study adds for
    the app (:data:`LABEL_KEYS`: a step-matched baseline's ``matched_to`` / ``match``; not trainer settings)."""
    return config_from_dict({k: v for k, v in read_run(run_dir).config.items() if k not in LABEL_KEYS})


def _rewards(cfg: TrainConfig, reward: Reward | None) -> tuple[Reward, Reward | None, list[Any]]:
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


# ----------------------------------------------------------------------------- main

def main(cfg: TrainConfig | None, *, resume: str | None = None, model: Any = None, tokenizer: Any = None,
         train_records: Sequence[Problem] | None = None, eval_records: dict[str, list[Problem]] | None = None,
         reward: Reward | None = None, engine: Any = None, stop_after: int | None = None,
         warm_start: WarmStart | None = None) -> Path:
    """Train; returns the run directory. ``resume`` continues that run from its last checkpoint.

    model/tokenizer/train_records/eval_records/reward/engine replace what the config would load
    (e.g. a custom task suite). ``eval_records`` maps a benchmark name to its problems.
    ``stop_after`` ends the process after that step with a checkpoint and status "stopped" (a
    planned interruption: ``--rehearse`` resumes from it). ``warm_start(controllers, record_index,
    prompts, records)`` runs once on the fresh controllers of a new run, before step 1 (the
    rehearsal's seeded history, :func:`real_runs.rehearse.seeded_history`); a resume loads them instead.
    """
    started = time.perf_counter()  # time/elapsed counts from here (start-up included)
    lock = None
    if resume is not None:
        run_dir = check_resumable(resume)
        lock = RunLock(run_dir).acquire()   # a second writer is refused before it touches anything
        cfg = load_run_config(run_dir)
    else:
        assert cfg is not None, "give a config or a run directory to resume"
        run_dir = preflight.check_output(cfg)   # before the model and the data load
    try:
        preflight.check_device(cfg)
        return _train(cfg, run_dir, lock, resume is not None, model=model, tokenizer=tokenizer,
                      train_records=train_records, eval_records=eval_records, reward=reward, engine=engine,
                      stop_after=stop_after, started=started, warm_start=warm_start)
    finally:
        if lock is not None:
            lock.release()


def _train(cfg: TrainConfig, run_dir: Path, lock: RunLock | None, resuming: bool, *, model: Any, tokenizer: Any,
           train_records: Sequence[Problem] | None, eval_records: dict[str, list[Problem]] | None,
           reward: Reward | None, engine: Any, stop_after: int | None, started: float | None = None,
           warm_start: WarmStart | None = None) -> Path:
    tc, lc, mc = cfg.train, cfg.loss, cfg.method
    check_sinks(cfg.log.tensorboard, cfg.log.wandb)
    if tc.deterministic:
        torch.use_deterministic_algorithms(True)
    from real_runs.models import resolve_device  # transformers, imported when a run starts
    device = resolve_device(cfg.model.device)
    random.seed(tc.seed)
    np.random.seed(tc.seed)
    torch.manual_seed(tc.seed)

    # --- parts: model, tokenizer, data, reward, engine, controllers, optimizer
    policy, tokenizer, records, data_summary = _load_parts(cfg, model, tokenizer, train_records, device)
    records, prompt_texts, too_long = preflight.prompt_texts(records, tokenizer, cfg.rollout.max_prompt_tokens)
    if too_long:
        print(f"gdro train: dropped {too_long} of {too_long + len(records)} training prompts longer than "
              f"rollout.max_prompt_tokens={cfg.rollout.max_prompt_tokens}", file=sys.stderr)
    data_summary.update({"dropped_too_long": too_long, "prompts": len(records)})
    eval_problems: list[Problem] = []
    if cfg.eval.every:
        if eval_records is None:
            from real_runs.data import load_dataset_records
            eval_records = {b: load_dataset_records(b, limit=cfg.eval.limit or None) for b in cfg.eval.benchmarks}
        eval_problems = [p for problems in eval_records.values() for p in problems]
        if not eval_problems:
            raise TrainError("eval.every > 0 but the evaluation sets hold no problem: set eval.benchmarks or eval.every=0")
    prompts = PromptIndex()  # stable ids interned once: record i -> record_index[i]
    record_index = prompts.intern([r.id for r in records])
    method = MethodStep(mc.method(), mc.step_configs(), tc.seed, prompts, box=(mc.n_bar, mc.n_min, mc.n_max))
    if warm_start is not None and not resuming:
        warm_start(method.controllers(), record_index, prompts, records)
    order = DataOrder(len(records), tc.seed, cfg.data.shuffle)
    autocast = _autocast(cfg, device)
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
    if engine is None:
        from real_runs.engines import make_engine
        engine_kwargs = {"dtype": "bfloat16"} if cfg.rollout.engine == "vllm" else {}  # fp32 master weights stay here
        engine = make_engine(cfg.rollout.engine, policy, tokenizer, **engine_kwargs)
    optim = cfg.optim
    optimizer = torch.optim.AdamW(policy.parameters(), lr=optim.lr * optim.lr_scale, betas=(optim.beta1, optim.beta2),
                                  eps=optim.eps, weight_decay=optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / optim.warmup_steps) if optim.warmup_steps else 1.0)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    # --- run directory (new, or resumed from the last checkpoint: no gap, no duplicate step)
    start = 0
    if not resuming:
        lock = preflight.claim_run_dir(run_dir)
        try:
            writer = _new_run(cfg, run_dir, lock)
        except BaseException:
            lock.release()
            raise
        (run_dir / "data.json").write_text(json.dumps(data_summary, indent=1), encoding="utf-8")
    else:
        start, _ = ckpt.load_checkpoint(run_dir, model=policy, optimizer=optimizer, scheduler=scheduler,
                                        controllers={**saved_controllers(method), "data_order": order})
        writer = RunWriter.resume(run_dir, start, lock=lock)
    # flushed now: a cluster log (stdout to a file, block-buffered) keeps it when the process is killed
    print(f"gdro train: run directory {run_dir} (steps {start + 1}..{tc.steps})", flush=True)
    try:
        return _loop(cfg, writer, start, stop_after, policy=policy, tokenizer=tokenizer, reference=reference,
                     engine=engine, optimizer=optimizer, scheduler=scheduler, method=method, order=order,
                     records=records, prompt_texts=prompt_texts, eval_problems=eval_problems, reward=reward,
                     autocast=autocast, device=device, pad_id=pad_id, prompts=prompts, record_index=record_index,
                     clock=RunClock(started, logged_elapsed(run_dir, start)))
    finally:
        if not resuming and lock is not None:
            lock.release()


def _loop(cfg: TrainConfig, writer: RunWriter, start: int, stop_after: int | None, *, policy: Any, tokenizer: Any,
          reference: Any, engine: Any, optimizer: Any, scheduler: Any, method: MethodStep, order: DataOrder,
          records: list[Problem], prompt_texts: list[str], eval_problems: list[Problem], reward: Reward | None,
          autocast: Any, device: torch.device, pad_id: int, prompts: PromptIndex, record_index: np.ndarray,
          clock: RunClock | None = None) -> Path:
    """Steps ``start + 1 .. train.steps`` (or ``stop_after``): the numbered phases of the module docstring."""
    tc = cfg.train
    controllers = saved_controllers(method)
    run_dir = writer.path
    train_reward, eval_reward, owned = _rewards(cfg, reward)
    sinks = Sinks(run_dir, tensorboard=cfg.log.tensorboard, wandb=cfg.log.wandb, project=cfg.log.wandb_project,
                  config=config_to_dict(cfg), start_step=start)
    progress = None
    if tc.progress:
        from tqdm import tqdm
        progress = tqdm(total=tc.steps, initial=start, desc=run_dir.name, unit="step", dynamic_ncols=True)

    answers = [p.answer for p in records]
    on_policy = on_policy_update(cfg, policy)
    times = RunTimes()
    clock = clock or RunClock()
    last = tc.steps if stop_after is None else min(tc.steps, stop_after)
    try:
        for step in range(start + 1, last + 1):
            timer = Timer(device)
            step_start = time.perf_counter()
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)

            # 1. prompts, bins, plan (the budget is exact every step: MethodStep.plan checks it)
            with timer("plan"):
                batch = method.choose(order.take(tc.prompts_per_step), order.take, lambda rows: record_index[rows])
                plan = method.plan(record_index[batch])
                counts_P = plan.counts_P

            # 2. generate and score
            sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                      top_k=cfg.rollout.top_k, max_new_tokens=cfg.rollout.max_new_tokens,
                                      seed=tc.seed * 1_000_003 + step)
            with timer("generate"), torch.no_grad(), autocast():
                rollouts = engine.generate([prompt_texts[i] for i in batch], counts_P, sampling)
                if hasattr(engine, "sleep"):
                    engine.sleep()  # colocated engine: free its KV cache (vLLM: and weights) for training
            with timer("reward"):
                scored = train_reward.score(rollouts.texts,
                                            list(np.repeat(np.array(answers, dtype=object)[batch], counts_P)))
            rewards_R = np.asarray(scored.rewards_R, float)
            successes_R = np.asarray(scored.successes_R, bool)

            # 3-4. controllers, then weighted GRPO advantages
            with timer("controllers"):
                feedback = StepFeedback(plan.ids_P, plan.bins_P, counts_P, rewards_R, successes_R, prompts=prompts)
                outcome = method.observe(feedback, tokens_R=rollouts.lengths_R)
                advantages_R, adv_metrics = weighted_advantages(feedback, outcome.multipliers_P, cfg)

            # 5. old and reference log-probs, recomputed by a teacher-forced pass (old ones only when
            #    the update takes more than one optimizer step: on-policy they are the update's own)
            with timer("record"):
                generated_R = RolloutBatch.from_rollouts(rollouts, advantages_R, pad_id)
                batch_R, engine_logprobs = trained_rows(generated_R, rollouts.logprobs,
                                                        np.repeat(outcome.train_P, counts_P))
            sums: dict[str, float] = {}
            losses, grad_norms, engine_gap = [0.0], [0.0], []
            if batch_R.responses:  # the selector may drop every group: then no update this step
                with timer("logprobs"), torch.no_grad(), autocast():
                    engine_gap = recompute_logprobs(batch_R, policy, reference, tc.micro_batch_tokens, engine_logprobs,
                                                    old=not on_policy)

                # 6. PPO epochs over mini-batches of whole rollouts, micro-batches by token budget
                with timer("update"):
                    sums, losses, grad_norms, update_gap = ppo_update(batch_R, policy, optimizer, scheduler, cfg,
                                                                      step, autocast, engine_logprobs)
                engine_gap += update_gap
            for phase in ("time/logprobs", "time/update"):
                timer.seconds.setdefault(phase, 0.0)

            # 7. weights to the engine (no-op when it shares the module)
            with timer("sync"):
                if hasattr(engine, "wake_up"):
                    engine.wake_up()
                if getattr(engine, "model", None) is not policy:
                    engine.load_weights(policy.state_dict())

            # 8. the step record: controllers' diagnostics, losses, timings
            with timer("record"):
                scalars, per_bin = method.record(outcome)
                scalars.update({f"grpo/{k}": v for k, v in adv_metrics.items()})
                scalars.update(actor_scalars(batch_R, sums, losses, grad_norms, tc.ppo_epochs, engine_gap))
                scalars.update(rollout_scalars(generated_R, rollouts.finish_reasons))
                scalars["actor/lr"] = float(scheduler.get_last_lr()[0])
                scalars.update({k: float(v) for k, v in scored.metrics.items()})
            timer.seconds["time/step"] = time.perf_counter() - step_start
            scalars.update(timer.seconds)
            scalars.update(perf_scalars(timer.seconds, generated_R, batch_R, tc.ppo_epochs))
            scalars["perf/peak_memory_gb"] = peak_memory_gb(device)
            times.add_step(timer.seconds)
            if cfg.eval.every and (step % cfg.eval.every == 0 or step == tc.steps):
                if eval_reward is None:
                    from real_runs.rewards.math import MathReward
                    eval_reward = MathReward(timeout_s=cfg.rollout.reward_timeout_s, num_workers=cfg.rollout.reward_workers)
                    owned.append(eval_reward)
                with timer("eval"), torch.no_grad(), autocast():
                    eval_metrics = evaluate(cfg, engine, tokenizer, eval_problems, eval_reward, step)
                scalars["time/eval"] = timer.seconds["time/eval"]
                times.add("eval", timer.seconds["time/eval"])
            scalars["time/elapsed"] = clock.elapsed()
            log_start = time.perf_counter()
            if "time/eval" in scalars:
                writer.log_eval(step, eval_metrics)
                sinks.log_eval(step, eval_metrics)
            writer.log_step(step, scalars, per_bin)
            sinks.log(step, scalars, per_bin)
            times.add("log", time.perf_counter() - log_start)
            if step == last or (tc.save_every and step % tc.save_every == 0):
                save_start = time.perf_counter()
                writer.save_snapshot(step, {name: c.state_dict() for name, c in controllers.items()})
                ckpt.save_checkpoint(run_dir, step, model=policy, optimizer=optimizer, scheduler=scheduler,
                                     controllers={**controllers, "data_order": order}, data_state=order.state_dict(),
                                     keep_last=tc.keep_last, keep_optimizer_last=tc.keep_optimizer_last,
                                     tokenizer=tokenizer)
                times.add("checkpoint", time.perf_counter() - save_start)
            if progress is not None:
                progress.update(1)
                progress.set_postfix(reward=f"{scalars['mean_reward']:+.2f}", n=f"{counts_P.min()}-{counts_P.max()}")
    except BaseException:
        writer.close("failed")
        raise
    else:
        writer.close("finished" if last == tc.steps else "stopped")
    finally:
        sinks.close()
        if progress is not None:
            progress.close()
        for owned_reward in owned:
            owned_reward.close()
    if times.steps:
        times.write(run_dir)
        print("\n".join(f"gdro train: {line}" for line in times.lines()), file=sys.stderr)
    return run_dir


def saved_controllers(method: MethodStep) -> dict[str, Any]:
    """The controllers a checkpoint and a snapshot hold: all four, the selector only when the method
    has one (runs without a selector keep the checkpoint layout written before the selector family)."""
    return {family: controller for family, controller in method.controllers().items()
            if family != "selector" or method.method.selector != "none"}


def weighted_advantages(feedback: StepFeedback, multipliers_P: np.ndarray, cfg: TrainConfig
                        ) -> tuple[np.ndarray, dict[str, float]]:
    """Eq. 16 on Eq. 3: A_ij = m_i x clip((r_ij - mean_i) / (std_i + 1e-6), +-adv_clip) x adv_scale,
    response j of prompt i (rows grouped by prompt, ``feedback.counts_P`` each). -> (A_R, GRPO metrics)."""
    lc = cfg.loss
    advantages_R, metrics = feedback.advantages(std=lc.adv_std, clip=lc.adv_clip)
    return advantages_R * np.repeat(multipliers_P, feedback.counts_P) * lc.adv_scale, metrics


def actor_scalars(batch: RolloutBatch, sums: dict[str, float], losses: Sequence[float], grad_norms: Sequence[float],
                  ppo_epochs: int, engine_gap: Sequence[float]) -> dict[str, float]:
    """The update's step scalars: ``actor/<k>`` = token sum of k / (trained response tokens x epochs)
    (clip fractions, KL, entropy: per-token means over every pass), the mean loss and gradient norm
    over the mini-batches, and the largest trainer-vs-engine log-prob gap (0 when nothing was trained)."""
    all_tokens = float(batch.real_lengths.sum()) * ppo_epochs
    out = {f"actor/{k}": v / all_tokens if all_tokens else 0.0 for k, v in sums.items()}
    out.update({"actor/loss": float(np.mean(losses)), "actor/grad_norm": float(np.mean(grad_norms)),
                "actor/engine_logprob_gap_max": max(engine_gap, default=0.0)})
    return out


def rollout_scalars(generated: RolloutBatch, finish_reasons: Sequence[str]) -> dict[str, float]:
    """Lengths of the step's generated responses (real tokens) and prompts (tokens), and the share
    of responses cut at ``max_new_tokens`` (finish reason "length"); every generated row counts."""
    real = generated.real_lengths
    return {"response/length_mean": float(real.mean()), "response/length_max": float(real.max()),
            "response/length_min": float(real.min()),
            "response/truncated_frac": float(np.mean([r == "length" for r in finish_reasons])),
            "prompt/length_mean": float(np.mean([len(p) for p in generated.prompts]))}


def perf_scalars(seconds: dict[str, float], generated: RolloutBatch, trained: RolloutBatch,
                 ppo_epochs: int) -> dict[str, float]:
    """Throughputs and the controllers' share of the step, from the step's ``time/*`` seconds:
    tokens/s = (prompt + response tokens generated) / time/step; gen = real response tokens /
    time/generate; train = (prompt + response tokens trained) x epochs / time/update."""
    return {"time/controllers_share": seconds["time/controllers"] / seconds["time/step"],
            "perf/tokens_per_s": float(generated.lengths.sum()) / seconds["time/step"],
            "perf/gen_tokens_per_s": float(generated.real_lengths.sum()) / max(seconds["time/generate"], 1e-9),
            "perf/train_tokens_per_s": float(trained.lengths.sum()) * ppo_epochs / max(seconds["time/update"], 1e-9)}


def trained_rows(batch: RolloutBatch, engine_logprobs: Sequence[np.ndarray], keep_R: np.ndarray
                 ) -> tuple[RolloutBatch, Sequence[np.ndarray]]:
    """The rows of the groups the prompt selector keeps (the batch itself when it keeps every one)."""
    if keep_R.all():
        return batch, engine_logprobs
    rows = np.flatnonzero(keep_R)
    return (RolloutBatch([batch.prompts[r] for r in rows], [batch.responses[r] for r in rows], batch.real_lengths[rows],
                         batch.lengths[rows], batch.advantages[rows], batch.pad_id),
            [engine_logprobs[r] for r in rows.tolist()])

