"""What the calibration reads from real outputs, through files only (never by importing ``real_runs``).

- **Samples** (``gdro eval --save-samples``): ``eval_samples_step<S>.jsonl`` in an eval run
  directory, one JSON object per response: ``{"id", "sample", "success", "text"}`` plus
  ``"group"`` / ``"source"`` (the prompt's label and benchmark; older files have neither, then
  every prompt is in one group) and ``"tokens"`` (generated tokens; older files have none, then the
  world keeps its default length model). Responses are counted per ``id``: c successes of n samples.
- **Sweep** (``gdro train`` run directories, plain GRPO at a few learning rates): read with
  ``gdro_lab.runformat.runlog.read_run``. ``config.json`` gives lr (``optim.lr`` x ``optim.lr_scale``),
  prompts per step, n_bar, steps, the loss aggregation and the eval k; ``steps.jsonl`` gives the
  training batch's ``mean_success`` per step; ``eval.jsonl`` gives the held-out accuracy per
  group (``group/<name>/mean@k``, with its bootstrap bounds ``_lo`` / ``_hi``) or pooled
  (``pooled/mean@k``).
Every problem is a one-line ``ConfigError`` naming the file and the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab import ConfigError, RunFormatError
from gdro_lab.runformat.runlog import read_run
from simulators.calibrate.initial_difficulty import SuccessCounts
from simulators.calibrate.lengths import LengthSamples, posterior_pass

#: gdro train's loss aggregations -> the world's (token-mean weighs every rollout alike).
AGGREGATION = {"token-mean": "rollout", "seq-mean-token-mean": "prompt", "seq-mean-token-sum": "prompt",
               "seq-mean-token-sum-norm": "prompt"}


def samples_file(path: Path) -> Path:
    """The samples file of ``path`` (a file, or an eval run directory with exactly one such file)."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise ConfigError(f"--samples {path}: no such file or directory: give the folder `gdro eval --save-samples "
                          "--out` wrote, or its eval_samples_step<S>.jsonl")
    found = sorted(path.glob("eval_samples_step*.jsonl"))
    if len(found) != 1:
        what = "no eval_samples_step*.jsonl" if not found else f"{len(found)} samples files"
        raise ConfigError(f"--samples {path}: {what} in it: run `gdro eval --save-samples --out {path}` or give one file")
    return found[0]


def read_samples(paths: Sequence[Path]) -> SuccessCounts:
    """Per-prompt success counts and group labels from one or more samples files."""
    successes: dict[str, int] = {}
    samples: dict[str, int] = {}
    labels: dict[str, str] = {}
    rows: list[tuple[str, bool, int | None]] = []  # (id, success, tokens) per response, for the length fit
    for given in paths:
        path = samples_file(Path(given))
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    key, success = str(record["id"]), bool(record["success"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    if number > 1 and not line.endswith("\n"):
                        break  # a torn last line of a crashed writer
                    raise ConfigError(f"{path}:{number}: not a samples record (needs 'id' and 'success'): "
                                      "give a file written by gdro eval --save-samples") from None
                label = str(record.get("group") or record.get("source") or "all")
                if labels.setdefault(key, label) != label:
                    raise ConfigError(f"{path}:{number}: prompt {key!r} has two group labels "
                                      f"({labels[key]!r}, {label!r}): fix the file")
                rows.append((key, success, record.get("tokens")))
                successes[key] = successes.get(key, 0) + int(success)
                samples[key] = samples.get(key, 0) + 1
    if len(samples) < 16:
        raise ConfigError(f"--samples: only {len(samples)} prompts: evaluate at least 16 (hundreds for a useful fit)")
    names = tuple(sorted(set(labels.values())))
    index = {name: k for k, name in enumerate(names)}
    ids = sorted(samples)
    lengths = None
    if all(isinstance(t, int) and not isinstance(t, bool) for _, _, t in rows):
        pass_P = dict(zip(samples, posterior_pass(np.array([successes[k] for k in samples], float),
                                                  np.array(list(samples.values()), float))))
        lengths = LengthSamples(np.array([pass_P[k] for k, _, _ in rows]), np.array([y for _, y, _ in rows]),
                                np.array([t for _, _, t in rows], np.int64))
    return SuccessCounts(names, np.array([index[labels[i]] for i in ids], np.int64),
                         np.array([successes[i] for i in ids], np.int64), np.array([samples[i] for i in ids], np.int64),
                         lengths=lengths)


@dataclass
class SweepRun:
    """One GRPO run of the sweep.

    lr: the optimizer learning rate (lr x lr_scale); success_T: training-batch success per step
    1..T (NaN where not logged); eval_steps_E; heldout_EK and heldout_se_EK: held-out accuracy per
    group (in :attr:`Sweep.group_names` order) and its standard error, NaN where missing.
    """

    lr: float
    success_T: np.ndarray
    eval_steps_E: np.ndarray
    heldout_EK: np.ndarray
    heldout_se_EK: np.ndarray
    name: str = ""


@dataclass
class Sweep:
    """The learning-rate sweep: its runs and the settings they share."""

    runs: list[SweepRun]
    group_names: tuple[str, ...]
    """Held-out groups (the calibration groups), or ("pooled",) when the eval's groups do not match them."""
    batch: int
    n: int
    steps: int
    aggregation: str
    temperature: float | None = None

    @property
    def lrs(self) -> np.ndarray:
        return np.array([r.lr for r in self.runs])


def _section(config: dict[str, Any], path: Path, *keys: str) -> Any:
    value: Any = config
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ConfigError(f"{path}/config.json has no {'.'.join(keys)}: give run directories written by gdro train")
        value = value[key]
    return value


def _metric_names(evals: list[dict[str, Any]], group: str, k: int) -> list[str]:
    """The eval's metrics of calibration group ``group``: ``group/<group>/mean@k``, or, when several benchmarks
    share the label (e.g. a val and a test half), every ``group/<bench>:<group>/mean@k``."""
    if group == "pooled":
        return [f"pooled/mean@{k}"]
    names = {n for e in evals for n in e.get("metrics", {}) if n.startswith("group/") and n.endswith(f"/mean@{k}")}
    exact = f"group/{group}/mean@{k}"
    return [exact] if exact in names else sorted(n for n in names if n[len("group/"):-len(f"/mean@{k}")]
                                                  .endswith(f":{group}"))


def _heldout(evals: list[dict[str, Any]], groups: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, value (E, K), standard error (E, K)); a group measured by several benchmarks of equal size gets
    their mean and the standard error of that mean."""
    steps = np.array([int(e["step"]) for e in evals], np.int64)
    value = np.full((steps.size, len(groups)), np.nan)
    se = np.full_like(value, np.nan)
    for j, group in enumerate(groups):
        names = _metric_names(evals, group, k)
        for e, record in enumerate(evals):
            metrics = record.get("metrics", {})
            parts = [(float(metrics[n]), metrics.get(n + "_lo"), metrics.get(n + "_hi")) for n in names
                     if metrics.get(n) is not None]
            if not parts:
                continue
            value[e, j] = np.mean([v for v, _, _ in parts])
            errors = [(float(hi) - float(lo)) / (2 * 1.96) if lo is not None and hi is not None else np.nan
                      for _, lo, hi in parts]
            se[e, j] = float(np.sqrt(np.sum(np.square(errors)))) / len(parts)
    return steps, value, se


def read_sweep(paths: Sequence[Path], groups: Sequence[str]) -> Sweep:
    """The sweep's GRPO run directories, checked to share their settings and differ in lr."""
    if len(paths) < 2:
        raise ConfigError("--sweep: give at least 2 GRPO run directories at different learning rates (3-5 is better)")
    runs: list[SweepRun] = []
    shared: dict[str, Any] = {}
    for path in map(Path, paths):
        try:
            run = read_run(path)
        except RunFormatError as err:
            raise ConfigError(f"--sweep {path}: {err}") from None
        config = run.config
        method = _section(config, path, "method", "name")
        if method != "grpo":
            raise ConfigError(f"--sweep {path}: method is {method!r}: the sweep must be plain GRPO (method.name = grpo)")
        settings: dict[str, Any] = {"batch": int(_section(config, path, "train", "prompts_per_step")),
                    "n": int(_section(config, path, "method", "n_bar")),
                    "aggregation": AGGREGATION.get(str(_section(config, path, "loss", "agg")), "rollout"),
                    "k": int(_section(config, path, "eval", "k")),
                    "temperature": float(_section(config, path, "rollout", "temperature"))}
        for key, value in settings.items():
            if shared.setdefault(key, value) != value:
                raise ConfigError(f"--sweep {path}: {key} = {value}, another run has {shared[key]}: "
                                  "sweep runs must differ only in the learning rate")
        lr = float(_section(config, path, "optim", "lr")) * float(config["optim"].get("lr_scale", 1.0))
        if "mean_success" not in run.scalars or run.steps.size == 0:
            raise ConfigError(f"--sweep {path}: steps.jsonl has no mean_success: the run logged no step yet")
        steps_total = int(run.steps.max())
        success = np.full(steps_total, np.nan)
        success[run.steps - 1] = run.scalars["mean_success"]
        use = list(groups) if all(_metric_names(run.evals, g, settings["k"]) for g in groups) else ["pooled"]
        eval_steps, value, se = _heldout(run.evals, use, settings["k"])
        runs.append(SweepRun(lr, success, eval_steps, value, se, path.name))
    lrs = [r.lr for r in runs]
    if len(set(lrs)) != len(lrs):
        raise ConfigError(f"--sweep: two runs share a learning rate ({sorted(lrs)}): give one run per lr")
    names = tuple(groups) if all(r.heldout_EK.shape[1] == len(groups) for r in runs) and groups else ("pooled",)
    if names == ("pooled",):
        for r, path in zip(runs, map(Path, paths)):
            if r.heldout_EK.shape[1] != 1:
                _, r.heldout_EK, r.heldout_se_EK = _heldout(read_run(path).evals, ["pooled"], shared["k"])
    length = min(r.success_T.size for r in runs)
    for r in runs:
        r.success_T = r.success_T[:length]
    return Sweep(sorted(runs, key=lambda r: r.lr), names, shared["batch"], shared["n"], length, shared["aggregation"],
                 shared["temperature"])
