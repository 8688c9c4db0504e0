"""The numbers of a `gdro train` step record that the trainer computes itself (the controllers'
come from ``MethodStep.record``): the update's per-token means, the rollouts' lengths, throughputs
(step 8 of :mod:`real_runs.train`'s step).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gdro_lab.allocation import duet
from real_runs.batching import RolloutBatch
from real_runs.types import Rollouts


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


def abort_scalars(rollouts: Rollouts, max_new_tokens: int) -> dict[str, float]:
    """Early stopping's compute/* (:func:`gdro_lab.allocation.duet.abort_scalars`: everything generated, rollouts
    aborted, kept tails), plus rollouts stopped after their marker and ``tokens_saved_max`` = sum of
    max_new_tokens - tokens over the rows the rule stopped: an upper bound (what they would have generated
    without it is unknown, at most max_new_tokens)."""
    reasons, lengths = np.asarray(rollouts.finish_reasons), rollouts.lengths_R
    stopped = np.isin(reasons, ("abort", "marker"))
    return {**duet.abort_scalars(rollouts.counts_P, lengths, np.asarray(rollouts.weights_R)),
            "compute/rollouts_marker_stopped": float(np.sum(reasons == "marker")),
            "compute/tokens_saved_max": float(np.sum(max_new_tokens - lengths[stopped]))}


def perf_scalars(seconds: dict[str, float], generated: RolloutBatch, trained: RolloutBatch,
                 ppo_epochs: int) -> dict[str, float]:
    """Throughputs and the controllers' share of the step, from the step's ``time/*`` seconds:
    tokens/s = (prompt + response tokens generated) / time/step; gen = real response tokens /
    time/generate; train = (prompt + response tokens trained) x epochs / time/update."""
    return {"time/controllers_share": seconds["time/controllers"] / seconds["time/step"],
            "perf/tokens_per_s": float(generated.lengths.sum()) / seconds["time/step"],
            "perf/gen_tokens_per_s": float(generated.real_lengths.sum()) / max(seconds["time/generate"], 1e-9),
            "perf/train_tokens_per_s": float(trained.lengths.sum()) * ppo_epochs / max(seconds["time/update"], 1e-9)}
