"""The CPU learning study's baselines and verdicts: tuned GRPO, paired gains, and the paper's claims.

Tuned GRPO per metric (chosen on **val**, ``studykit.lrgrid``), paired gains by seed (``studykit.stats``)
and the claims (``studykit.claims``: "direction only" or "untested", since the model is not the
paper's). Detail: docs/lm-study-notes.md#real_runs-lmstudy-claim_verdicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab.runformat.runlog import read_run
from real_runs.lmstudy.metrics import METRICS, final_metrics
from studykit import lrgrid
from studykit.claim_measures import mechanism_measurements
from studykit.claims import Measurement, claim_rows
from studykit.stats import paired_ci, relative_gain_ci
from studykit.tables import fmt

EVIDENCE = "a 0.5 M-parameter Qwen3 on synthetic arithmetic"
#: (key, label) of the baselines every method is compared with; "tuned" is tuned GRPO.
BASELINES = (("grpo", "GRPO"), ("grpo_matched_first", "step-matched E[m]"),
             ("grpo_matched_second", "step-matched √E[m²]"), ("tuned", "tuned GRPO"))
UNTESTED = {
    "toy_ema_vs_class": "this study runs no class-based GDRO",
    "toy_support": "this study runs no class-based GDRO",
    "wave_profiles": "model-specific bin-mass profiles of the paper's runs",
    "weight_entropy": "not measured",
    "six_bins": "the study runs 10 bins only (the simulator's ablation varies them)",
    "overhead": "docs/benchmarks.md times the trainer's whole step, not the paper's advantage stage",
    "lemma41": "a theorem: the simulator's surrogate study tests it",
    "eq27": "a bound: the simulator's surrogate study tests it",
    "thm42": "a theorem: tests/gdro_lab/allocation/test_sqrt_law.py checks the square-root allocator against scipy.optimize",
}


def tuned_grpo(grid: dict[float, dict[int, Path]], groups: Sequence[str], seeds: Sequence[int]
               ) -> dict[str, Any]:
    """Per metric: the lr scale chosen on the val half (seed mean) and that point's test values per seed."""
    val = {x: {s: final_metrics(p, groups, "val") for s, p in by_seed.items()} for x, by_seed in grid.items()}
    out: dict[str, Any] = {"lr_scale": {}, "final": {}, "grid": sorted(grid),
                           "val": {f"{x:g}": {m: float(np.mean([v[s][m] for s in seeds])) for m in METRICS}
                                   for x, v in val.items()}}
    for metric in METRICS:
        best = lrgrid.best({x: float(np.mean([v[s][metric] for s in seeds])) for x, v in val.items()})
        out["lr_scale"][metric] = best
        out["final"][metric] = np.array([final_metrics(grid[best][s], groups, "test")[metric] for s in seeds])
    out["at_edge"] = sorted(m for m, x in out["lr_scale"].items() if lrgrid.at_edge(list(grid), x))
    return out


def baseline_values(final: dict[str, dict[str, np.ndarray]], tuned: dict[str, Any], key: str, metric: str
                    ) -> np.ndarray:
    return tuned["final"][metric] if key == "tuned" else final[key][metric]


def gains(final: dict[str, dict[str, np.ndarray]], tuned: dict[str, Any]) -> dict[str, Any]:
    """{method: {baseline: {metric: (mean, half)}}} in fractions, paired by seed."""
    out: dict[str, Any] = {}
    for method in ("prompt_gdro", "rollout_gdro", "joint", "grpo_matched_first", "grpo_matched_second"):
        if method not in final:
            continue
        out[method] = {key: {m: paired_ci(final[method][m], baseline_values(final, tuned, key, m)) for m in METRICS}
                       for key, _ in BASELINES if key != method and (key in final or key == "tuned")}
    return out


def _gain_claim(final: dict[str, dict[str, np.ndarray]], tuned: dict[str, Any], method: str, key: str,
                metric: str) -> Measurement:
    base = tuned["final"][metric]
    same = final["grpo"][metric]
    if key.endswith("pass8"):
        mean, half = relative_gain_ci(final[method][metric], base)
        number = (f"{fmt(mean, half, 1)}% relative held-out pass@8 vs tuned GRPO (same lr "
                  f"{fmt(*relative_gain_ci(final[method][metric], same), 1)}%)")
        unit = "relative pass@8 gain (%)"
    else:
        m, h = paired_ci(final[method][metric], base)
        mean, half = 100 * m, 100 * h
        number = (f"{fmt(m, h, 1, 100)} pp held-out {metric} vs tuned GRPO (same lr "
                  f"{fmt(*paired_ci(final[method][metric], same), 1, 100)} pp)")
        unit = "worst-group pass@1 gain (pp)" if "worst" in metric else "pass@1 gain (pp)"
    return Measurement(key, mean, half, unit, EVIDENCE, number)


def claims(final: dict[str, dict[str, np.ndarray]], tuned: dict[str, Any], runs: dict[str, dict[int, Path]],
           num_bins: int, n_bar: float) -> list[dict[str, str]]:
    """One row per paper claim (studykit.claims.CLAIMS)."""
    measured: dict[str, Measurement] = {}
    for method, pass8, mean8 in (("prompt_gdro", "pgdro_pass8", "pgdro_mean8"),
                                 ("rollout_gdro", "rgdro_pass8", "rgdro_mean8")):
        if method in final:
            measured[pass8] = _gain_claim(final, tuned, method, pass8, "pass@8")
            measured[mean8] = _gain_claim(final, tuned, method, mean8, "pass@1")
    if "prompt_gdro" in final:
        measured["toy_wg_gain"] = _gain_claim(final, tuned, "prompt_gdro", "toy_wg_gain", "worst-group pass@1")
    loaded = {m: [read_run(p) for _, p in sorted(runs.get(m, {}).items())] for m in ("prompt_gdro", "rollout_gdro")}
    measured.update(mechanism_measurements(loaded["prompt_gdro"], loaded["prompt_gdro"], loaded["rollout_gdro"],
                                           num_bins, n_bar, EVIDENCE))
    return claim_rows(measured, UNTESTED)
