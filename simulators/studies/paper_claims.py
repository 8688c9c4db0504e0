"""The paper's claims as the simulator's curriculum and sqrt-law studies measure them (studykit.claims).

Gains against **tuned** GRPO (chosen on val, reported on test), with the same-lr and step-matched
numbers alongside; on the toy world every verdict is "direction only". Mechanism claims come from
studykit.claim_measures at the default lr. Detail: docs/studies-notes.md#simulators-studies-paper_claims.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from simulators.parallel import RunSummary
from simulators.studies.common import final_eval
from simulators.studies.tuning import Grid
from studykit.claim_measures import mechanism_measurements
from studykit.claims import BY_KEY, Measurement, claim_rows
from studykit.stats import mean_ci, paired_ci, relative_gain_ci
from studykit.tables import fmt

EVIDENCE = "the simulator's toy world"
UNTESTED = {
    "wave_profiles": "the paper-* presets are fitted to these profiles, so they cannot test them",
    "weight_entropy": "not measured by the simulator's studies",
    "six_bins": "the ablation study measures it (bins 6 vs 10)",
    "overhead": "benchmarks/bench_controllers.py times a controller step on CPU, not the paper's advantage stage",
    "lemma41": "the surrogate study tests it",
    "eq27": "the surrogate study tests it",
    "thm42": "a theorem: tests/gdro_lab/allocation/test_sqrt_law.py checks the square-root allocator against scipy.optimize",
}


def _relative(a: Sequence[RunSummary], b: Sequence[RunSummary], metric: str) -> tuple[float, float]:
    return relative_gain_ci(final_eval(a, metric), final_eval(b, metric))


def _during(runs: Sequence[RunSummary], name: str) -> np.ndarray:
    return np.array([np.nanmean(r.evals[name][1:]) if name in r.evals and r.evals[name][1:].size else np.nan
                     for r in runs])


def _gain(grid: Grid, result: dict[str, Any], method: str, key: str, metric: str, relative: bool) -> Measurement:
    """A gain claim: the method at its tuned lr against GRPO at its tuned lr, with the other baselines in words."""
    tuned = result["tuned_lr"][metric]
    a, b = grid[(method, tuned[method])], grid[("grpo", tuned["grpo"])]
    g = result["gains"][method][metric]
    if relative:
        mean, half = _relative(a, b, metric)
        same = _relative(grid[(method, 1.0)], grid[("grpo", 1.0)], metric)
        number = (f"{fmt(mean, half, 1)}% relative held-out pass@8 vs tuned GRPO (same lr {fmt(*same, 1)}%; "
                  f"in pp: vs tuned {fmt(*g['vs_tuned'], 1, 100)}, vs step-matched √E[m²] "
                  f"{fmt(*g['vs_matched_second'], 1, 100)})")
    else:
        mean, half = (float(v) * 100 for v in g["vs_tuned"])
        label = "held-out worst-group pass@1" if "worst" in metric else "held-out pass@1"
        number = (f"{fmt(mean, half, 1)} pp {label} vs tuned GRPO (same lr {fmt(*g['vs_grpo'], 1, 100)}, "
                  f"step-matched E[m] {fmt(*g['vs_matched_first'], 1, 100)}, √E[m²] "
                  f"{fmt(*g['vs_matched_second'], 1, 100)})")
    unit = "relative pass@8 gain (%)" if relative else ("worst-group pass@1 gain (pp)" if "worst" in metric
                                                       else "pass@1 gain (pp)")
    return Measurement(key, mean, half, unit, EVIDENCE, number)


def measurements(grid: Grid, result: dict[str, Any], methods: Sequence[str]) -> dict[str, Measurement]:
    """Every claim the runs of ``methods`` can measure."""
    out: dict[str, Measurement] = {}
    wg, acc, p8 = "test/worst_group_accuracy", "test/accuracy", "test/pass@8"
    for method, pass8, mean8 in (("prompt_gdro", "pgdro_pass8", "pgdro_mean8"),
                                 ("rollout_gdro", "rgdro_pass8", "rgdro_mean8")):
        if method in result["gains"]:
            out[pass8] = _gain(grid, result, method, pass8, p8, relative=True)
            out[mean8] = _gain(grid, result, method, mean8, acc, relative=False)
    if "prompt_gdro" in result["gains"]:
        out["toy_wg_gain"] = _gain(grid, result, "prompt_gdro", "toy_wg_gain", wg, relative=False)
    if "prompt_gdro" in methods and "class_gdro" in methods:
        tuned = result["tuned_lr"][wg]
        mean, half = paired_ci(final_eval(grid[("prompt_gdro", tuned["prompt_gdro"])], wg),
                               final_eval(grid[("class_gdro", tuned["class_gdro"])], wg))
        out["toy_ema_vs_class"] = Measurement("toy_ema_vs_class", 100 * mean, 100 * half, "worst-group pass@1 gain (pp)",
                                              EVIDENCE, f"{fmt(mean, half, 1, 100)} pp held-out worst-group pass@1, "
                                              "each at its tuned lr")
        diff = _during(grid[("prompt_gdro", 1.0)], "weight_support") - _during(grid[("class_gdro", 1.0)],
                                                                              "weight_support")
        mean, half = mean_ci(diff)
        out["toy_support"] = Measurement("toy_support", mean, half, BY_KEY["toy_support"].metric, EVIDENCE,
                                         f"{fmt(mean, half, 1)} groups (EMA-debiased minus class-based weight "
                                         "support over the latent groups, lr 1)")
    first = grid[("grpo", 1.0)][0].config
    data = grid[("prompt_gdro", 1.0)] if "prompt_gdro" in methods else grid[("grpo", 1.0)]
    out.update(mechanism_measurements(
        data, grid[("prompt_gdro", 1.0)] if "prompt_gdro" in methods else [],
        grid[("rollout_gdro", 1.0)] if "rollout_gdro" in methods else [], first["num_bins"], first["n_bar"], EVIDENCE))
    return out


def claims(grid: Grid, result: dict[str, Any], methods: Sequence[str]) -> list[dict[str, str]]:
    """One row per paper claim (studykit.claims.CLAIMS): verdict, number, the paper's number."""
    untested = dict(UNTESTED)
    if "class_gdro" not in methods:
        for key in ("toy_ema_vs_class", "toy_support"):
            untested[key] = "needs class-based GDRO: add class_gdro to --methods (or --full)"
    for key, needs in (("prompt_gdro", ("pgdro_pass8", "pgdro_mean8", "toy_wg_gain", "leadlag_early",
                                        "leadlag_decays", "frontier_weights")),
                       ("rollout_gdro", ("rgdro_pass8", "rgdro_mean8", "wse", "economics", "budget_shift"))):
        if key not in methods:
            untested.update({k: f"needs {key} in --methods" for k in needs})
    return claim_rows(measurements(grid, result, methods), untested)


def lead_lag_parts(runs: Sequence[RunSummary]) -> dict[str, np.ndarray]:
    """Eq. 32's gap split per seed (second half of the run): gap = ((G-1)/2 - mu_data) + (mu_weight - (G-1)/2).

    The first part is what uniform weights would show on the same data, the second what the adversary's
    weights add; NaN for a seed with no binned prompt in its second half.
    """
    out: dict[str, list[float]] = {"gap": [], "uniform": [], "adversary": []}
    for r in runs:
        mid = (r.config["num_bins"] - 1) / 2.0
        w, d = (np.asarray(r.scalars.get(k, np.array([np.nan])), float) for k in ("mu_weight", "mu_data"))
        w, d = w[w.size // 2:], d[d.size // 2:]
        out["gap"].append(_finite_mean(w - d))
        out["uniform"].append(_finite_mean(mid - d))
        out["adversary"].append(_finite_mean(w - mid))
    return {k: np.array(v) for k, v in out.items()}


def _finite_mean(values: np.ndarray) -> float:
    """Mean of the finite values; NaN (undefined, no warning) when there are none."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")
