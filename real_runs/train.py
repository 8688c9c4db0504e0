"""`gdro train`: GRPO with Prompt-GDRO and/or Rollout-GDRO on a real language model, one machine.

One step: prompts, bins and a plan n_i (sum exactly P n_bar); generate and score; controllers; GRPO
advantages (Eq. 3, clipped to +-5) x Prompt-GDRO multipliers (Eq. 16); reference log-probs; PPO with the
loss of ``real_runs.loss`` (Eq. 4-6); weights to the engine; step record, evaluation, checkpoint. Parts: :func:`main`,
:func:`_loop`, :func:`_step`; the run is built in :mod:`real_runs.train_setup`. Follows the paper
(§2-3, App. A) in the controllers' rules, the asymmetric clip, the KL loss and the advantage clip. Departs:
- log-probs are of the raw distribution (temperature 1), as the engines report them (verl: same at 1.0);
- the controllers update before the advantages are weighted, so step t's weights include its signal;
- fp32 master weights with bf16 autocast on GPU (lr 1e-6 updates vanish in bf16 weights);
- the paper presets use the ``hf`` engine, not vLLM, which is optional (``rollout.engine=vllm``).
Each phase in detail and where it lives: docs/train-notes.md#real_runs-train.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from gdro_lab.runformat.runlog import RunLock
from real_runs import checkpoint as ckpt
from real_runs import ppo, preflight
from real_runs.batching import RolloutBatch, Timer, peak_memory_gb
from real_runs.config import TrainConfig
from real_runs.eval_scoring import evaluate
from real_runs.overhead import RunTimes
from real_runs.sinks import Sinks
from real_runs.step_scalars import abort_scalars, actor_scalars, perf_scalars, rollout_scalars
from real_runs.train_setup import (Given, TrainRun, WarmStart, build, check_resumable, load_run_config, make_rewards,
                                   open_run_dir, saved_state, state_slots, sync_engine)
from real_runs.types import Problem, Reward, SamplingParams


def main(cfg: TrainConfig | None, *, resume: str | None = None, model: Any = None, tokenizer: Any = None,
         train_records: Sequence[Problem] | None = None, eval_records: dict[str, list[Problem]] | None = None,
         reward: Reward | None = None, engine: Any = None, stop_after: int | None = None,
         warm_start: WarmStart | None = None) -> Path:
    """Train; returns the run directory. ``resume`` continues that run from its last checkpoint.

    model/tokenizer/train_records/eval_records/reward/engine replace what the config would load;
    ``stop_after`` ends after that step with a checkpoint and status "stopped"; ``warm_start(method_step,
    record_index, prompts, records)`` runs once on a new run's fresh method step (MethodStep) before step 1.
    """
    started = time.perf_counter()  # time/elapsed counts from here (start-up included)
    lock = None
    if resume is not None:
        run_dir = check_resumable(resume)
        lock = RunLock(run_dir).acquire()   # a second writer is refused before it touches anything
        cfg = load_run_config(run_dir)
    else:
        assert cfg is not None, "give a config or a run directory to resume"
        run_dir = preflight.check(cfg)   # device, output folder, sinks: before the model and the data load
    # the first line, before minutes of start-up (flushed: a cluster log keeps it if the job is killed)
    print(f"gdro train: run directory {run_dir} " + (f"(resuming, up to step {cfg.train.steps})" if resume else
          f"(a new run, steps 1..{cfg.train.steps}, created once the model and the data have loaded)"), flush=True)
    try:
        given = Given(model=model, tokenizer=tokenizer, train_records=train_records, eval_records=eval_records,
                      reward=reward, engine=engine, warm_start=warm_start)
        run = build(cfg, given, resuming=resume is not None)
        if lock is None:   # a new run: its folder is created and claimed only now that everything loaded
            lock = preflight.claim_run_dir(run_dir)
        open_run_dir(run, run_dir, lock, resuming=resume is not None, started=started)
        # flushed now: a cluster log (stdout to a file, block-buffered) keeps it when the process is killed
        print(f"gdro train: run directory {run_dir} (steps {run.start + 1}..{cfg.train.steps})", flush=True)
        train_reward, eval_reward, owned = make_rewards(cfg, run.reward)
        return _loop(run, stop_after, train_reward, eval_reward, owned)
    finally:
        if lock is not None:
            lock.release()


def _loop(run: TrainRun, stop_after: int | None, train_reward: Reward, eval_reward: Reward | None,
          owned: list[Any]) -> Path:
    """Steps ``run.start + 1 .. train.steps`` (or ``stop_after``), each :func:`_step`, then its evaluation,
    step record and checkpoint on schedule; the run's status at the end (finished, stopped or failed).
    The rewards are :func:`real_runs.train_setup.make_rewards`'s; ``owned`` ones are closed at the end."""
    cfg, tc, writer = run.cfg, run.cfg.train, run.writer
    run_dir = writer.path
    sinks = Sinks(run_dir, tensorboard=cfg.log.tensorboard, wandb=cfg.log.wandb, project=cfg.log.wandb_project,
                  config=run.config_dict, start_step=run.start)
    progress = None
    if tc.progress:
        from tqdm import tqdm
        progress = tqdm(total=tc.steps, initial=run.start, desc=run_dir.name, unit="step", dynamic_ncols=True)
    on_policy = ppo.on_policy_update(cfg, run.policy)
    times = RunTimes()
    last = tc.steps if stop_after is None else min(tc.steps, stop_after)
    best_key = f"pooled/mean@{cfg.eval.k}"  # the best evaluation's checkpoint is kept (train.keep_best)
    best = ckpt.best_evaluation(run_dir, best_key, run.start) if tc.keep_best else None
    try:
        for step in range(run.start + 1, last + 1):
            scalars, per_bin, timer, counts_P = _step(run, step, train_reward, on_policy)
            times.add_step(timer.seconds)
            if cfg.eval.every and (step % cfg.eval.every == 0 or step == tc.steps):
                if eval_reward is None:
                    from real_runs.rewards.math import MathReward
                    eval_reward = MathReward(timeout_s=cfg.rollout.reward_timeout_s, num_workers=cfg.rollout.reward_workers)
                    owned.append(eval_reward)
                with timer("eval"), torch.no_grad(), run.autocast():
                    eval_metrics = evaluate(cfg, run.engine, run.tokenizer, run.eval_problems, eval_reward, step)
                scalars["time/eval"] = timer.seconds["time/eval"]
                times.add("eval", timer.seconds["time/eval"])
            new_best = tc.keep_best and "time/eval" in scalars and best_key in eval_metrics and (
                best is None or eval_metrics[best_key] > best[1])
            if new_best:
                best = (step, float(eval_metrics[best_key]))
            scalars["time/elapsed"] = run.clock.elapsed()
            log_start = time.perf_counter()
            if "time/eval" in scalars:
                writer.log_eval(step, eval_metrics)
                sinks.log_eval(step, eval_metrics)
            writer.log_step(step, scalars, per_bin)
            sinks.log(step, scalars, per_bin)
            times.add("log", time.perf_counter() - log_start)
            if step == last or new_best or (tc.save_every and step % tc.save_every == 0):
                save_start = time.perf_counter()
                states = saved_state(run.method_step)
                slots = {**state_slots(states, states), "data_order": run.order}
                writer.save_snapshot(step, states)
                ckpt.save_checkpoint(run_dir, step, model=run.policy, optimizer=run.optimizer, scheduler=run.scheduler,
                                     controllers=slots,
                                     data_state=run.order.state_dict(), keep_last=tc.keep_last,
                                     keep_optimizer_last=tc.keep_optimizer_last, tokenizer=run.tokenizer,
                                     keep_steps=() if best is None else (best[0],))
                times.add("checkpoint", time.perf_counter() - save_start)
            if progress is not None:
                progress.update(1)
                reward = scalars.get("mean_reward", float("nan"))  # absent when early stopping left nothing scored
                progress.set_postfix(reward=f"{reward:+.2f}", n=f"{counts_P.min()}-{counts_P.max()}")
    except BaseException as err:
        writer.close("interrupted" if isinstance(err, KeyboardInterrupt) else "failed")  # both resumable
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


def _step(run: TrainRun, step: int, train_reward: Reward, on_policy: bool
          ) -> tuple[dict[str, float], dict[str, Any], Timer, np.ndarray]:
    """One step, the numbered phases of the module docstring: (the step record's scalars and per-bin
    rows, the phases' timer, the rollouts per prompt)."""
    cfg, tc, method_step, engine = run.cfg, run.cfg.train, run.method_step, run.engine
    timer = Timer(run.device)
    step_start = time.perf_counter()
    if run.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(run.device)

    # 1. prompts, bins, plan (the budget is exact every step: MethodStep.plan checks it)
    with timer("plan"):
        batch = method_step.choose(run.order.take(tc.prompts_per_step), run.order.take, lambda rows: run.record_index[rows])
        plan = method_step.plan(run.record_index[batch])
        counts_P = plan.counts_P

    # 2. generate and score
    sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                              top_k=cfg.rollout.top_k, max_new_tokens=cfg.rollout.max_new_tokens,
                              seed=tc.seed * 1_000_003 + step, abort_horizon=cfg.rollout.abort_horizon,
                              abort_grace=cfg.rollout.abort_grace, abort_keep_prob=cfg.rollout.abort_keep_prob)
    with timer("generate"), torch.no_grad(), run.autocast():
        rollouts = engine.generate([run.prompt_texts[i] for i in batch], counts_P, sampling)
        if hasattr(engine, "sleep"):
            engine.sleep()  # colocated engine: free its KV cache (vLLM: and weights) for training
    with timer("reward"):
        scored = train_reward.score(rollouts.texts, list(np.repeat(run.answers[batch], counts_P)))
    rewards_R = np.asarray(scored.rewards_R, float)
    successes_R = np.asarray(scored.successes_R, bool)

    # 3-4. controllers, then weighted GRPO advantages, on the scored rollouts (early stopping: MethodStep.feedback)
    with timer("controllers"):
        feedback, _, rows_R = method_step.feedback(plan, rewards_R, successes_R, rollouts.weights_R)
        advantages_R, train_R, outcome = np.zeros(rows_R.size), np.zeros(rows_R.size, bool), None
        adv_metrics: dict[str, float] = {}
        if feedback is not None:  # else nothing was scored: no controller update, no loss
            outcome = method_step.observe(feedback, tokens_R=rollouts.lengths_R[rows_R])
            advantages_R[rows_R], adv_metrics = ppo.weighted_advantages(feedback, outcome.multipliers_P, cfg)
            train_R[rows_R] = np.repeat(outcome.train_P, feedback.counts_P)

    # 5-6. log-probs and the PPO update, on the groups the selector keeps
    with timer("record"):
        generated_R = RolloutBatch.from_rollouts(rollouts, advantages_R, run.pad_id)
        batch_R, engine_logprobs = ppo.trained_rows(generated_R, rollouts.logprobs, train_R)
    sums, losses, grad_norms, engine_gap = _update(run, step, batch_R, engine_logprobs, timer, on_policy)

    # 7. weights to the engine (no-op when it shares the module)
    with timer("sync"):
        sync_engine(run)

    # 8. the step record: controllers' diagnostics, losses, timings
    with timer("record"):
        scalars, per_bin = method_step.record(outcome) if outcome is not None else method_step.empty_record()
        scalars.update({f"grpo/{k}": v for k, v in adv_metrics.items()})
        scalars.update(actor_scalars(batch_R, sums, losses, grad_norms, tc.ppo_epochs, engine_gap))
        scalars.update(rollout_scalars(generated_R, rollouts.finish_reasons))
        scalars["actor/lr"] = float(run.scheduler.get_last_lr()[0])
        scalars.update({k: float(v) for k, v in scored.metrics.items()})
        if rollouts.weights_R is not None:
            scalars.update(abort_scalars(rollouts, cfg.rollout.max_new_tokens))
    timer.seconds["time/step"] = time.perf_counter() - step_start
    scalars.update(timer.seconds)
    scalars.update(perf_scalars(timer.seconds, generated_R, batch_R, tc.ppo_epochs))
    scalars["perf/peak_memory_gb"] = peak_memory_gb(run.device)
    return scalars, per_bin, timer, counts_P


def _update(run: TrainRun, step: int, batch_R: RolloutBatch, engine_logprobs: Sequence[np.ndarray], timer: Timer,
            on_policy: bool) -> tuple[dict[str, float], list[float], list[float], list[float]]:
    """Phases 5-6: old and reference log-probs, recomputed by a teacher-forced pass (old ones only when the
    update takes more than one optimizer step: on-policy they are the update's own), then PPO epochs over
    mini-batches of whole rollouts, micro-batches by token budget. Nothing when the selector dropped every
    group. -> (metric token sums, loss and grad norm per mini-batch, engine log-prob gaps)."""
    sums: dict[str, float] = {}
    losses, grad_norms, engine_gap = [0.0], [0.0], []
    if batch_R.responses:
        with timer("logprobs"), torch.no_grad(), run.autocast():
            engine_gap = ppo.recompute_logprobs(batch_R, run.policy, run.reference, run.cfg.train.micro_batch_tokens,
                                                engine_logprobs, old=not on_policy)
        with timer("update"):
            sums, losses, grad_norms, update_gap = ppo.ppo_update(batch_R, run.policy, run.optimizer, run.scheduler,
                                                                  run.cfg, step, run.autocast, engine_logprobs)
        engine_gap += update_gap
    for phase in ("time/logprobs", "time/update"):
        timer.seconds.setdefault(phase, 0.0)
    return sums, losses, grad_norms, engine_gap
