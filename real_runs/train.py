"""`gdro train`: GRPO with Prompt-GDRO and/or Rollout-GDRO on a real language model, one machine.

One step, top to bottom (style: nanochat ``chat_rl.py``, CleanRL ``ppo.py``):
  1. next P prompts in a seeded order; the classifier gives their bins; the allocator plans n_i
     (sum exactly P n_bar, checked every step);
  2. the engine generates n_i responses per prompt; the reward scores them (+1 / -1);
  3. ``StepFeedback`` -> classifier, Prompt-GDRO and Rollout-GDRO updates;
  4. GRPO advantages (Eq. 3, ragged groups, clipped to +-5) x the Prompt-GDRO multipliers (Eq. 16);
  5. old and reference log-probs recomputed here by a teacher-forced forward pass (the engine's
     log-probs are not used: with vLLM they come from another kernel and precision);
  6. PPO epochs over mini-batches, micro-batches by token budget (sorted by length), loss of
     ``real_runs.loss`` (Eq. 4-6), gradient clipping, AdamW with linear warm-up;
  7. weights to the engine (a no-op when the hf engine shares the module);
  8. ``step_record`` + losses, timings (``time/*``), tokens/s, memory -> steps.jsonl (and sinks);
     evaluation and checkpoint on schedule.

Follows the paper (arXiv 2601.19280 §2-3, App. A) in the update rules of the controllers (all
from ``gdro_lab``), the asymmetric clip, the KL loss and the advantage clip. Departs:
- log-probs are of the raw distribution (temperature 1), as the engines report them; verl divides
  the logits by the sampling temperature (identical at the released scripts' training temperature 1.0);
- the controllers update before the advantages are weighted (README "The core library"), so the
  weights used at step t already include step t's signal;
- fp32 master weights with bf16 autocast on GPU (lr 1e-6 updates vanish in bf16 weights).
"""

from __future__ import annotations

import copy
import os
import random
import resource
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from gdro_lab import RunWriter, StepFeedback, build
from gdro_lab.grpo import grpo_advantages
from gdro_lab.record import step_record
from gdro_lab.runlog import is_run_dir, read_run
from real_runs import checkpoint as ckpt
from real_runs import loss as L
from real_runs.config import TrainConfig, config_from_dict, config_to_dict
from real_runs.sinks import Sinks, check_sinks
from real_runs.types import Problem, Reward, SamplingParams

PRODUCER = "gdro train"
REPO_ROOT = Path(__file__).resolve().parent.parent


class TrainError(ValueError):
    """A run cannot start or resume; the message is one line naming the problem and the fix."""


# ----------------------------------------------------------------------------- small helpers

class DataOrder:
    """Prompts in a seeded random order per epoch; the position is all a resumed run needs."""

    def __init__(self, size: int, seed: int, shuffle: bool):
        self.size, self.seed, self.shuffle, self.position = size, seed, shuffle, 0
        self._epoch, self._order = -1, np.arange(size)

    def take(self, count: int) -> np.ndarray:
        out = np.empty(count, np.int64)
        for j in range(count):
            epoch, index = divmod(self.position, self.size)
            if epoch != self._epoch and self.shuffle:
                self._epoch, self._order = epoch, np.random.default_rng([self.seed, epoch]).permutation(self.size)
            out[j] = self._order[index]
            self.position += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position, "size": self.size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = int(state["position"])


class Timer:
    """Accumulates wall-clock seconds per phase: ``with timer("generate"): ...`` -> ``time/generate``."""

    def __init__(self, device: torch.device):
        self.device, self.seconds = device, {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.seconds[f"time/{name}"] = self.seconds.get(f"time/{name}", 0.0) + time.perf_counter() - start


def _resolve_path(name: str) -> str:
    """Relative data paths are tried from the working directory, then from the repository root."""
    path = Path(name)
    if path.is_absolute() or path.exists() or not (REPO_ROOT / path).exists():
        return name
    return str(REPO_ROOT / path)


def micro_batches(lengths_R: np.ndarray, budget: int) -> list[np.ndarray]:
    """Split sample indices into micro-batches of at most ``budget`` padded tokens, longest first."""
    order = np.argsort(-lengths_R, kind="stable")
    batches, current, width = [], [], 0
    for index in order:
        width = max(width, int(lengths_R[index])) if current else int(lengths_R[index])
        if current and width * (len(current) + 1) > budget:
            batches.append(np.array(current))
            current, width = [], int(lengths_R[index])
        current.append(int(index))
    if current:
        batches.append(np.array(current))
    return batches


def response_logprobs(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                      responses: Sequence[Sequence[int]], pad_id: int, device: torch.device,
                      with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Teacher-forced log pi(y_t | x, y_<t) of each response token: (logp_BT, mask_BT, entropy_BT).

    Right-padded [prompt, response] rows; only the response positions go through the LM head,
    so the B x T x V logits never include the prompt.
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    width, span = max(lengths), max(len(r) for r in responses)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    positions = torch.zeros(len(prompts), span, dtype=torch.long)
    tokens = torch.full((len(prompts), span), pad_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), span)
    for row, (p, r) in enumerate(zip(prompts, responses)):
        input_ids[row, :lengths[row]] = torch.tensor(list(p) + list(r))
        attention[row, :lengths[row]] = 1
        positions[row, :len(r)] = torch.arange(len(p) - 1, len(p) - 1 + len(r))
        tokens[row, :len(r)] = torch.tensor(list(r), dtype=torch.long)
        mask[row, :len(r)] = 1.0
    input_ids, attention, positions, tokens = (t.to(device) for t in (input_ids, attention, positions, tokens))
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention, use_cache=False).last_hidden_state
    picked = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
    logits_BTV = model.get_output_embeddings()(picked)
    logp_BT = L.token_logprobs(logits_BTV, tokens)
    entropy_BT = L.token_entropy(logits_BTV) if with_entropy else None
    return logp_BT, mask.to(device), entropy_BT


def _peak_memory_gb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


# ----------------------------------------------------------------------------- setup

def _load_parts(cfg: TrainConfig, model: Any, tokenizer: Any, train_records: Any,
                device: torch.device) -> tuple[Any, Any, list[Problem]]:
    if model is None or tokenizer is None:
        from real_runs.models import load_policy
        seed_model, seed_tok = load_policy(cfg.model.name, device=str(device), dtype="float32",
                                           attn_implementation=None if cfg.model.attn_implementation == "auto"
                                           else cfg.model.attn_implementation, seed=cfg.train.seed)
        model, tokenizer = model or seed_model, tokenizer or seed_tok
    if train_records is None:
        from real_runs.data import load_dataset_records
        train_records = load_dataset_records(_resolve_path(cfg.data.train), split=cfg.data.split or None,
                                             limit=cfg.data.limit or None)
    if not train_records:
        raise TrainError(f"data.train={cfg.data.train!r} has no usable records (every row lacked a "
                         "problem or an answer): pass a data set with answers")
    return model.to(device), tokenizer, list(train_records)


def _prompts(records: list[Problem], tokenizer: Any, limit: int) -> tuple[list[Problem], list[str]]:
    from real_runs.data import format_prompt
    kept, texts = [], []
    for problem in records:
        text = format_prompt(problem, tokenizer)
        if len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= limit:
            kept.append(problem)
            texts.append(text)
    if not kept:
        raise TrainError(f"every training prompt is longer than rollout.max_prompt_tokens={limit}: raise it")
    return kept, texts


def _new_run(cfg: TrainConfig) -> RunWriter:
    """A fresh run directory (RunWriter refuses a folder that already holds a run)."""
    name = cfg.train.run_name or f"{cfg.method.name}-{Path(cfg.model.name).name}-s{cfg.train.seed}"
    return RunWriter(Path(cfg.train.out) / name, config_to_dict(cfg), cfg.method.num_bins, PRODUCER,
                     bin_labels=[f"accbin_{b}" for b in range(cfg.method.num_bins)])


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
    if not ckpt.checkpoint_steps(run_dir):
        raise TrainError(f"--resume {run_dir}: no complete checkpoint yet: start the run again")
    return run_dir


def load_run_config(run_dir: str | os.PathLike[str]) -> TrainConfig:
    """The resolved config a run was started with (its config.json)."""
    return config_from_dict(read_run(run_dir).config)


# ----------------------------------------------------------------------------- main

def main(cfg: TrainConfig | None, *, resume: str | None = None, model: Any = None, tokenizer: Any = None,
         train_records: Sequence[Problem] | None = None, eval_records: dict[str, list[Problem]] | None = None,
         reward: Reward | None = None, engine: Any = None) -> Path:
    """Train; returns the run directory. ``resume`` continues that run from its last checkpoint.

    model/tokenizer/train_records/eval_records/reward/engine replace what the config would load
    (e.g. a custom task suite). ``eval_records`` maps a benchmark name to its problems.
    """
    if resume is not None:
        cfg = load_run_config(check_resumable(resume))
    assert cfg is not None, "give a config or a run directory to resume"
    tc, lc, mc = cfg.train, cfg.loss, cfg.method
    check_sinks(cfg.log.tensorboard, cfg.log.wandb)
    if tc.deterministic:
        torch.use_deterministic_algorithms(True)
    device = torch.device("cuda" if cfg.model.device == "cuda" or (cfg.model.device == "auto"
                                                                   and torch.cuda.is_available()) else "cpu")
    random.seed(tc.seed)
    np.random.seed(tc.seed)
    torch.manual_seed(tc.seed)

    # --- parts: model, tokenizer, data, reward, engine, controllers, optimizer
    policy, tokenizer, records = _load_parts(cfg, model, tokenizer, train_records, device)
    records, prompt_texts = _prompts(records, tokenizer, cfg.rollout.max_prompt_tokens)
    eval_problems: list[Problem] = []
    if cfg.eval.every:
        if eval_records is None:
            from real_runs.data import load_dataset_records
            eval_records = {b: load_dataset_records(b, limit=cfg.eval.limit or None) for b in cfg.eval.benchmarks}
        eval_problems = [p for problems in eval_records.values() for p in problems]
        if not eval_problems:
            raise TrainError("eval.every > 0 but the evaluation sets hold no problem: set eval.benchmarks or eval.every=0")
    classifier_cfg, weighter_cfg, allocator_cfg = mc.controller_configs()
    names = mc.controller_names()
    controllers = {"classifier": build("classifier", names[0], classifier_cfg, seed=tc.seed),
                   "weighter": build("weighter", names[1], weighter_cfg, seed=tc.seed + 1),
                   "allocator": build("allocator", names[2], allocator_cfg, seed=tc.seed + 2)}
    classifier, weighter, allocator = controllers["classifier"], controllers["weighter"], controllers["allocator"]
    order = DataOrder(len(records), tc.seed, cfg.data.shuffle)
    reference = None
    if lc.kl_coef > 0:  # the frozen reference is the policy as loaded, before any checkpoint
        reference = copy.deepcopy(policy).eval().requires_grad_(False)
        if device.type == "cuda":
            reference.to(torch.bfloat16)
    if cfg.model.gradient_checkpointing:
        policy.gradient_checkpointing_enable()
    if cfg.model.compile:
        policy.base_model.compile(dynamic=True)  # the module response_logprobs and generate call
    if engine is None:
        from real_runs.engines import make_engine
        engine = make_engine(cfg.rollout.engine, policy, tokenizer)
    optim = cfg.optim
    optimizer = torch.optim.AdamW(policy.parameters(), lr=optim.lr * optim.lr_scale, betas=(optim.beta1, optim.beta2),
                                  eps=optim.eps, weight_decay=optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / optim.warmup_steps) if optim.warmup_steps else 1.0)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda" else nullcontext

    # --- run directory (new, or resumed from the last checkpoint: no gap, no duplicate step)
    start = 0
    if resume is None:
        writer = _new_run(cfg)
    else:
        start, _ = ckpt.load_checkpoint(resume, model=policy, optimizer=optimizer, scheduler=scheduler,
                                        controllers={**controllers, "data_order": order})
        writer = RunWriter.resume(resume, start)
    run_dir = writer.path
    owns_reward = reward is None
    if reward is None:
        from real_runs.reward import MathReward
        reward = MathReward(timeout_s=cfg.rollout.reward_timeout_s, num_workers=cfg.rollout.reward_workers)
    sinks = Sinks(run_dir, tensorboard=cfg.log.tensorboard, wandb=cfg.log.wandb, project=cfg.log.wandb_project,
                  config=config_to_dict(cfg), start_step=start)
    progress = None
    if tc.progress:
        from tqdm import tqdm
        progress = tqdm(total=tc.steps, initial=start, desc=run_dir.name, unit="step", dynamic_ncols=True)

    answers = [p.answer for p in records]
    budget = tc.prompts_per_step * mc.n_bar
    try:
        for step in range(start + 1, tc.steps + 1):
            timer = Timer(device)
            step_start = time.perf_counter()
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)

            # 1. prompts, bins, plan (the budget is exact every step)
            with timer("plan"):
                batch = order.take(tc.prompts_per_step)
                ids = [records[i].id for i in batch]
                bins_P = classifier.bins(ids)
                counts_P = np.asarray(allocator.plan(bins_P), np.int64)
            if int(counts_P.sum()) != budget or counts_P.min() < mc.n_min or counts_P.max() > mc.n_max:
                raise TrainError(f"allocator {names[2]!r} planned {int(counts_P.sum())} rollouts in "
                                 f"[{counts_P.min()}, {counts_P.max()}], not {budget} in [{mc.n_min}, {mc.n_max}]")

            # 2. generate and score
            sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                      top_k=cfg.rollout.top_k, max_new_tokens=cfg.rollout.max_new_tokens,
                                      seed=tc.seed * 1_000_003 + step)
            with timer("generate"), torch.no_grad(), autocast():
                rollouts = engine.generate([prompt_texts[i] for i in batch], counts_P, sampling)
            with timer("reward"):
                scored = reward.score(rollouts.texts, list(np.repeat(np.array(answers, dtype=object)[batch], counts_P)))
            rewards_R = np.asarray(scored.rewards_R, float)
            successes_R = np.asarray(scored.successes_R, bool)

            # 3-4. controllers, then weighted GRPO advantages
            with timer("controllers"):
                feedback = StepFeedback(ids, bins_P, counts_P, rewards_R, successes_R)
                metrics: dict[str, float] = {}
                for controller in (classifier, weighter, allocator):
                    metrics.update(controller.update(feedback))
                advantages_R, adv_metrics = grpo_advantages(rewards_R, counts_P, std=lc.adv_std, clip=lc.adv_clip)
                multipliers_P = weighter.multipliers(bins_P)
                advantages_R = advantages_R * np.repeat(multipliers_P, counts_P) * lc.adv_scale
            metrics.update({f"grpo/{k}": v for k, v in adv_metrics.items()})

            # 5. old and reference log-probs, recomputed by a teacher-forced pass
            prompts_R = [rollouts.prompt_token_ids[p] for p in rollouts.prompt_index_R()]
            responses_R = [list(t) if len(t) else [pad_id] for t in rollouts.token_ids]  # empty: one masked-out pad
            real_R = np.array([len(t) for t in rollouts.token_ids], np.int64)
            lengths_R = np.array([len(p) + len(r) for p, r in zip(prompts_R, responses_R)], np.int64)
            old_logp: list[torch.Tensor] = [torch.empty(0)] * len(responses_R)
            ref_logp: list[torch.Tensor | None] = [None] * len(responses_R)
            engine_gap: list[float] = []
            with timer("logprobs"), torch.no_grad(), autocast():
                policy.eval()
                for rows in micro_batches(lengths_R, tc.micro_batch_tokens):
                    args = ([prompts_R[r] for r in rows], [responses_R[r] for r in rows], pad_id, device)
                    logp, _, _ = response_logprobs(policy, *args)
                    ref = response_logprobs(reference, *args)[0] if reference is not None else None
                    for j, r in enumerate(rows):
                        old_logp[r] = logp[j, :len(responses_R[r])].float()
                        if real_R[r]:  # the engine's own log-probs, kept only as a consistency metric
                            engine_gap.append(float((old_logp[r][:real_R[r]].cpu()
                                                     - torch.as_tensor(rollouts.logprobs[r])).abs().max()))
                        if ref is not None:
                            ref_logp[r] = ref[j, :len(responses_R[r])].float()

            # 6. PPO epochs over mini-batches of whole rollouts, micro-batches by token budget
            sums: dict[str, float] = {}
            grad_norms, losses = [], []
            with timer("update"):
                policy.train()
                for epoch in range(tc.ppo_epochs):
                    shuffled = np.random.default_rng([tc.seed, step, epoch]).permutation(len(responses_R))
                    for mini in np.array_split(shuffled, tc.mini_batches):
                        num_tokens = float(max(real_R[mini].sum(), 1))
                        optimizer.zero_grad(set_to_none=True)
                        total = 0.0
                        for rows in micro_batches(lengths_R[mini], tc.micro_batch_tokens):
                            rows = mini[rows]
                            with autocast():
                                logp, mask, entropy = response_logprobs(
                                    policy, [prompts_R[r] for r in rows], [responses_R[r] for r in rows],
                                    pad_id, device, with_entropy=True)
                            mask = mask * (torch.arange(mask.shape[1], device=device)[None, :]
                                           < torch.as_tensor(real_R[rows], device=device)[:, None])
                            pad = lambda xs: torch.nn.utils.rnn.pad_sequence(xs, batch_first=True).to(device)  # noqa: E731
                            loss, part = L.policy_loss(
                                logp, pad([old_logp[r] for r in rows]), torch.as_tensor(advantages_R[rows], device=device),
                                mask, clip_low=lc.clip_low, clip_high=lc.clip_high, clip_ratio_c=lc.clip_ratio_c,
                                agg=lc.agg, ref_logp_BT=pad([ref_logp[r] for r in rows]) if reference is not None else None,
                                kl_coef=lc.kl_coef, kl_estimator=lc.kl_estimator, entropy_BT=entropy,
                                entropy_coef=lc.entropy_coef, num_tokens=num_tokens, num_seqs=float(len(mini)),
                                norm_length=float(cfg.rollout.max_new_tokens))
                            loss.backward()
                            total += float(loss.detach())
                            for key, value in part.items():
                                sums[key] = sums.get(key, 0.0) + float(value)
                        norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), optim.grad_clip or float("inf"))
                        grad_norms.append(float(norm))
                        losses.append(total)
                        optimizer.step()
                        scheduler.step()
                policy.eval()

            # 7. weights to the engine (no-op when it shares the module)
            with timer("sync"):
                if getattr(engine, "model", None) is not policy:
                    engine.load_weights(policy.state_dict())

            # 8. the step record: controllers' diagnostics, losses, timings
            scalars, per_bin = step_record(feedback, mc.num_bins, n_bar=mc.n_bar, n_min=mc.n_min, n_max=mc.n_max,
                                           weights_G=weighter.bin_weights(), multipliers_P=multipliers_P,
                                           sigma_G=np.sqrt(allocator.variance_G), mu=allocator.mu)
            all_tokens = float(real_R.sum()) * tc.ppo_epochs
            scalars.update(metrics)
            scalars.update({f"actor/{k}": v / all_tokens if all_tokens else 0.0 for k, v in sums.items()})
            scalars.update({"actor/loss": float(np.mean(losses)), "actor/grad_norm": float(np.mean(grad_norms)),
                            "actor/lr": float(scheduler.get_last_lr()[0]),
                            "response/length_mean": float(real_R.mean()), "response/length_max": float(real_R.max()),
                            "response/length_min": float(real_R.min()),
                            "response/truncated_frac": float(np.mean([r == "length" for r in rollouts.finish_reasons])),
                            "prompt/length_mean": float(np.mean([len(p) for p in prompts_R]))})
            scalars.update({k: float(v) for k, v in scored.metrics.items()})
            scalars["actor/engine_logprob_gap_max"] = max(engine_gap, default=0.0)
            timer.seconds["time/step"] = time.perf_counter() - step_start
            scalars.update(timer.seconds)
            scalars["time/controllers_share"] = timer.seconds["time/controllers"] / timer.seconds["time/step"]
            scalars["perf/tokens_per_s"] = float(lengths_R.sum()) / timer.seconds["time/step"]
            scalars["perf/gen_tokens_per_s"] = float(real_R.sum()) / max(timer.seconds["time/generate"], 1e-9)
            scalars["perf/train_tokens_per_s"] = float(lengths_R.sum()) * tc.ppo_epochs / max(timer.seconds["time/update"], 1e-9)
            scalars["perf/peak_memory_gb"] = _peak_memory_gb(device)
            if cfg.eval.every and (step % cfg.eval.every == 0 or step == tc.steps):
                with timer("eval"), torch.no_grad(), autocast():
                    writer.log_eval(step, evaluate(cfg, engine, tokenizer, eval_problems, reward, step))
                scalars["time/eval"] = timer.seconds["time/eval"]
            writer.log_step(step, scalars, per_bin)
            sinks.log(step, scalars)
            if step == tc.steps or (tc.save_every and step % tc.save_every == 0):
                writer.save_snapshot(step, {name: c.state_dict() for name, c in controllers.items()})
                ckpt.save_checkpoint(run_dir, step, model=policy, optimizer=optimizer, scheduler=scheduler,
                                     controllers={**controllers, "data_order": order}, data_state=order.state_dict(),
                                     keep_last=tc.keep_last)
            if progress is not None:
                progress.update(1)
                progress.set_postfix(reward=f"{scalars['mean_reward']:+.2f}", n=f"{counts_P.min()}-{counts_P.max()}")
    except BaseException:
        writer.close("failed")
        raise
    else:
        writer.close("finished")
    finally:
        sinks.close()
        if progress is not None:
            progress.close()
        if owns_reward and hasattr(reward, "close"):
            reward.close()
    return run_dir


def evaluate(cfg: TrainConfig, engine: Any, tokenizer: Any, problems: Sequence[Problem], reward: Reward,
             step: int) -> dict[str, float]:
    """k samples per evaluation problem at the validation sampling; the metrics of ``real_runs.evaluate``
    (``{bench}/mean@k``, ``{bench}/pass@k``, pooled, worst group / benchmark, 95% bootstrap bounds).

    Math problems are scored by the run's reward, multiple-choice ones (GPQA) by ``ChoiceReward``.
    """
    from real_runs.eval_cli import generate_and_score
    from real_runs.evaluate import evaluation_metrics
    from real_runs.reward import ChoiceReward
    ec = cfg.eval
    sampling = SamplingParams(temperature=ec.temperature, top_p=ec.top_p, top_k=ec.top_k,
                              max_new_tokens=ec.max_new_tokens, seed=cfg.train.seed * 1_000_003 + 500_000 + step)
    successes_R, stats, _ = generate_and_score(problems, engine, tokenizer, ec.k, sampling,
                                               batch_prompts=cfg.train.prompts_per_step,
                                               rewards={"math": reward, "choice": ChoiceReward()}, log=lambda *_: None)
    metrics = evaluation_metrics(successes_R, np.full(len(problems), ec.k), [p.source for p in problems],
                                 [p.group for p in problems], ec.k, seed=cfg.train.seed + step)
    metrics.update({f"eval/{k}": v for k, v in stats.items()})
    return metrics
