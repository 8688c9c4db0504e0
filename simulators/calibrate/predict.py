"""`gdro predict WORLD.toml`: each method's gain in a calibrated world, with the fit's uncertainty.

Per posterior draw of the fit (``fit.json`` beside the world file) and seed (paired across methods), at the
planned run's size: GRPO at the planned lr and on a sqrt(2)-step grid extended while a world's best point sits
at an edge (tuned GRPO), Prompt-GDRO, Rollout-GDRO and joint at the planned lr, and step-matched GRPO
(``studykit.stepmatch``; under Adam a constant advantage scale cancels, so it is GRPO). A gain is summarised
over the drawn worlds: median, a 95% interval (the central 95% widened by WIDENING, or with ``--bootstrap B``
by the fit's own factor: ``bootstrap.py``) and the counts of worlds
above / below 0 and beyond +-``--threshold``, which carry the verdict. "Decided by": the posterior-median
world and each parameter at its interval's ends. Detail: docs/calibration.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gdro_lab import ConfigError

METRICS = (("test/accuracy", "held-out accuracy"), ("test/pass@8", "held-out pass@8"),
           ("test/worst_group_accuracy", "held-out worst-group accuracy"))
METHODS = ("prompt_gdro", "rollout_gdro", "joint")
LABELS = {"grpo_matched_c1": "step-matched GRPO (c1 = E[m])", "grpo_matched_c2": "step-matched GRPO (c2 = rms m)",
          "prompt_gdro": "Prompt-GDRO", "rollout_gdro": "Rollout-GDRO", "joint": "joint Prompt+Rollout"}
GRID = tuple(2.0 ** (k / 2) for k in range(-2, 3))
THRESHOLD = 0.01
"""A practical difference in a held-out metric: 1 pp (``gdro predict --threshold`` in pp)."""
WIDENING = 1.84
"""The printed 95% interval: the worlds' central 95% widened about the median by this factor, the one that covers
95% of the true gains of the gain recovery study (reports/calibration/gain-recovery: 92% when chosen leaving one
world out; the central interval alone covered 87%). The worlds' counts, not this interval, carry the verdict."""
DECISIVE = 0.95
"""The share of drawn worlds that must agree for a verdict (38 of 40)."""


@dataclass(frozen=True)
class Calibrated:
    """A world file and what ``gdro predict`` needs from its fit."""

    overrides: dict[str, dict[str, Any]]
    fit: dict[str, Any] | None
    path: Path

    @property
    def plan(self) -> dict[str, Any]:
        run = self.overrides.get("run", {})
        default = {"pool_size": self.overrides["world"].get("num_prompts", 14116), "batch": 64, "steps": 200,
                   "n_bar": run.get("n_bar", 4), "n_min": run.get("n_min", 2), "n_max": run.get("n_max", 12),
                   "lr": 1.0, "optimizer": "sgd"}
        return {**default, **(self.fit or {}).get("plan", {})}

    @property
    def draw_count(self) -> int:
        """How many posterior draws the fit stores (1 without a fit: the world file's own)."""
        return min((len(v) for v in drawn_parameters(self).values()), default=1)


def load(path: Path) -> Calibrated:
    """The world file (checked like ``gdro simulate --config``) and fit.json beside it, if any."""
    from simulators import knobs

    if path.is_dir():
        path = path / "world.toml"
    from simulators.world import WorldConfig

    overrides = knobs.load_toml(path, flag="WORLD")
    if "world" not in overrides:
        raise ConfigError(f"WORLD {path}: no [world] table: give the world.toml that gdro calibrate wrote")
    try:
        WorldConfig(**overrides["world"])
    except TypeError as err:
        raise ConfigError(f"{path}: [world] has a value of the wrong type ({err})") from None
    fit_path = path.parent / "fit.json"
    fit = None
    if fit_path.is_file():
        try:
            fit = json.loads(fit_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise ConfigError(f"{fit_path} is not valid JSON: re-run gdro calibrate") from None
    return Calibrated(overrides, fit, path)


def drawn_parameters(cal: Calibrated) -> dict[str, np.ndarray]:
    """The fit's posterior draws of every world parameter (stage 1, then stage 2); {} without a fit."""
    if cal.fit is None:
        return {}
    pools = [cal.fit["difficulty"]["draws"]] + ([cal.fit["dynamics"]["draws"]] if cal.fit.get("dynamics") else [])
    return {name: np.asarray(draws, float) for pool in pools for name, draws in pool.items()
            if name not in ("size_exponent", "size_difficulty_corr", "lr_shared")}


def _world(base: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    from simulators.calibrate.dynamics import SHARED_RATIO

    world = {**base, **values}
    if "lr_group" in values:  # the shared skill's step is a fixed ratio of the group skills' (the fit's model)
        world["lr_shared"] = SHARED_RATIO * values["lr_group"]
    return world


def world_draws(cal: Calibrated, count: int) -> list[dict[str, Any]]:
    """The first ``count`` posterior draws as world-override dicts (stage 1 and stage 2 paired by index)."""
    drawn = drawn_parameters(cal)
    base = dict(cal.overrides["world"])
    if not drawn:
        return [base]
    return [_world(base, {name: float(values[j % values.size]) for name, values in drawn.items()})
            for j in range(count)]


def perturbed_worlds(cal: Calibrated) -> tuple[list[dict[str, Any]], list[tuple[str, float]]]:
    """The posterior-median world, then each drawn parameter at the low and the high end of its 95% interval
    with the others at their medians (parameters whose draws do not vary are left out); and per world
    (parameter, value), ('', nan) for the median world."""
    from simulators.calibrate.posterior import central_interval, medians as posterior_medians

    drawn = drawn_parameters(cal)
    base = dict(cal.overrides["world"])
    medians = posterior_medians(drawn, tuple(drawn))
    worlds, keys = [_world(base, medians)], [("", math.nan)]
    for name, values in drawn.items():
        lo, hi = (float(v) for v in central_interval(values))
        for end in (lo, hi) if hi > lo else ():
            worlds.append(_world(base, {**medians, name: end}))
            keys.append((name, end))
    return worlds, keys


@dataclass(frozen=True)
class Settings:
    """What one prediction runs."""

    draws: int
    seeds: int
    steps: int
    batch: int
    lr_scale: float
    optimizer: str
    workers: int
    out: Path
    threshold: float = THRESHOLD
    n_bar: int = 4
    n_min: int = 2
    n_max: int = 12
    bootstrap: int = 0
    """Bootstrap worlds that set this fit's own widening (``simulators.calibrate.bootstrap``); 0: WIDENING."""


def sim_config(settings: Settings, world: dict[str, Any], method: str, seed: int, lr_scale: float) -> Any:
    """One simulated run of the prediction (Adam: Prompt-GDRO's weights renormalised to mean 1 per batch)."""
    from gdro_lab.methods import get_method
    from simulators.simulator_config import SimConfig
    from simulators.world import WorldConfig

    values = dict(world)
    values["always_solved_frac"] = min(values.get("always_solved_frac", 0.0), 0.99 - values.get("unsolvable_frac", 0.0))
    weighter = {"weight_mode": "mean1"} if settings.optimizer == "adam" and get_method(method).weighter == "gdro" else {}
    return SimConfig(method=method, seed=seed, steps=settings.steps, batch=settings.batch, n_bar=settings.n_bar,
                     n_min=settings.n_min, n_max=settings.n_max, eval_every=settings.steps, snapshot_every=-1,
                     log_every=max(1, settings.steps // 50), lr_scale=round(lr_scale, 6), world=WorldConfig(**values),
                     weighter=weighter)


def _run(jobs: list[tuple[Any, Path, bool]], settings: Settings, description: str) -> list[Any]:
    from simulators.parallel import run_jobs

    return run_jobs(jobs, workers=settings.workers, progress=None, description=description)


def _jobs(settings: Settings, worlds: list[dict[str, Any]], keys: list[tuple[str, int, int, float]]) -> list[Any]:
    root = settings.out / "runs"
    return [(sim_config(settings, worlds[j], label.split("@")[0], s, settings.lr_scale * g),
             root / f"draw{j}" / label.replace("@", "_lr") / f"seed{s}", False) for label, j, s, g in keys]


def _grid_values(summaries: dict[tuple[str, int, int, float], Any], draws: int, seeds: int) -> dict[float, np.ndarray]:
    """Seed-mean val accuracy of GRPO per grid point, per draw."""
    out: dict[float, np.ndarray] = {}
    for (label, j, s, g), summary in summaries.items():
        if label.startswith("grpo@"):
            out.setdefault(g, np.zeros((draws, seeds)))[j, s] = float(summary.evals["val/accuracy"][-1])
    return {g: v.mean(axis=1) for g, v in out.items()}


def run_all(settings: Settings, worlds: list[dict[str, Any]], max_extension: int = 4) -> dict[str, np.ndarray]:
    """Final metrics (draws, seeds) per run label: 'grpo@x' on the grid, the methods, step-matched GRPO.

    GRPO's grid starts at x0.5..x2 (sqrt(2) steps) and is extended (``studykit.lrgrid.extension``, at most
    ``max_extension`` steps per side) while the best val point of some draw sits at its edge.
    """
    from studykit.lrgrid import best, extension
    from studykit.stepmatch import match_factors

    D, S = len(worlds), settings.seeds
    keys = [(f"grpo@{g:g}", j, s, g) for j in range(D) for s in range(S) for g in GRID]
    keys += [(m, j, s, 1.0) for j in range(D) for s in range(S) for m in METHODS]
    summaries = dict(zip(keys, _run(_jobs(settings, worlds, keys), settings, "predict: GRPO grid and GDRO methods")))
    while True:
        values = _grid_values(summaries, D, S)
        grid = sorted(values)
        bests = [best({g: values[g][j] for g in grid}) for j in range(D)]
        more = extension(grid, bests, GRID, max_steps=max_extension)
        if not more:
            break
        keys = [(f"grpo@{g:g}", j, s, g) for j in range(D) for s in range(S) for g in more]
        summaries.update(zip(keys, _run(_jobs(settings, worlds, keys), settings, "predict: GRPO grid extended")))
    matched = {}
    for j in range(D):
        try:
            factors = match_factors([summaries[("prompt_gdro", j, s, 1.0)].scalars for s in range(S)])
            matched[j] = {"grpo_matched_c1": factors.first, "grpo_matched_c2": factors.second}
        except ValueError:  # no step had a prompt carrying an advantage (every group all-equal): factor 1
            matched[j] = {"grpo_matched_c1": 1.0, "grpo_matched_c2": 1.0}
    extra = [(label, j, s, c) for j in matched for label, c in matched[j].items() for s in range(S)]
    if settings.optimizer == "sgd":
        jobs = [(sim_config(settings, worlds[j], "grpo", s, settings.lr_scale * c),
                 settings.out / "runs" / f"draw{j}" / label / f"seed{s}", False) for label, j, s, c in extra]
        summaries.update(zip(extra, _run(jobs, settings, "predict: step-matched GRPO")))
    else:  # Adam: a constant advantage scale cancels; step-matched GRPO is GRPO
        summaries.update({(label, j, s, c): summaries[("grpo@1", j, s, 1.0)] for label, j, s, c in extra})
    table = _table(summaries, D, S)
    table["matched_c1"] = np.array([matched[j]["grpo_matched_c1"] for j in range(D)])
    table["matched_c2"] = np.array([matched[j]["grpo_matched_c2"] for j in range(D)])
    return table


def _table(summaries: dict[tuple[str, int, int, float], Any], draws: int, seeds: int) -> dict[str, np.ndarray]:
    """label|metric -> (draws, seeds) final values; initial|metric: GRPO's step 0."""
    table: dict[str, np.ndarray] = {}
    for (label, j, s, _), summary in summaries.items():
        for metric in (*[m for m, _ in METRICS], "val/accuracy", "se_reduction_pct", "final_success"):
            if metric == "se_reduction_pct":
                series = summary.scalars.get(metric, np.array([np.nan]))
                value = float(np.nanmean(series)) if np.isfinite(series).any() else math.nan
            elif metric == "final_success":  # the batch success over the run's last tenth
                series = summary.scalars.get("mean_success", np.array([np.nan]))
                value = float(np.nanmean(series[-max(1, series.size // 10):]))
            else:
                value = float(summary.evals[metric][-1]) if metric in summary.evals else math.nan
            table.setdefault(f"{label}|{metric}", np.full((draws, seeds), np.nan))[j, s] = value
        if label == "grpo@1":  # the start (step 0): what GRPO's own gain is measured from
            for metric, _ in METRICS:
                value = float(summary.evals[metric][0]) if metric in summary.evals else math.nan
                table.setdefault(f"initial|{metric}", np.full((draws, seeds), np.nan))[j, s] = value
    return table


def grid_points(table: dict[str, np.ndarray]) -> list[float]:
    return sorted(float(k.split("@")[1].split("|")[0]) for k in table if k.startswith("grpo@") and k.endswith("|val/accuracy"))


def gains(table: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per method and metric: per-draw seed-mean gains over GRPO at the planned lr and over tuned GRPO."""
    grid = grid_points(table)
    grid_val = np.stack([table[f"grpo@{g:g}|val/accuracy"].mean(axis=1) for g in grid])  # (grid, draws)
    best = np.argmax(grid_val, axis=0)  # ties: the first (smaller) lr, as studykit.lrgrid.best
    out: dict[str, Any] = {"tuned_scale": [grid[b] for b in best], "grid": grid, "per_draw": {}}
    for label in ("grpo_matched_c1", "grpo_matched_c2", *METHODS):
        entry = {}
        for metric, _ in METRICS:
            method = table[f"{label}|{metric}"]
            base = table[f"grpo@1|{metric}"]
            tuned = np.stack([table[f"grpo@{grid[b]:g}|{metric}"][j] for j, b in enumerate(best)])
            entry[metric] = {"vs_grpo": (method - base).mean(axis=1), "vs_tuned": (method - tuned).mean(axis=1)}
        out["per_draw"][label] = entry
    return out


def _row_mean(values: np.ndarray) -> np.ndarray:
    """Mean over seeds (axis 1), NaN where a draw has none, without warnings."""
    ok = np.isfinite(values)
    return np.where(ok.any(axis=1), np.where(ok, values, 0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1), np.nan)


def over_worlds(values: np.ndarray, threshold: float = THRESHOLD) -> dict[str, Any]:
    """A gain over drawn worlds: median, central 95% [lo, hi] (nan with one world), that interval widened by
    WIDENING [wide_lo, wide_hi] (``bootstrap.apply`` re-widens it by the fit's own factor), and how many
    worlds put it above / below zero and beyond +-``threshold``."""
    from simulators.calibrate.posterior import central_interval

    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    lo, hi = (float(x) for x in central_interval(v)) if v.size > 1 else (math.nan, math.nan)
    median = float(np.median(v)) if v.size else math.nan
    return {"median": median, "lo": lo, "hi": hi, "worlds": int(v.size), "widening": WIDENING,
            "wide_lo": median - WIDENING * (median - lo),
            "wide_hi": median + WIDENING * (hi - median),
            "above_zero": int((v > 0).sum()), "below_zero": int((v < 0).sum()),
            "above_threshold": int((v > threshold).sum()), "below_threshold": int((v < -threshold).sum()),
            "per_world": v.tolist()}


def side(gain: float, threshold: float) -> int:
    """+1 better by more than the threshold, -1 worse by more, 0 within it."""
    return int(gain > threshold) - int(gain < -threshold)


def decided_by(gain: np.ndarray, keys: list[tuple[str, float]], threshold: float) -> list[dict[str, Any]]:
    """Per parameter, from the perturbed worlds' gains (``gain[i]`` in the world of ``keys[i]``, the median
    world first): the gain at the low and high end of its interval, how far either moves it from the
    median world's, and whether the verdict's side changes; the biggest mover first."""
    centre = float(gain[0])
    rows: dict[str, dict[str, Any]] = {}
    for (name, value), g in zip(keys[1:], gain[1:]):
        row = rows.setdefault(name, {"parameter": name, "values": [], "gains": []})
        row["values"].append(float(value))
        row["gains"].append(float(g))
    for row in rows.values():
        row["median_world"] = centre
        row["moves"] = max(abs(g - centre) for g in row["gains"]) if np.isfinite(row["gains"]).all() else math.nan
        row["flips"] = any(side(g, threshold) != side(centre, threshold) for g in row["gains"])
    return sorted(rows.values(), key=lambda r: -np.nan_to_num(r["moves"], nan=-1.0))


def summarize(table: dict[str, np.ndarray], draws: int, keys: list[tuple[str, float]],
              threshold: float = THRESHOLD) -> dict[str, Any]:
    """The prediction from ``run_all``'s table over the drawn worlds (rows < ``draws``) and the perturbed ones
    (the rest, in the order of ``keys``): per method and metric the gains over the drawn worlds
    (``over_worlds``), what decides them, and the SE-proxy cut."""
    result = gains(table)
    out: dict[str, Any] = {"methods": {}, "tuned_scale": result["tuned_scale"][:draws], "grid": result["grid"],
                           "matched_c1": table["matched_c1"][:draws].tolist(), "threshold": threshold,
                           "matched_c2": table["matched_c2"][:draws].tolist(), "decisive": DECISIVE,
                           "median_world_tuned_scale": result["tuned_scale"][draws] if keys else math.nan}
    for label, entry in result["per_draw"].items():
        row: dict[str, Any] = {"decided_by": {}}
        for metric, _ in METRICS:
            row[metric] = {base: over_worlds(entry[metric][base][:draws], threshold) for base in ("vs_grpo", "vs_tuned")}
            if keys:
                row["decided_by"][metric] = {base: decided_by(entry[metric][base][draws:], keys, threshold)
                                             for base in ("vs_grpo", "vs_tuned")}
        se = table.get(f"{label}|se_reduction_pct")
        row["se_reduction_pct"] = over_worlds(_row_mean(se)[:draws], threshold) if se is not None else None
        out["methods"][label] = row
    out["grpo_vs_start"] = {metric: over_worlds((table[f"grpo@1|{metric}"] - table[f"initial|{metric}"])
                                                .mean(axis=1)[:draws], threshold)
                            for metric, _ in METRICS if f"initial|{metric}" in table}
    return out


def predict(cal: Calibrated, settings: Settings, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run and summarise the prediction: ``settings.draws`` drawn worlds, then (with a fit) the median and
    perturbed worlds; ``extra`` world settings apply to every world."""
    worlds = world_draws(cal, settings.draws)
    perturbed, keys = perturbed_worlds(cal) if cal.fit is not None else ([], [])
    worlds = [{**world, **(extra or {})} for world in worlds + perturbed]
    table = run_all(settings, worlds)
    summary = summarize(table, len(worlds) - len(perturbed), keys, settings.threshold)
    from simulators.calibrate.scaling import extrapolate

    summary["grpo_final_success"] = over_worlds(_row_mean(table["grpo@1|final_success"])[:len(worlds) - len(perturbed)])
    summary["scaling"] = extrapolate((cal.fit or {}).get("scaling", []), cal.plan["lr"] * settings.lr_scale,
                                     settings.steps * settings.batch * settings.n_bar)
    summary["widening"] = {"source": "global", "factors": {metric: WIDENING for metric, _ in METRICS}}
    return summary  # settings.bootstrap > 0: bootstrap.widened(summary, ...) re-widens it
