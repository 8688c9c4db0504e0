"""Synthetic run directories for the app's tests and benchmark (written with gdro_lab.runformat.runlog.RunWriter).

A curriculum that looks like the paper's: the prompt share drifts from the hard bins (bin 0)
toward higher bins over training (the traveling wave), Prompt-GDRO weights lead the data early
and catch up later (a decaying lead-lag gap), success rises with the bin index and with time,
and Rollout-GDRO spends an exact mean budget of 4 rollouts per prompt as an integer staircase
that follows sqrt(v_b). Methods: "grpo" (uniform weights, 4 rollouts), "prompt_gdro" (moving
weights), "rollout_gdro" (staircase and shadow price mu), "both" (all of it: the default, so
every panel of the app has something to show).

This is test data, not a simulator: nothing here learns. Diagnostic scalars are computed with
``gdro_lab.functional.diagnostics`` as a producer would.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gdro_lab.functional import diagnostics
from gdro_lab.runformat.runlog import RunWriter

N_BAR, N_MIN, N_MAX = 4, 2, 12
METHODS = ("grpo", "prompt_gdro", "rollout_gdro", "both")


def _largest_remainder(target_P: np.ndarray, total: int) -> np.ndarray:
    """Integers in [N_MIN, N_MAX] summing exactly to ``total``, closest to ``target_P``."""
    target = np.clip(target_P, N_MIN, N_MAX)
    plan = np.floor(target).astype(np.int64)
    order = np.argsort(-(target - plan), kind="stable")
    position = 0
    while plan.sum() != total:
        index = order[position % plan.size]
        if plan.sum() < total and plan[index] < N_MAX:
            plan[index] += 1
        elif plan.sum() > total and plan[index] > N_MIN:
            plan[index] -= 1
        position += 1
    return plan


@dataclass
class SyntheticCurriculum:
    """Step records of a fake training run with ``num_bins`` bins over ``total_steps`` steps."""

    num_bins: int = 6
    total_steps: int = 30
    method: str = "both"
    seed: int = 0
    batch: int = 64
    #: Real-run extras: ``time/*`` step times, ``perf/tokens_per_s`` and evaluations under the
    #: agreed names (``{bench}/mean@8`` with ``_lo``/``_hi``, ``pooled/``, ``worst_group/``...).
    real: bool = False
    #: Leading steps on which no prompt is assigned to a bin yet (count 0, share 0 logged).
    warmup: int = 0
    #: Learning-rate scale written into the config (the simulator's lr grid).
    lr_scale: float = 1.0
    #: ``simulator``: a flat config (``method``, ``seed``, ``lr_scale``) as ``gdro simulate`` writes;
    #: ``trainer``: the nested sections of ``gdro train`` (``method.name``, ``train.seed``, ``optim.lr_scale``).
    layout: str = "simulator"
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {self.method!r}")
        self.rng = np.random.default_rng(self.seed)

    @property
    def uses_prompt_gdro(self) -> bool:
        return self.method in ("prompt_gdro", "both")

    @property
    def uses_rollout_gdro(self) -> bool:
        return self.method in ("rollout_gdro", "both")

    def config(self) -> dict[str, Any]:
        """The resolved config a producer would save."""
        if self.layout == "trainer":
            return trainer_config(self.method, self.seed, self.lr_scale, self.num_bins, self.total_steps, self.batch)
        return {"study": "synthetic", "method": self.method, "seed": self.seed, "steps": self.total_steps,
                "num_bins": self.num_bins, "batch_prompts": self.batch, "lr_scale": self.lr_scale,
                "prompt_gdro": {"enabled": self.uses_prompt_gdro, "eta": 0.65, "gamma": 0.01, "beta": 0.12,
                                "weight_cap": 15.0},
                "rollout_gdro": {"enabled": self.uses_rollout_gdro, "n_bar": N_BAR, "n_min": N_MIN,
                                 "n_max": N_MAX, "dual_lr": 0.05}}

    def _progress(self, step: int) -> float:
        return step / max(self.total_steps - 1, 1)

    def _bump(self, center: float) -> np.ndarray:
        width = max(0.8, 0.2 * self.num_bins)
        logits = -((np.arange(self.num_bins) - center) ** 2) / (2 * width**2)
        probs = np.exp(logits - logits.max())
        return probs / probs.sum()

    def _rollouts(self, counts: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """Per-bin mean rollouts of an exact-budget integer plan following sqrt(v_b) (the staircase)."""
        if not self.uses_rollout_gdro:
            return np.where(counts > 0, float(N_BAR), np.nan)
        share = counts / counts.sum()
        spread = np.nan_to_num(sigma) + 0.05
        target = N_BAR * spread / float(share @ spread)
        bins_P = np.repeat(np.arange(self.num_bins), counts)
        plan = _largest_remainder(target[bins_P], N_BAR * int(counts.sum()))
        sums = np.bincount(bins_P, weights=plan, minlength=self.num_bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def record(self, step: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """(scalars, bins) of one step, as a producer passes them to ``RunWriter.log_step``."""
        progress, num_bins = self._progress(step), self.num_bins
        counts = self.rng.multinomial(self.batch, self._bump((num_bins - 1) * (0.1 + 0.6 * progress))).astype(float)
        share = counts / counts.sum()
        if step < self.warmup:
            return self._warmup_record(progress)
        if self.uses_prompt_gdro:
            lead = 0.3 * num_bins * math.exp(-4 * progress) - 0.04 * num_bins * progress
            weight = 0.99 * self._bump((num_bins - 1) * (0.1 + 0.6 * progress) + lead) + 0.01 / num_bins
        else:
            weight = np.full(num_bins, 1.0 / num_bins)
        logits = (np.arange(num_bins) - (num_bins - 1) / 2) / max(0.12 * num_bins, 0.6) + 3 * progress - 1
        success = np.clip(1 / (1 + np.exp(-logits)) + self.rng.normal(0, 0.02, num_bins), 0.01, 0.99)
        empty = counts == 0
        success = np.where(empty, np.nan, success)
        # Per-bin signal spread: reward std, scaled up toward the higher bins so that the
        # square-root allocation has something to gain (the paper reports 22-37% WSE reduction).
        sigma = 2 * np.sqrt(success * (1 - success)) * np.exp(2.0 * (np.arange(num_bins) / max(num_bins - 1, 1) - 0.5))
        rollouts = self._rollouts(counts.astype(np.int64), sigma)
        multiplier = weight / float(share @ weight)
        bins = {"count": counts, "share": share, "weight": weight, "multiplier": multiplier,
                "rollouts": rollouts, "reward": 2 * success - 1, "success": success, "sigma": sigma,
                "signal": np.where(empty, np.nan, self.rng.normal(0, 0.05, num_bins)), "score": np.log(weight)}
        return self._scalars(bins, progress), bins

    def _warmup_record(self, progress: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """A step before the classifier assigned any prompt: counts and shares logged as 0."""
        zeros, nan = np.zeros(self.num_bins), np.full(self.num_bins, np.nan)
        bins = {"count": zeros, "share": zeros, "weight": np.full(self.num_bins, 1.0 / self.num_bins),
                "rollouts": nan, "reward": nan, "success": nan, "sigma": nan}
        scalars: dict[str, Any] = {"mean_success": 0.2 + 0.1 * progress, "num_prompts": float(self.batch),
                                   "num_unassigned": float(self.batch), "mean_rollouts": float(N_BAR)}
        if self.real:
            scalars.update(self._times())
        return scalars, bins

    def _times(self) -> dict[str, float]:
        """Step times in seconds (generation dominates, as on a real driver) and tokens per second."""
        phases = {"plan": 0.01, "generate": 6.0, "reward": 0.4, "controllers": 0.05, "logprobs": 1.2,
                  "update": 2.5, "sync": 0.3}
        times = {f"time/{name}": float(seconds * (1 + 0.1 * self.rng.random())) for name, seconds in phases.items()}
        times["time/step"] = sum(times.values()) + 0.2
        times["time/controllers_share"] = times["time/controllers"] / times["time/step"]
        times["perf/tokens_per_s"] = float(self.batch * N_BAR * 512 / times["time/step"])
        return times

    def _scalars(self, bins: dict[str, np.ndarray], progress: float) -> dict[str, Any]:
        counts, share, success = bins["count"], bins["share"], bins["success"]
        gap, mu_weight, mu_data = diagnostics.lead_lag_gap(bins["weight"], share)
        se = diagnostics.se_report(share, bins["sigma"], np.nan_to_num(bins["rollouts"]), N_BAR, N_MIN, N_MAX)
        mean_success = float(np.nansum(share * success))
        scalars: dict[str, Any] = {
            "mean_success": mean_success, "mean_reward": 2 * mean_success - 1,
            "mean_rollouts": float(np.nansum(counts * bins["rollouts"]) / counts.sum()),
            "total_rollouts": float(np.nansum(counts * bins["rollouts"])), "num_prompts": float(counts.sum()),
            "num_unassigned": 0.0, "zero_variance_frac": float(np.nansum(share * (success**4 + (1 - success) ** 4))),
            "lead_lag_gap": gap, "mu_weight": mu_weight, "mu_data": mu_data, **se,
            "effective_support": diagnostics.effective_support(bins["weight"]),
            "worst_bin_success": diagnostics.worst_group(success),
        }
        if self.uses_rollout_gdro:
            scalars["mu"] = 0.3 + 0.5 * math.exp(-3 * progress) + float(self.rng.normal(0, 0.01))
        if self.real:
            scalars.update(self._times())
        return scalars

    def eval_metrics(self, step: int) -> dict[str, float]:
        """An evaluation record: accuracy, worst-group accuracy, pass@1, pass@8 and a count (real
        runs: the agreed per-benchmark names with 95% bounds instead)."""
        accuracy = min(0.95, 0.3 + 0.35 * self._progress(step) + float(self.rng.normal(0, 0.01)))
        if self.real:
            return real_eval_metrics(accuracy)
        return {"accuracy": accuracy, "worst_group_accuracy": 0.6 * accuracy, "pass@1": accuracy,
                "pass@8": 1 - (1 - accuracy) ** 3, "rollouts_total": float(N_BAR * self.batch * (step + 1))}

    def state(self, step: int) -> dict[str, Any]:
        """A controller snapshot: scores and the generator state."""
        return {"prompt_gdro": {"score": np.log(self._bump(step / max(self.total_steps, 1) * self.num_bins)),
                                "rng": self.rng.bit_generator.state}}


#: Benchmarks of a synthetic real run and how much harder each is than the mean.
BENCHMARKS = {"math500": 0.0, "aime24": -0.25, "gsm8k": 0.2}
GROUPS = {"algebra": 0.05, "geometry": -0.1}


def real_eval_metrics(accuracy: float) -> dict[str, float]:
    """Agreed-name eval metrics: per benchmark mean@8 / pass@8 with _lo/_hi, pooled, worst group,
    worst benchmark, per group — values derived from ``accuracy`` so that each is distinct."""
    metrics: dict[str, float] = {}

    def put(name: str, value: float, width: float = 0.04) -> None:
        value = float(np.clip(value, 0.01, 0.99))
        metrics[name], metrics[f"{name}_lo"], metrics[f"{name}_hi"] = value, max(0.0, value - width), min(1.0, value + width)

    means = {bench: accuracy + offset for bench, offset in BENCHMARKS.items()}
    for bench, mean in means.items():
        put(f"{bench}/mean@8", mean)
        put(f"{bench}/pass@8", 1 - (1 - np.clip(mean, 0.01, 0.99)) ** 3)
    pooled = float(np.mean(list(means.values())))
    put("pooled/mean@8", pooled, 0.02)
    put("pooled/pass@8", 1 - (1 - pooled) ** 3, 0.02)
    put("worst_benchmark/mean@8", min(means.values()))
    put("worst_group/mean@8", accuracy - 0.3, 0.06)
    for group, offset in GROUPS.items():
        put(f"group/{group}/mean@8", accuracy + offset, 0.08)
    metrics["rollouts_total"] = 1e6 * accuracy
    metrics["reward/timeouts"] = float(accuracy > 0.5)  # counts that stay in [0, 1]: not rates for all that
    metrics["reward/errors"] = 0.0
    return metrics


def trainer_config(method: str, seed: int, lr_scale: float, num_bins: int, steps: int, batch: int) -> dict[str, Any]:
    """A config in ``gdro train``'s layout (``real_runs.config.config_to_dict``: one section per
    dataclass); tests/apps checks the sections against the trainer's own when it is importable."""
    weighter = "gdro" if method in ("prompt_gdro", "both") else "uniform"
    allocator = "gdro" if method in ("rollout_gdro", "both") else "uniform"
    return {"model": {"name": "tiny", "dtype": "auto", "device": "auto"},
            "data": {"train": "dapo", "limit": 0, "shuffle": True},
            "rollout": {"engine": "hf", "temperature": 1.0, "max_new_tokens": 64},
            "method": {"name": method, "classifier": "window", "weighter": weighter, "allocator": allocator,
                       "num_bins": num_bins, "n_bar": N_BAR, "n_min": N_MIN, "n_max": N_MAX},
            "loss": {"clip_low": 0.2, "clip_high": 0.28, "kl_coef": 0.001, "agg": "token-mean"},
            "optim": {"lr": 1e-6, "lr_scale": lr_scale, "warmup_steps": 0},
            "train": {"steps": steps, "prompts_per_step": batch, "seed": seed, "save_every": 50, "out": "runs",
                      "run_name": f"{method}-tiny-s{seed}", "progress": True},
            "eval": {"every": 10, "k": 8},
            "log": {"tensorboard": False, "wandb": False, "wandb_project": "gdro-lab"}}


def open_synthetic_run(path: Path, curriculum: SyntheticCurriculum) -> RunWriter:
    """A RunWriter for a new synthetic run (status "running" until closed)."""
    return RunWriter(path, curriculum.config(), curriculum.num_bins, producer="tests/synthetic",
                     bin_labels=[f"accbin_{b}" for b in range(curriculum.num_bins)])


def log_steps(writer: RunWriter, curriculum: SyntheticCurriculum, steps: range, eval_every: int = 10) -> None:
    """Append ``steps`` to a run: step records, an evaluation every ``eval_every`` steps, one snapshot."""
    for step in steps:
        writer.log_step(step, *curriculum.record(step))
        if eval_every and (step % eval_every == 0 or step == curriculum.total_steps - 1):
            writer.log_eval(step, curriculum.eval_metrics(step))
        if step == curriculum.total_steps // 2:
            writer.save_snapshot(step, curriculum.state(step))


def write_synthetic_run(path: Path, steps: int = 30, num_bins: int = 6, seed: int = 0, method: str = "both",
                        eval_every: int = 10, real: bool = False, warmup: int = 0, lr_scale: float = 1.0,
                        layout: str = "simulator") -> Path:
    """Write a finished synthetic run into ``path`` (which must not hold a run); returns ``path``."""
    curriculum = SyntheticCurriculum(num_bins=num_bins, total_steps=steps, method=method, seed=seed, real=real,
                                     warmup=warmup, lr_scale=lr_scale, layout=layout)
    with open_synthetic_run(path, curriculum) as writer:
        log_steps(writer, curriculum, range(steps), eval_every)
    return path


def tree_digest(path: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``path`` (to prove nothing was written there)."""
    return {str(file.relative_to(path)): hashlib.sha256(file.read_bytes()).hexdigest()
            for file in sorted(path.rglob("*")) if file.is_file()}
