"""Study `arena`: the published rollout-allocation and prompt-selection rules on one fair footing.

Methods: ARENA_METHODS; worlds: the default, the three paper presets and the sqrt-law study's bimodal
world, each with the length model on (``world.lengths``). Equal compute: exactly batch x n_bar rollouts per
step for every method; held-out accuracy against tuned GRPO (paired by seed) at the final step (equal
rollouts) and at equal generated tokens (``equal_tokens``, docs/arena.md). Per world and method also SE
proxies against the oracle's, zero-variance and trained shares, tokens and wall time per step. Caching
and the LM arena: docs/studies-notes.md#simulators-studies-allocation_arena.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab.runformat.runlog import is_run_dir, read_run
from simulators.parallel import RunSummary, run_jobs
from simulators.presets import PRESETS
from simulators.simulator_methods import ARENA_METHODS
from simulators.studies.baselines import decision, run_matched
from simulators.studies.common import StudySettings, job, sim_config
from simulators.studies.sqrt_law_study import WORLDS as SQRT_LAW_WORLDS
from simulators.studies.tuning import Grid, lr_dir, tuned_grid
from studykit import lrgrid
from studykit.arena_settings import METHOD_SETTINGS
from studykit.stats import paired_ci

CACHE_VERSION = 4
"""Bump when a change of code (not of config) changes what a run produces: every digest is stale."""
DEFAULTS: dict[str, Any] = {"seeds": 3, "steps": 300, "prompts": 4000, "batch": 128, "methods": ARENA_METHODS,
                            "lr_grid": lrgrid.sqrt2_grid(0.5, 2.0), "eval_every": 50, "log_every": 5}
"""The full arena (about 1,000 runs of 300 steps plus the paper-scale block: hours on 2 cores); ``gdro arena``
takes --worlds/--seeds/--steps/--prompts/--batch to reduce it, and the report states the setting."""
WORLDS: dict[str, dict[str, Any]] = {"default": {}, **{name: dict(v) for name, v in PRESETS.items()},
                                     "bimodal": dict(SQRT_LAW_WORLDS["bimodal"])}
SE_ONLY = ("prompt_bayes", "prompt_stale")
"""Reference methods run at lr 1 only: they enter the SE table, not the learning comparison."""
PAPER_SCALE: dict[str, Any] = {"seeds": 3, "steps": 600, "prompts": 14116, "batch": 256}
"""The SE check at the sqrt-law study's scale (where the review measured bin-level Rollout-GDRO at 21.0%
of Eq. 28 against the per-prompt oracle's 36.1%): the bimodal world, lr 1, allocators only."""
PAPER_SCALE_METHODS = ("rollout_gdro", "gdro_prompt", "knapsack", "knapsack_code", "vip", "duet", "cero", "prompt_oracle",
                       "prompt_bayes", "prompt_stale")


def run(settings: StudySettings, worlds_only: Sequence[str] | None = None, paper_scale: bool = True) -> Path:
    """Run (or read from the digests) every world (or ``worlds_only``, names of WORLDS); write the report;
    returns report.md. ``paper_scale=False`` skips the SE check at the sqrt-law study's scale."""
    from simulators.studies import arena_report
    settings.validate()
    names = list(worlds_only or WORLDS)
    unknown = [n for n in names if n not in WORLDS]
    if unknown:
        from gdro_lab._validate import ConfigError
        raise ConfigError(f"--worlds: unknown world {unknown[0]!r}: choose from {', '.join(WORLDS)}")
    methods = tuple(settings.methods or DEFAULTS["methods"])
    if "grpo" not in methods:
        methods = ("grpo",) + methods
    worlds: dict[str, Any] = {}
    start = time.perf_counter()
    for name in names:
        overrides = WORLDS[name]
        world_settings = replace(settings, world={"lengths": True, **overrides, **settings.world})
        grid = run_cached_grid(world_settings, methods, settings.out, name)
        references = run_cached_grid(replace(world_settings, lr_grid=(1.0,)), SE_ONLY, settings.out, name)
        matched, factors = run_matched(world_settings, grid, methods, settings.out / "runs" / name)
        result = add_equal_tokens(decision(grid, matched, factors, methods), grid)
        worlds[name] = {"overrides": overrides, "grid": grid, "references": references,
                        "decision": result, "methods": methods,
                        "selector_matched": run_selector_matched(world_settings, grid, methods, settings.out, name)}
    scale_grid = None
    if paper_scale:
        full = all(getattr(settings, k) >= DEFAULTS[k] for k in ("seeds", "steps", "prompts"))
        sizes = PAPER_SCALE if full else {}  # a reduced arena (tests, smoke runs) keeps its own sizes here
        scale = replace(settings, world={"lengths": True, **WORLDS["bimodal"], **settings.world}, lr_grid=(1.0,),
                        **sizes)
        scale_grid = run_cached_grid(scale, PAPER_SCALE_METHODS, settings.out, "bimodal-paper-scale")
    return arena_report.write(settings, worlds, time.perf_counter() - start, scale_grid, defaults=DEFAULTS,
                             world_names=tuple(WORLDS))


def at_tokens(run: RunSummary, metric: str, budget: float) -> float:
    """``metric`` of ``run`` where its cumulative generated tokens reach ``budget``: linear in the tokens
    between the two evaluations around it (``tokens_total`` at each); NaN for a run without lengths."""
    if "tokens_total" not in run.evals:
        return float("nan")
    return float(np.interp(budget, run.evals["tokens_total"], run.evals[metric]))


def equal_tokens(a: Sequence[RunSummary], b: Sequence[RunSummary], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per seed, ``metric`` of ``a`` and of ``b`` at the same generated tokens: the smaller of the two runs'
    totals, so the run that spent more is read where it had spent the other's (never extrapolated;
    equal totals read both finals). Why not longer runs: docs/arena.md."""
    pairs = []
    for ra, rb in zip(a, b):
        budget = min(ra.evals.get("tokens_total", [np.nan])[-1], rb.evals.get("tokens_total", [np.nan])[-1])
        pairs.append((at_tokens(ra, metric, budget), at_tokens(rb, metric, budget)))
    return np.array([x for x, _ in pairs]), np.array([y for _, y in pairs])


def add_equal_tokens(result: dict[str, Any], grid: Grid) -> dict[str, Any]:
    """``result`` (baselines.decision's) with each gain's ``vs_tuned_tokens``: the method at its tuned lr
    against tuned GRPO at equal generated tokens, paired by seed."""
    for m, entry in result["gains"].items():
        for metric, values in entry.items():
            lr_m, lr_g = result["tuned_lr"][metric][m], result["tuned_lr"][metric]["grpo"]
            values["vs_tuned_tokens"] = list(paired_ci(*equal_tokens(grid[(m, lr_m)], grid[("grpo", lr_g)], metric)))
    return result


def run_cached_grid(settings: StudySettings, methods: Sequence[str], out: Path, world: str) -> Grid:
    """Every method x lr x seed as tuning.run_grid does (each method's own sqrt(2) grid, extended while its
    best val point for any tuned metric is at an edge, at most ``settings.lr_extend`` steps beyond each end),
    each run read from its digest when cached."""
    return tuned_grid(settings, methods, lambda points, text: _cached_points(settings, points, out, world, text),
                      f"arena ({world})")


def _cached_points(settings: StudySettings, points: Sequence[tuple[str, float]], out: Path, world: str,
                   description: str) -> Grid:
    keys = [(m, lr, s) for m, lr in points for s in range(settings.seeds)]
    jobs = [job(replace(settings, snapshot_seeds=0), sim_config(settings, m, s, METHOD_SETTINGS.get(m), lr_scale=lr),
                out / "runs" / world / m / lr_dir(lr) / f"seed{s}") for m, lr, s in keys]
    results = run_jobs(jobs, workers=settings.workers, progress=settings.progress, description=description,
                       job=cached_job)
    grid: Grid = {}
    for (m, lr, _), summary in zip(keys, results):
        grid.setdefault((m, lr), []).append(summary)
    return grid


def selector_step_factor(runs: Sequence[RunSummary]) -> float:
    """Mean over seeds and logged steps of batch / prompts trained on (a selector's larger step)."""
    factors = [np.nanmean(r.config["batch"] / r.scalars["compute/prompts_trained"]) for r in runs]
    return float(np.mean(factors))


def run_selector_matched(settings: StudySettings, grid: Grid, methods: Sequence[str], out: Path, world: str
                         ) -> dict[str, dict[str, Any]]:
    """GRPO whose shared and group steps are those of a selector: lr_shared and lr_group x the selector's
    mean batch / trained prompts, at lr scale 1 (cached like the grid). Why an lr grid cannot stand in:
    docs/studies-notes.md#simulators-studies-allocation_arena.
    """
    from gdro_lab.methods import get_method
    selectors = [m for m in methods if get_method(m).selector != "none"]
    out_runs: dict[str, dict[str, Any]] = {}
    jobs, keys = [], []
    for m in selectors:
        factor = selector_step_factor(grid[(m, 1.0)])
        out_runs[m] = {"factor": factor, "runs": []}
        for s in range(settings.seeds):
            base = sim_config(settings, "grpo", s)
            config = replace(base, world=replace(base.world, lr_shared=base.world.lr_shared * factor,
                                                 lr_group=base.world.lr_group * factor),
                             matched_to=m, match="selector_step")
            jobs.append(job(replace(settings, snapshot_seeds=0), config,
                            out / "runs" / world / f"grpo_stepmatched_{m}" / f"seed{s}"))
            keys.append(m)
    results = run_jobs(jobs, workers=settings.workers, progress=settings.progress,
                       description=f"arena ({world}, step-matched GRPO)", job=cached_job) if jobs else []
    for m, summary in zip(keys, results):
        out_runs[m]["runs"].append(summary)
    return out_runs


def fingerprint(config: Any) -> str:
    """Hash of a run's resolved config (controllers included) and CACHE_VERSION."""
    from simulators.loop import _config_payload
    text = json.dumps({"v": CACHE_VERSION, "config": _config_payload(config)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def digest_path(out_dir: Path) -> Path:
    """runs/<world>/<method>/lr<x>/seed<k> -> digests/<world>/<method>/lr<x>/seed<k>.json."""
    parts = out_dir.parts
    index = len(parts) - 1 - parts[::-1].index("runs")
    return Path(*parts[:index], "digests", *parts[index + 1:]).with_suffix(".json")


def cached_job(config: Any, out_dir: str, snapshots: bool = True) -> RunSummary:
    """A run_jobs job: the digest of an unchanged run, else the run (its old directory replaced)."""
    from simulators.parallel import _job
    path = Path(out_dir)
    digest = digest_path(path)
    key = fingerprint(config)
    if digest.is_file():
        stored = json.loads(digest.read_text(encoding="utf-8"))
        if stored.get("fingerprint") == key:
            return _summary_from(stored["summary"])
    if is_run_dir(path) and read_run(path).meta.get("producer") == "gdro-lab simulator":
        shutil.rmtree(path)  # our own stale run of this slot
    summary = _job(config, out_dir, snapshots)
    digest.parent.mkdir(parents=True, exist_ok=True)
    tmp = digest.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fingerprint": key, "summary": _summary_to(summary)}), encoding="utf-8")
    tmp.replace(digest)
    return summary


def _summary_to(summary: RunSummary) -> dict[str, Any]:
    return {"method": summary.method, "seed": summary.seed, "path": summary.path, "steps": summary.steps.tolist(),
            "scalars": {k: v.tolist() for k, v in summary.scalars.items()},
            "eval_steps": summary.eval_steps.tolist(), "evals": {k: v.tolist() for k, v in summary.evals.items()},
            "config": summary.config, "wall_s": summary.wall_s, "timing": summary.timing}


def _summary_from(data: dict[str, Any]) -> RunSummary:
    return RunSummary(method=data["method"], seed=int(data["seed"]), path=data["path"],
                      steps=np.array(data["steps"], np.int64),
                      scalars={k: np.array(v, float) for k, v in data["scalars"].items()}, bins={},
                      eval_steps=np.array(data["eval_steps"], np.int64),
                      evals={k: np.array(v, float) for k, v in data["evals"].items()},
                      config=data["config"], wall_s=float(data["wall_s"]), timing=data.get("timing"))
