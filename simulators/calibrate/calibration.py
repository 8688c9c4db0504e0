"""Both stages of the calibration, the world file and the fit record (``gdro calibrate``'s work).

Outputs in OUT: ``world.toml`` (the fitted world: ``gdro simulate --config OUT/world.toml``; its length
model fitted when the samples carry token counts, ``simulators.calibrate.lengths``),
``fit.json`` (estimates, 95% intervals, posterior draws, the planned run that ``gdro predict``
simulates, identification notes), ``report.md`` with ``fig_passrate.png`` (pass-rate histogram,
fitted vs observed) and ``fig_curves.png`` (learning curves per lr, fitted vs observed).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gdro_lab.runformat.runlog import to_jsonable
from simulators.calibrate import initial_difficulty as stage1
from simulators.calibrate import dynamics as stage2
from simulators.calibrate.initial_difficulty import DifficultyFit, SuccessCounts
from simulators.calibrate.lengths import fit_lengths
from simulators.calibrate.observe import Sweep
from simulators.calibrate.posterior import central_interval, medians
from simulators.calibrate.scaling import sweep_fits
from simulators.world import WorldConfig

FIT_FORMAT = 1
WEAK_SHARE = 0.5
"""A parameter is weakly identified when its 95% interval spans more than this share of its allowed range
(in the fitting coordinates: log scale for scales and rates), or reaches the range's edge."""


@dataclass(frozen=True)
class Plan:
    """The real run to predict: its pool, batch, steps, rollouts and learning rate (the reference lr)."""

    pool_size: int
    batch: int
    steps: int
    n_bar: int = 4
    n_min: int = 2
    n_max: int = 12
    lr: float = 1.0
    optimizer: str = "adam"
    """'adam' (the trainer's AdamW: a constant advantage scale cancels, so Prompt-GDRO's multipliers act
    as mean-1 weights) or 'sgd' (multipliers scale the step, as in the plain world)."""


def base_world(data: SuccessCounts, plan: Plan, aggregation: str) -> WorldConfig:
    """The world before any fit: the data's K groups with their shares, the plan's pool size."""
    shares = np.bincount(data.group_P, minlength=data.num_groups) / data.group_P.size
    return WorldConfig(num_prompts=plan.pool_size, num_groups=data.num_groups,
                       group_shares=tuple(float(s) for s in shares), aggregation=aggregation)


def world_from_difficulty(world: WorldConfig, fit: DifficultyFit,
                          values: dict[str, float] | None = None) -> WorldConfig:
    """The world with the data's hardness ranks and stage-1 ``values`` (default: the posterior medians)."""
    chosen: dict[str, Any] = medians(fit.draws, stage1.PARAMS) if values is None else {
        k: values[k] for k in stage1.PARAMS}
    return replace(world, group_hardness_rank=tuple(int(r) for r in fit.ranks_K), **chosen)


PILE_UP = (0.02, 0.1)
"""Draws within 2% of the range of an arbitrary end, when at least 10% of them: flagged weak."""
NATURAL_EDGES = {"unsolvable_frac": (True, False), "always_solved_frac": (True, False), "transfer": (True, True)}
"""Range ends that are the parameter's own (a fraction at 0, transfer at 0 or 1): an interval reaching them is
no sign of weak identification, unlike one reaching an arbitrary end of a log-scale range."""


def identification(draws_x: np.ndarray, lo: np.ndarray, hi: np.ndarray, names: tuple[str, ...]) -> dict[str, str]:
    """Per parameter: 'well identified', or why not (wide interval, at the range's edge, draws piling up at an
    end, confounded)."""
    out: dict[str, str] = {}
    q_lo, q_hi = central_interval(draws_x)  # the printed interval's two draws, on the fitting scale
    span = (q_hi - q_lo) / np.maximum(hi - lo, 1e-12)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.corrcoef(draws_x.T) if draws_x.shape[0] > 2 else np.zeros((len(names), len(names)))
    for j, name in enumerate(names):
        notes = []
        if span[j] > WEAK_SHARE:
            notes.append(f"interval spans {100 * span[j]:.0f}% of the allowed range")
        natural_lo, natural_hi = NATURAL_EDGES.get(name, (False, False))
        at_lo = q_lo[j] <= lo[j] + 1e-9 * (hi[j] - lo[j]) and not natural_lo
        at_hi = q_hi[j] >= hi[j] - 1e-9 * (hi[j] - lo[j]) and not natural_hi
        if at_lo or at_hi:
            notes.append("reaches the edge of the allowed range")
        near = PILE_UP[0] * (hi[j] - lo[j])  # draws crowding an arbitrary end: the data allow values beyond it
        for end, count, natural in (("low", np.sum(draws_x[:, j] <= lo[j] + near), natural_lo),
                                    ("high", np.sum(draws_x[:, j] >= hi[j] - near), natural_hi)):
            if not natural and count >= max(2, PILE_UP[1] * draws_x.shape[0]):
                notes.append(f"{count} of {draws_x.shape[0]} draws pile up at the {end} end of the allowed range")
        partners = [names[i] for i in range(len(names)) if i != j and np.isfinite(corr[j, i]) and abs(corr[j, i]) > 0.9]
        if partners:
            notes.append("moves with " + ", ".join(partners) + " (|correlation| > 0.9)")
        out[name] = "weak: " + "; ".join(notes) if notes else "well identified"
    return out


def _difficulty_identification(fit: DifficultyFit) -> dict[str, str]:
    free, _ = stage1.free_params(fit.ranks_K.size)
    lo = np.array([b[0] for b in stage1._bounds(free)])
    hi = np.array([b[1] for b in stage1._bounds(free)])
    draws = np.stack([np.log(fit.draws[n]) if n in stage1.LOG_PARAMS else fit.draws[n] for n in free], axis=1)
    out = identification(draws, lo, hi, free)
    K = fit.ranks_K.size
    out["size_exponent"] = "summary only (the world uses the data's group shares)"
    out["size_difficulty_corr"] = (f"summary only (the world uses the data's hardness ranks; with K = {K} groups "
                                   "a rank correlation is one draw of a permutation)")
    return out


def calibrate(data: SuccessCounts, sweep: Sweep | None, plan: Plan, *, boots: int = 40, pilot: int = 64,
              seed: int = 0, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Fit both stages; returns the fit record (what fit.json holds) with the fitted WorldConfig under "world"."""
    log(f"calibrate: stage 1 (difficulty) on {data.group_P.size} prompts in {data.num_groups} groups")
    diff = stage1.fit_difficulty(data, boots=boots, seed=seed)
    base = base_world(data, plan, sweep.aggregation if sweep else "rollout")
    world = world_from_difficulty(base, diff)
    record: dict[str, Any] = {"format": FIT_FORMAT, "plan": asdict(plan),
                              "difficulty": {**diff.to_dict(), "medians": medians(diff.draws, stage1.PARAMS)},
                              "identification": _difficulty_identification(diff), "dynamics": None}
    dyn = None
    if sweep is not None:
        fitted = world_from_difficulty(base, diff, diff.values)  # stage 2 conditions on stage 1's best fit
        design = stage2.Design(world=replace(fitted, score_noise=1.0, update_noise=0.05), lrs=sweep.lrs,
                               lr_ref=plan.lr, batch=sweep.batch, n=sweep.n, steps=sweep.steps,
                               eval_steps=_eval_steps(sweep), block=max(1, sweep.steps // 12))
        obs = stage2.observation(sweep, design)
        log(f"calibrate: stage 2 (dynamics) on {len(sweep.runs)} GRPO runs, lr {', '.join(f'{x:g}' for x in sweep.lrs)}")
        dyn = stage2.fit_dynamics(design, obs, sweep.group_names == ("pooled",), boots=boots, pilot=pilot,
                                  seed=seed, log=log)
        world = stage2.fitted_world(world, medians(dyn.draws, stage2.PARAMS))
        lo, hi = stage2.box()
        record["identification"].update(identification(np.array(dyn.extra["draws_x"]), lo, hi, stage2.PARAMS))
        record["dynamics"] = {"values": dyn.values, "medians": medians(dyn.draws, stage2.PARAMS),
                              "intervals": {n: dyn.interval(n) for n in dyn.draws},
                              "draws": {n: v.tolist() for n, v in dyn.draws.items()}, "chi2_red": dyn.chi2_red,
                              "dof": dyn.extra["dof"], "offsets": dyn.h0.tolist(), "groups": list(sweep.group_names),
                              "lrs": sweep.lrs.tolist(), "block": design.block, "steps": design.steps,
                              "eval_steps": design.eval_steps.tolist(), "batch": sweep.batch, "n": sweep.n}
        record["scaling"] = sweep_fits(sweep)  # ScaleRL's sigmoid per sweep run: gdro predict shows it
    record["lengths"] = None
    if data.lengths is not None:  # else the world keeps the default length model (the report says so)
        fit = fit_lengths(data.lengths)
        log(f"calibrate: length model on {fit.responses} responses' token counts")
        world = replace(world, lengths=True, **fit.values)
        record["lengths"] = fit.to_dict()
    record["world"] = world.to_dict()
    record["_objects"] = {"difficulty": diff, "dynamics": dyn, "data": data, "sweep": sweep}
    return record


def _eval_steps(sweep: Sweep) -> np.ndarray:
    steps = sorted({int(s) for r in sweep.runs for s in r.eval_steps_E if 0 <= s <= sweep.steps})
    return np.array(steps, np.int64)


def world_toml(world: WorldConfig, plan: Plan, header: str) -> str:
    """The [world] and [run] tables ``gdro simulate --config`` reads, with a comment header."""
    lines = [f"# {line}" for line in header.splitlines()] + ["", "[world]"]
    for key, value in world.to_dict().items():
        if value == getattr(WorldConfig, key, None) and key not in ("num_prompts", "num_groups"):
            continue
        lines.append(f"{key} = {_toml_value(value)}")
    lines += ["", "[run]", f"n_bar = {plan.n_bar}", f"n_min = {plan.n_min}", f"n_max = {plan.n_max}", ""]
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(float(f"{value:.6g}")) if math.isfinite(value) else "0.0"
    return str(value)


def write_outputs(record: dict[str, Any], out: Path, command: str, made_by: dict[str, Any] | None = None) -> Path:
    """world.toml, fit.json, report.md and figures into ``out``; returns the report path. ``made_by``, the
    provenance block of the code that made the fit (studykit.provenance), goes into fit.json."""
    from simulators.calibrate.calibration_report import write_report

    out.mkdir(parents=True, exist_ok=True)
    plan = Plan(**record["plan"])
    world = WorldConfig(**record["world"])
    header = (f"Calibrated by: {command}\nRead by: gdro simulate --config {out / 'world.toml'} "
              f"--prompts {plan.pool_size} --batch {plan.batch} --steps {plan.steps}\n"
              f"Learning rates here are those at the reference lr {plan.lr:g} (lr_scale 1); fit and intervals: "
              f"{out / 'fit.json'}, {out / 'report.md'}")
    (out / "world.toml").write_text(world_toml(world, plan, header), encoding="utf-8")
    saved = {k: v for k, v in record.items() if k != "_objects"}
    saved["command"] = command
    if made_by is not None:
        saved["provenance"] = made_by
    (out / "fit.json").write_text(json.dumps(to_jsonable(saved), indent=1) + "\n", encoding="utf-8")
    return write_report(record, out, command)
