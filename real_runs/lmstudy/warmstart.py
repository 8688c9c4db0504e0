"""Supervised warm start: a small Qwen3 trained from scratch on the suite to partial competence.

Teacher forcing on ``problem -> \\boxed{answer}<eos>`` (loss on response tokens, AdamW, warm-up and
cosine decay); the model is :func:`real_runs.models.build_qwen3`. Cached under a key of every setting
(``GDRO_LMSTUDY_CACHE`` or an explicit directory), so every method and seed starts from the same
weights. Why and the cache layout: docs/lm-study-notes.md#real_runs-lmstudy-warmstart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from gdro_lab._validate import ConfigError, require_int, require_range
from real_runs.lmstudy import tasks
from real_runs.lmstudy.tokenizer import build_tokenizer
from real_runs.types import Problem

FORMAT = 1


@dataclass(frozen=True)
class WarmStartConfig:
    """Settings of the warm start; all of them enter the cache key.

    hidden_size, num_layers, num_heads, intermediate_size: the Qwen3 shape (defaults ~0.5 M params).
    steps, batch_size: optimizer steps and problems per step (>= 1).
    lr: peak AdamW learning rate (> 0) after ``warmup_steps``, cosine to 10% at the last step.
    seed: torch and data seed; task_seed: the suite's seed; heldout_per_group: the suite's split.
    slip_rate: the share of demonstrations in [0, 1) answered with the skill's systematic slip
        (why: docs/lm-study-notes.md#real_runs-lmstudy-warmstart).
    """

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 512
    steps: int = 2000
    batch_size: int = 128
    lr: float = 1e-3
    warmup_steps: int = 50
    seed: int = 0
    task_seed: int = 0
    heldout_per_group: int = 400
    slip_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "steps",
                     "batch_size", "heldout_per_group"):
            require_int("WarmStartConfig", name, getattr(self, name), 1)
        if self.hidden_size % self.num_heads:
            raise ConfigError(f"WarmStartConfig.hidden_size ({self.hidden_size}) must be a multiple "
                              f"of num_heads ({self.num_heads})")
        require_range("WarmStartConfig", "lr", self.lr, 0.0, lo_open=True)
        require_int("WarmStartConfig", "warmup_steps", self.warmup_steps, 0)
        require_range("WarmStartConfig", "slip_rate", self.slip_rate, 0.0, 1.0, hi_open=True)

    def key(self) -> str:
        """A short stable hash of the settings (and of this module's format version)."""
        fields = dataclasses.asdict(self)
        if not self.slip_rate:  # keys from before slips existed stay valid
            del fields["slip_rate"]
        blob = json.dumps({"format": FORMAT, **fields}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def model_overrides(self) -> dict[str, Any]:
        """Keyword overrides for :func:`real_runs.models.build_qwen3`."""
        return dict(hidden_size=self.hidden_size, num_hidden_layers=self.num_layers,
                    num_attention_heads=self.num_heads, num_key_value_heads=self.num_heads,
                    head_dim=self.hidden_size // self.num_heads,
                    intermediate_size=self.intermediate_size, max_position_embeddings=64)


def default_cache_root() -> Path:
    """``$GDRO_LMSTUDY_CACHE`` or ``~/.cache/gdro-lab/lmstudy`` (outside the repository)."""
    env = os.environ.get("GDRO_LMSTUDY_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gdro-lab" / "lmstudy"


def _default_builder(tokenizer: Any, seed: int = 0, **overrides: Any) -> torch.nn.Module:
    from real_runs.models import build_qwen3

    return build_qwen3(tokenizer, seed=seed, **overrides)


def supervised_batch(tokenizer: Any, problems: Sequence[Problem]) -> dict[str, torch.Tensor]:
    """Right-padded ``prompt + \\boxed{answer} + <eos>`` ids with labels only on the response."""
    ids_B, labels_B = [], []
    for p in problems:
        prompt = tokenizer(p.problem, add_special_tokens=False)["input_ids"]
        response = tokenizer(tasks.boxed(p.answer), add_special_tokens=False)["input_ids"]
        response = response + [tokenizer.eos_token_id]
        ids_B.append(prompt + response)
        labels_B.append([-100] * len(prompt) + response)
    width = max(len(x) for x in ids_B)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids_B])
    labels = torch.tensor([x + [-100] * (width - len(x)) for x in labels_B])
    return {"input_ids": input_ids, "attention_mask": (input_ids != pad) | (labels != -100),
            "labels": labels}


def greedy_accuracy(model: Any, tokenizer: Any, problems: Sequence[Problem],
                    batch_size: int = 500) -> dict[str, float]:
    """Held-out greedy exact-match accuracy per group (``response == \\boxed{answer}``): the
    ``right`` share of :func:`real_runs.lmstudy.slips.shares`."""
    from real_runs.lmstudy.slips import greedy_responses, shares

    return {g: row["right"] for g, row in shares(problems, greedy_responses(model, tokenizer, problems,
                                                                           batch_size)).items()}


def with_slips(problems: Sequence[Problem], slip_P: np.ndarray) -> list[Problem]:
    """The problems, those flagged in ``slip_P`` with their skill's slipped answer as target."""
    return [dataclasses.replace(p, answer=tasks.slipped_answer(p)) if slip else p
            for p, slip in zip(problems, slip_P)]


def _lr_factor(step: int, cfg: WarmStartConfig) -> float:
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    frac = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


def train_supervised(cfg: WarmStartConfig, build_model: Callable[..., Any] | None = None,
                     log: Callable[[str], None] = print) -> tuple[Any, Any, list[float]]:
    """Build the model and run the supervised phase; returns (model, tokenizer, loss per step)."""
    torch.manual_seed(cfg.seed)
    tokenizer = build_tokenizer()
    model = (build_model or _default_builder)(tokenizer, seed=cfg.seed, **cfg.model_overrides())
    model.train()
    task_cfg = tasks.TaskConfig(heldout_per_group=cfg.heldout_per_group, seed=cfg.task_seed)
    held = {p.problem for p in tasks.heldout_split(task_cfg)}
    rng = np.random.default_rng([cfg.seed, 17])
    slip_rng = np.random.default_rng([cfg.seed, 23])  # its own stream: slip_rate 0 keeps the clean stream
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, cfg))
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(cfg.steps):
        problems = tasks.sample_supervised(rng, cfg.batch_size, held)
        if cfg.slip_rate:
            problems = with_slips(problems, slip_rng.random(len(problems)) < cfg.slip_rate)
        batch = supervised_batch(tokenizer, problems)
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if (step + 1) % max(1, cfg.steps // 10) == 0:
            log(f"warm start step {step + 1}/{cfg.steps}: loss {np.mean(losses[-50:]):.4f} "
                f"({time.perf_counter() - started:.0f} s)")
    return model, tokenizer, losses


def warm_start(cfg: WarmStartConfig, cache_root: Path | None = None,
               build_model: Callable[..., Any] | None = None,
               log: Callable[[str], None] = print) -> Path:
    """The cached warm-start checkpoint directory for ``cfg``, training it first if absent.

    The directory is written under a temporary name and renamed, so a crash never leaves a
    half-written checkpoint that a later study would load.
    """
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    final = root / f"warmstart-{cfg.key()}"
    if (final / "warmstart.json").is_file():
        log(f"warm start: cached checkpoint {final}")
        return final
    started = time.perf_counter()
    model, tokenizer, losses = train_supervised(cfg, build_model, log)
    seconds = time.perf_counter() - started
    heldout = tasks.heldout_split(tasks.TaskConfig(heldout_per_group=cfg.heldout_per_group,
                                                   seed=cfg.task_seed))
    accuracy = greedy_accuracy(model, tokenizer, heldout)
    window = max(1, min(50, len(losses) // 5))  # steps averaged for the first / last loss
    tmp = root / f".tmp-warmstart-{cfg.key()}-{os.getpid()}"
    model.save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "tokenizer")
    summary = {"config": dataclasses.asdict(cfg), "key": cfg.key(), "seconds": seconds,
               "parameters": int(sum(p.numel() for p in model.parameters())),
               "loss_first": float(np.mean(losses[:window])), "loss_last": float(np.mean(losses[-window:])),
               "losses": losses[:: max(1, len(losses) // 200)], "heldout_greedy_accuracy": accuracy}
    (tmp / "warmstart.json").write_text(json.dumps(summary, indent=1))
    if final.exists():  # another process won the race; keep theirs
        return final
    tmp.rename(final)
    log(format_accuracy(accuracy, f"warm start done in {seconds:.0f} s, held-out greedy accuracy"))
    return final


def format_accuracy(accuracy: dict[str, float], title: str) -> str:
    """One line per group: ``group  0.42``."""
    return "\n".join([title] + [f"  {g:<6} {a:.3f}" for g, a in accuracy.items()])


def load_warm_start(path: Path) -> tuple[Any, Any, dict[str, Any]]:
    """(model, tokenizer, summary) of a cached checkpoint directory."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per run is noise in the study log

    path = Path(path)
    if not (path / "warmstart.json").is_file():
        raise FileNotFoundError(f"{path} is not a warm-start checkpoint (no warmstart.json): "
                                "run `gdro study lm` to build it")
    model = AutoModelForCausalLM.from_pretrained(path / "model")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path / "tokenizer")
    return model, tokenizer, json.loads((path / "warmstart.json").read_text())
