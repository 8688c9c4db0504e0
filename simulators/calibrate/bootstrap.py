"""`gdro predict --bootstrap B`: each predicted gain's own interval, from a parametric bootstrap of the fit.

From the fit's posterior draw B worlds; in each, simulate data of the user's shapes (the sample's prompts and
groups, the sweep's lrs, batch, rollouts, steps and eval interval: ``recovery.synthetic_data``), calibrate again,
predict again, and measure that world's own true gain. Per predicted gain, the B errors e = truth - median of the
refits are a sample of this fit's own prediction error, in pp: the printed interval is the median
+- t(B) x rms(e) (``error_interval``; the Student t quantile because B is small), or the drawn worlds' central
95% where that is wider. A gain that the refits predict well gets a narrow interval, one they miss a wide one.
Why and what it costs: docs/calibration-fit.md#per-fit-widening. ``stretch`` and ``factors`` are the method
this replaced (one stretch factor per metric, in units of the refits' own central intervals), kept for the
comparison in ``gain_recovery``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from gdro_lab import ConfigError
from simulators.calibrate import predict

LEVEL = 0.95
SIDE_FLOOR = 1e-3
"""An interval's half narrower than 0.1 pp counts as 0.1 pp wide: a truth beyond a zero-width side would need an
infinite stretch (the refit's worlds all agreed, seed noise aside)."""
PILOT = 48
"""Stage 2's pilot fits in a refit when the fit's command does not name ``--pilot`` (gdro calibrate's default)."""


@dataclass(frozen=True)
class Shapes:
    """The calibration data a refit simulates: the stage-1 sample and the plain-GRPO sweep."""

    num_prompts: int
    num_groups: int
    k: int
    lrs: tuple[float, ...]
    batch: int
    n: int
    steps: int
    eval_every: int


def shapes_from_fit(fit: dict[str, Any], k: int = 8) -> Shapes:
    """The user's data shapes from fit.json (the samples per prompt are not stored: ``k``, default 8)."""
    dyn = fit.get("dynamics")
    if not dyn:
        raise ConfigError("--bootstrap: the fit has no sweep (gdro calibrate ran without --sweep): nothing to refit")
    evals = np.unique(np.r_[0, dyn["eval_steps"]])
    return Shapes(num_prompts=int(sum(fit["difficulty"]["sizes"])), num_groups=len(fit["difficulty"]["sizes"]), k=k,
                  lrs=tuple(float(v) for v in dyn["lrs"]), batch=int(dyn["batch"]), n=int(dyn["n"]),
                  steps=int(dyn["steps"]), eval_every=int(np.min(np.diff(evals))) if evals.size > 1 else int(dyn["steps"]))


def true_gains(truth: dict[str, Any], settings: predict.Settings) -> dict[str, tuple[float, float]]:
    """Per 'method|metric|baseline' in the world ``truth``: (mean gain over ``settings.seeds`` seeds, its se)."""
    table = predict.run_all(settings, [truth])
    tuned = predict.gains(table)["tuned_scale"][0]
    out: dict[str, tuple[float, float]] = {}
    for label in ("grpo_matched_c1", "grpo_matched_c2", *predict.METHODS):
        for metric, _ in predict.METRICS:
            method = table[f"{label}|{metric}"][0]
            for base, reference in (("vs_grpo", table[f"grpo@1|{metric}"][0]),
                                    ("vs_tuned", table[f"grpo@{tuned:g}|{metric}"][0])):
                diff = method - reference
                se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else math.nan
                out[f"{label}|{metric}|{base}"] = (float(diff.mean()), se)
    return out


def stretch(truth: float, median: float, lo: float, hi: float) -> float:
    """How far the interval's side towards ``truth`` must be stretched about ``median`` to reach it (0 at the
    median; a side narrower than SIDE_FLOOR counts as SIDE_FLOOR)."""
    from simulators.calibrate.posterior import side_towards

    gap = abs(truth - median)
    return 0.0 if gap == 0 else gap / max(side_towards(truth, median, lo, hi), SIDE_FLOOR)


def replicate(cal: predict.Calibrated, shapes: Shapes, settings: predict.Settings, world: dict[str, Any], seed: int,
              truth_seeds: int) -> list[dict[str, Any]]:
    """One bootstrap world: simulate the data, refit, predict, measure the truth; a row per predicted gain."""
    from simulators.calibrate.calibration import Plan, calibrate
    from simulators.calibrate.recovery import synthetic_data
    from simulators.world import WorldConfig

    sample, sweep = synthetic_data(WorldConfig(**world), lrs=shapes.lrs, batch=shapes.batch, n=shapes.n,
                                   steps=shapes.steps, eval_every=shapes.eval_every, k=shapes.k, seed=seed)
    record = calibrate(sample, sweep, Plan(**(cal.fit or {})["plan"]), boots=max(cal.draw_count, 2), pilot=_pilot(cal),
                       seed=seed, log=lambda _: None)
    record.pop("_objects")
    refit = predict.Calibrated({"world": record["world"]}, record, cal.path)
    mine = replace(settings, out=settings.out / "bootstrap" / f"world{seed}" / "refit", bootstrap=0,
                   draws=min(settings.draws, refit.draw_count))
    summary = predict.summarize(predict.run_all(mine, predict.world_draws(refit, mine.draws)), mine.draws, [],
                                settings.threshold)
    truth = true_gains(world, replace(mine, out=mine.out.parent / "truth", draws=1, seeds=truth_seeds))
    rows = []
    for key, (gain, se) in truth.items():
        label, metric, base = key.split("|")
        entry = summary["methods"][label][metric][base]
        rows.append({"seed": seed, "method": label, "metric": metric, "baseline": base, "truth": gain, "truth_se": se,
                     "median": entry["median"], "lo": entry["lo"], "hi": entry["hi"],
                     "stretch": stretch(gain, entry["median"], entry["lo"], entry["hi"]),
                     "per_world": entry["per_world"]})
    return rows


def _pilot(cal: predict.Calibrated) -> int:
    """The fit's own ``--pilot`` (from the gdro calibrate command fit.json records), else PILOT."""
    import shlex

    words = shlex.split((cal.fit or {}).get("command", ""))
    at = words.index("--pilot") + 1 if "--pilot" in words else 0
    return int(words[at]) if 0 < at < len(words) and words[at].isdigit() else PILOT


def factors(rows: list[dict[str, Any]], level: float = LEVEL) -> dict[str, float]:
    """Per metric: the stretch that covers ``level`` of the bootstrap's true gains (an order statistic, the
    next one up: with 80 rows the 76th smallest)."""
    out = {}
    for metric, _ in predict.METRICS:
        values = np.array([r["stretch"] for r in rows if r["metric"] == metric and math.isfinite(r["truth"])])
        out[metric] = float(np.quantile(values, level, method="higher")) if values.size else predict.WIDENING
    return out


def errors(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per 'method|metric|baseline': the bootstrap's prediction errors truth - median (B,), where the truth is
    finite."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if math.isfinite(r["truth"]) and math.isfinite(r["median"]):
            out.setdefault(f"{r['method']}|{r['metric']}|{r['baseline']}", []).append(r["truth"] - r["median"])
    return {key: np.array(values) for key, values in out.items()}


def error_half_width(error_B: np.ndarray, level: float = LEVEL) -> float:
    """Half the ``level`` prediction interval of one more error like ``error_B``: t(level, B) x rms(error_B).

    The errors are taken as N(0, s^2) with s unknown (no bias shift: B of them cannot place one); with s^2
    estimated by mean(e^2) from B errors, a new error / rms(e) is Student t with B degrees of freedom. nan
    without errors."""
    from scipy.stats import t

    error_B = np.asarray(error_B, float)
    if error_B.size == 0:
        return math.nan
    return float(t.ppf(0.5 + level / 2, error_B.size) * np.sqrt(np.mean(error_B ** 2)))


def error_interval(entry: dict[str, Any], error_B: np.ndarray, level: float = LEVEL) -> dict[str, Any]:
    """An ``over_worlds`` entry whose printed interval is median +- ``error_half_width`` of this gain's bootstrap
    errors, or the drawn worlds' central interval on a side where that is wider (the fit's own spread is never
    hidden); without errors, the global WIDENING."""
    half = error_half_width(error_B, level)
    if not math.isfinite(half):
        return widen(entry, predict.WIDENING)
    return {**entry, "widening": "bootstrap", "error_half_width": half, "errors": int(np.size(error_B)),
            "wide_lo": min(entry["lo"], entry["median"] - half), "wide_hi": max(entry["hi"], entry["median"] + half)}


def widen(entry: dict[str, Any], factor: float) -> dict[str, Any]:
    """An ``over_worlds`` entry with its printed interval re-widened by ``factor`` about the median."""
    return {**entry, "widening": factor, "wide_lo": entry["median"] - factor * (entry["median"] - entry["lo"]),
            "wide_hi": entry["median"] + factor * (entry["hi"] - entry["median"])}


def apply(summary: dict[str, Any], rows: list[dict[str, Any]], detail: dict[str, Any]) -> dict[str, Any]:
    """The prediction with every gain's interval set by its own bootstrap errors (``error_interval``);
    ``widening`` says how, with the half-widths per metric (median over methods and baselines)."""
    error_by_key = errors(rows)
    halves: dict[str, list[float]] = {}
    for label, row in summary["methods"].items():
        for metric, _ in predict.METRICS:
            row[metric] = {base: error_interval(entry, error_by_key.get(f"{label}|{metric}|{base}", np.array([])))
                           for base, entry in row[metric].items()}
            halves.setdefault(metric, []).extend(e.get("error_half_width", math.nan) for e in row[metric].values())
    summary["widening"] = {"source": "bootstrap", "method": "error",
                           "half_widths": {m: float(np.nanmedian(v)) if np.isfinite(v).any() else math.nan
                                           for m, v in halves.items()}, **detail}
    return summary


def bootstrap(cal: predict.Calibrated, settings: predict.Settings, count: int, *, truth_seeds: int | None = None,
              shapes: Shapes | None = None, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """``count`` bootstrap worlds (posterior draws spread evenly over the stored ones): their rows and the factors."""
    if cal.fit is None:
        raise ConfigError("--bootstrap: needs the fit.json that gdro calibrate wrote beside the world file")
    shapes = shapes or shapes_from_fit(cal.fit)
    truth_seeds = truth_seeds or max(4, settings.seeds)
    worlds = predict.world_draws(cal, cal.draw_count)
    rows: list[dict[str, Any]] = []
    for b in range(count):
        world = worlds[(b * len(worlds)) // count]
        rows += replicate(cal, shapes, settings, world, 1000 + b, truth_seeds)
        log(f"gdro predict: bootstrap world {b + 1}/{count} refitted")
    return {"rows": rows, "factors": factors(rows), "count": count, "truth_seeds": truth_seeds,
            "shapes": shapes.__dict__ | {"lrs": list(shapes.lrs)}}


def widened(summary: dict[str, Any], cal: predict.Calibrated, settings: predict.Settings) -> dict[str, Any]:
    """``gdro predict --bootstrap B``: every gain's interval from this fit's own bootstrap errors (B =
    settings.bootstrap); the bootstrap's rows go to OUT/bootstrap/rows.json."""
    if settings.bootstrap <= 0:
        return summary
    result = bootstrap(cal, settings, settings.bootstrap)
    (settings.out / "bootstrap").mkdir(parents=True, exist_ok=True)
    (settings.out / "bootstrap" / "rows.json").write_text(json.dumps(result["rows"], indent=1), encoding="utf-8")
    return apply(summary, result["rows"], {"count": result["count"], "truth_seeds": result["truth_seeds"],
                                           "shapes": result["shapes"]})
