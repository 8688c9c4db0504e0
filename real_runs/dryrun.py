"""`gdro train CONFIG --dry-run`: validate everything a run needs, print its plan, load no model.

Checks (each a line; a failed one is ERROR and exit 2) the config, output folder, device, model
source, training data and evaluation sets; then prints the plan (steps, rollouts, evaluations,
checkpoint sizes, projected GPU memory, paths). Detail: docs/train-notes.md#real_runs-dryrun.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from real_runs import memory
from real_runs.config import TrainConfig
from real_runs.data import load_train_records
from real_runs.preflight import check_device, check_output, model_shape, run_dir_of

SAMPLE = 1000


def _tokenizer(name: str) -> Any:
    """The model's tokenizer without its weights (tiny ones are built; others from local files)."""
    from real_runs.models import TINY_MODELS, checkpoint_folder, qwen_tokenizer, tiny_tokenizer
    if name in TINY_MODELS:
        return qwen_tokenizer() if name == "tiny-qwen" else tiny_tokenizer()
    from pathlib import Path

    from transformers import AutoTokenizer
    folder = checkpoint_folder(Path(name).expanduser())
    return AutoTokenizer.from_pretrained(str(folder) if folder.exists() else name, local_files_only=True)


def _long_prompts(records: list[Any], tokenizer: Any, limit: int, seed: int) -> str:
    from real_runs.data import format_prompt
    exact = len(records) <= SAMPLE
    rows = range(len(records)) if exact else np.random.default_rng(seed).choice(len(records), SAMPLE, replace=False)
    lengths = np.array([len(tokenizer(format_prompt(records[i], tokenizer), add_special_tokens=False)["input_ids"])
                        for i in rows])
    over = int((lengths > limit).sum())
    if exact:
        return f"{over} of {len(records)} prompts longer than {limit} tokens (dropped at start); median {np.median(lengths):.0f}"
    return (f"~{over / SAMPLE * len(records):,.0f} of {len(records):,} prompts longer than {limit} tokens (dropped at "
            f"start; estimated from {SAMPLE} sampled); median {np.median(lengths):.0f}")


def plan_lines(cfg: TrainConfig, problems: int, eval_sizes: dict[str, int], shape: Any, shape_from: str) -> list[str]:
    """The plan of a run (no checks): steps, rollouts, update, evaluation, checkpoints, memory, outputs."""
    tc, mc, ec = cfg.train, cfg.method, cfg.eval
    rollouts = tc.prompts_per_step * mc.n_bar
    visits = tc.steps * tc.prompts_per_step
    lines = [f"steps        {tc.steps:,} x {tc.prompts_per_step} prompts = {visits:,} prompt visits "
             f"({visits / max(problems, 1):.1f} passes over {problems:,} prompts)",
             f"rollouts     {rollouts:,} per step (prompts x n_bar {mc.n_bar}, arms {mc.n_min}..{mc.n_max}, method "
             f"{mc.name}: {'/'.join(mc.controller_names())}), {rollouts * tc.steps:,} in all; responses <= "
             f"{cfg.rollout.max_new_tokens} tokens, engine {cfg.rollout.engine}, reward {cfg.rollout.reward}",
             f"update       {tc.mini_batches} mini-batch(es) x {tc.ppo_epochs} PPO epoch(s) per step, micro-batches <= "
             f"{tc.micro_batch_tokens:,} tokens, gradient checkpointing {'on' if cfg.model.gradient_checkpointing else 'off'}"
             f", KL reference {'on' if cfg.loss.kl_coef > 0 else 'off'}"]
    if ec.every:
        evaluations = len(set(range(ec.every, tc.steps + 1, ec.every)) | {tc.steps})
        total = sum(eval_sizes.values())
        sizes = ", ".join(f"{name} {size}" for name, size in eval_sizes.items())
        lines.append(f"evaluation   every {ec.every} steps and at the end ({evaluations} evaluations): {sizes} = {total:,} "
                     f"problems x k={ec.k} = {total * ec.k:,} samples each, <= {ec.max_new_tokens} tokens")
    else:
        lines.append("evaluation   off (eval.every=0)")
    saves = len(set(range(tc.save_every, tc.steps + 1, tc.save_every) if tc.save_every else []) | {tc.steps})
    if shape is not None:
        size = memory.checkpoint_bytes(shape.parameters)
        keep_opt = tc.keep_optimizer_last or tc.keep_last
        on_disk = min(tc.keep_last, saves) * size["model"] + min(keep_opt, tc.keep_last, saves) * size["optimizer"]
        lines.append(f"checkpoints  {saves} saves, newest {tc.keep_last} kept ({keep_opt} with optimizer.pt): "
                     f"model {memory.human(size['model'])} + optimizer.pt {memory.human(size['optimizer'])} each, "
                     f"<= {memory.human(on_disk)} on disk ({shape.parameters:,} parameters, {shape_from})")
        projection = memory.project(shape, micro_batch_tokens=tc.micro_batch_tokens, kl=cfg.loss.kl_coef > 0,
                                    gradient_checkpointing=cfg.model.gradient_checkpointing)
        lines += memory.format_projection(cfg.model.name, projection, shape.parameters)
    else:
        lines.append(f"checkpoints  {saves} saves, newest {tc.keep_last} kept; sizes unknown: model shape {shape_from}")
    run_dir = run_dir_of(cfg)
    lines.append(f"outputs      {run_dir}/ (config.json, meta.json, steps.jsonl, eval.jsonl, data.json, timing.json, "
                 f"snapshots/, checkpoints/step_N/{', tensorboard/' if cfg.log.tensorboard else ''}"
                 f"{', wandb/' if cfg.log.wandb else ''})")
    return lines


def _check(lines: list[str], problems: list[str], label: str, action: Callable[[], Any]) -> Any:
    try:
        result = action()
    except (ValueError, OSError, ImportError) as err:
        message = " ".join(str(err).split()) or type(err).__name__
        lines.append(f"{label:<12} ERROR {message}")
        problems.append(f"{label}: {message}")
        return None
    return result


def dry_run(cfg: TrainConfig, out: Callable[[str], None] = print) -> list[str]:
    """Print the checks and the plan; returns the problems found (empty = the run can start)."""
    from real_runs.data import load_dataset_records
    from real_runs.models import check_model_source
    lines: list[str] = [f"config       ok (method {cfg.method.name}, model {cfg.model.name}, data {cfg.data.train})"]
    problems: list[str] = []
    run_dir = _check(lines, problems, "output", lambda: check_output(cfg))
    if run_dir is not None:
        lines.append(f"output       {run_dir}: new run (ok)")
    def device_ok() -> str:
        check_device(cfg)
        return "ok"

    if _check(lines, problems, "device", device_ok) is not None:
        lines.append(f"device       model.device={cfg.model.device} (ok)")
    source = _check(lines, problems, "model", lambda: check_model_source(cfg.model.name))
    if source is not None:
        lines.append(f"model        {cfg.model.name}: {source} (ok)")
    loaded = _check(lines, problems, "data", lambda: load_train_records(cfg))
    count = 0
    if loaded is not None:
        records, summary = loaded
        count = len(records)
        lines.append(f"data         {cfg.data.train}: {summary['problems']:,} problems ({summary['dropped_cjk']:,} rows with "
                     f"CJK text dropped{'' if cfg.data.english_only else ': english_only off'}, "
                     f"{summary['skipped_without_answer']:,} without an answer skipped"
                     f"{f', first {cfg.data.limit} kept' if cfg.data.limit else ''})")
        if source is not None:
            long = _check(lines, problems, "prompts", lambda: _long_prompts(
                records, _tokenizer(cfg.model.name), cfg.rollout.max_prompt_tokens, cfg.train.seed))
            if long is not None:
                lines.append(f"prompts      {long}")
    eval_sizes: dict[str, int] = {}
    if cfg.eval.every:
        for name in cfg.eval.benchmarks:
            found = _check(lines, problems, f"eval {name}", lambda: load_dataset_records(name, limit=cfg.eval.limit or None))
            if found is not None:
                eval_sizes[name] = len(found)
    shape, shape_from = model_shape(cfg.model.name)
    lines += plan_lines(cfg, count, eval_sizes, shape, shape_from)
    for line in lines:
        out(line)
    return problems

