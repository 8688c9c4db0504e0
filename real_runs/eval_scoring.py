"""Evaluating a model on benchmark problems: n samples per problem, generated in chunks and scored.

:func:`generate_and_score` is the one sampling-and-scoring path of ``gdro eval``
(:mod:`real_runs.eval_cli`), the trainer's periodic evaluation (:func:`evaluate`), the CPU LM
study's warm-start evaluations and its calibration data. Math problems are scored by the math
reward, multiple-choice ones (GPQA) by :class:`real_runs.rewards.choice.ChoiceReward`
(:func:`real_runs.rewards.choice.reward_kind`). The metrics are those of :mod:`real_runs.eval_metrics`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from real_runs.config import TrainConfig
from real_runs.data import format_prompt
from real_runs.eval_metrics import evaluation_metrics, stats_metrics
from real_runs.progress import BatchProgress, to_stderr
from real_runs.rewards.choice import ChoiceReward, reward_kind
from real_runs.types import Problem, Reward, SamplingParams


def generate_and_score(problems: Sequence[Problem], engine: Any, tokenizer: Any, n: int,
                       sampling: SamplingParams, batch_prompts: int, rewards: dict[str, Any],
                       log: Callable[[str], Any] = print, keep_samples: bool = False,
                       clock: Callable[[], float] = time.perf_counter, prefix: str = "gdro eval: "
                       ) -> tuple[np.ndarray, dict[str, float], list[dict[str, Any]]]:
    """Generate n samples per problem in chunks and score them; returns (successes_R, stats, samples).

    ``samples`` (id, sample index, success, text, generated tokens, group label and source per response) is
    filled only with ``keep_samples`` (``gdro calibrate`` reads the labels and the token counts).
    ``log`` gets the progress lines (:class:`real_runs.progress.BatchProgress`, each starting with ``prefix``; ``clock`` times them).
    """
    successes: list[np.ndarray] = []
    stats = {"tokens": 0.0, "truncated": 0.0, "reward/timeouts": 0.0, "reward/errors": 0.0}
    samples: list[dict[str, Any]] = []
    progress = BatchProgress(problems, n, batch_prompts, log, clock, prefix)
    for chunk, start in enumerate(range(0, len(problems), batch_prompts)):
        part = problems[start:start + batch_prompts]
        progress.begin(part)
        seed = None if sampling.seed is None else int(
            np.random.SeedSequence([sampling.seed, chunk]).generate_state(1)[0])
        chunk_sampling = SamplingParams(sampling.temperature, sampling.top_p, sampling.top_k,
                                        sampling.max_new_tokens, seed)
        rollouts = engine.generate([format_prompt(p, tokenizer) for p in part],
                                   np.full(len(part), n), chunk_sampling)
        owners = [p for p in part for _ in range(n)]
        success_R = np.zeros(len(owners), bool)
        for kind in ("math", "choice"):
            rows = [r for r, p in enumerate(owners) if reward_kind(p.source) == kind]
            if rows:
                result = rewards[kind].score([rollouts.texts[r] for r in rows],
                                             [owners[r].answer for r in rows])
                success_R[rows] = result.successes_R
                for key in ("reward/timeouts", "reward/errors"):
                    stats[key] += result.metrics.get(key, 0.0)
        successes.append(success_R)
        stats["tokens"] += float(rollouts.lengths_R.sum())
        stats["truncated"] += float(sum(r == "length" for r in rollouts.finish_reasons))
        if keep_samples:
            samples += [{"id": p.id, "sample": r % n, "success": bool(s), "text": t, "tokens": int(k),
                         "group": p.group, "source": p.source}
                        for r, (p, s, t, k) in enumerate(zip(owners, success_R, rollouts.texts, rollouts.lengths_R))]
        progress.end(part)
    return np.concatenate(successes), stats, samples


def evaluate(cfg: TrainConfig, engine: Any, tokenizer: Any, problems: Sequence[Problem], reward: Reward,
             step: int) -> dict[str, float]:
    """The trainer's evaluation at ``step``: k samples per evaluation problem at the validation sampling;
    the metrics of :mod:`real_runs.eval_metrics` (``{bench}/mean@k``, ``{bench}/pass@k``, pooled, worst
    group / benchmark, 95% bootstrap bounds, and the sample statistics of ``sample_metrics``: the same
    names and definitions as ``gdro eval``).

    Math problems are scored by ``reward``, multiple-choice ones (GPQA) by ``ChoiceReward``. With
    ``train.progress`` its batches print as ``gdro eval``'s do, on stderr with the run's other
    evaluation lines (``gdro train: evaluation at step S: 256/1,745 prompts, ...``).
    """
    ec = cfg.eval
    log = to_stderr if cfg.train.progress else (lambda line: None)
    start = time.perf_counter()
    sampling = SamplingParams(temperature=ec.temperature, top_p=ec.top_p, top_k=ec.top_k,
                              max_new_tokens=ec.max_new_tokens, seed=cfg.train.seed * 1_000_003 + 500_000 + step)
    successes_R, stats, _ = generate_and_score(problems, engine, tokenizer, ec.k, sampling,
                                               batch_prompts=cfg.train.prompts_per_step,
                                               rewards={"math": reward, "choice": ChoiceReward()}, log=log,
                                               prefix=f"gdro train: evaluation at step {step}: ")
    metrics = evaluation_metrics(successes_R, np.full(len(problems), ec.k), [p.source for p in problems],
                                 [p.group for p in problems], ec.k, seed=cfg.train.seed + step)
    metrics.update(stats_metrics(stats, len(problems) * ec.k, time.perf_counter() - start))
    return metrics
