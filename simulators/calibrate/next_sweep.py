"""`gdro calibrate --plan CAL_DIR`: the cheapest extra plain-GRPO sweep that would make the current verdict sharp.

A linear-Gaussian (Laplace) view: Sigma0 = Cov(stage-2 posterior draws), g = the gain's one-at-a-time secant
(decided_by), sd^2 = g' Sigma g + the difficulty floor, anchored to the drawn worlds' spread; a candidate's
information dI = J'PJ (old + new runs) - J'PJ (old runs) at the posterior median; Sigma1 = (1 + Sigma0 dI)^-1 Sigma0.
Detail and limits: docs/calibration.md.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gdro_lab import ConfigError
from simulators.calibrate import initial_difficulty as stage1
from simulators.calibrate import dynamics as stage2
from simulators.calibrate.posterior import shrunk_precision
from simulators.world import WorldConfig

METRIC = "test/accuracy"
NOTE = ("A linear-Gaussian (Laplace) approximation: the gain's one-at-a-time gradient (gdro predict's decided_by), "
        "the posterior covariance of the draws, the new runs' Fisher information at the posterior median with an eval "
        "standard error of 0; repeated samples of fixed prompts (score noise) are not modelled. docs/calibration.md")
REALISATIONS = tuple(9000 + 7 * b for b in range(40))  # as dynamics.posterior


def load(cal_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """fit.json and predict/summary.json of a calibration folder (one-line ConfigError when missing)."""
    paths = cal_dir / "fit.json", cal_dir / "predict" / "summary.json"
    if not paths[0].is_file():
        raise ConfigError(f"--plan {cal_dir}: no fit.json there: give the --out folder of gdro calibrate")
    if not paths[1].is_file():
        raise ConfigError(f"--plan {cal_dir}: no predict/summary.json: run gdro predict {cal_dir / 'world.toml'} first")
    try:
        fit, summary = (json.loads(p.read_text(encoding="utf-8")) for p in paths)
    except json.JSONDecodeError as err:
        raise ConfigError(f"--plan {cal_dir}: fit.json or predict/summary.json is not valid JSON ({err})") from None
    if not fit.get("dynamics"):
        raise ConfigError(f"--plan {cal_dir}: no sweep was fitted (gdro calibrate ran without --sweep)")
    return fit, summary


def coordinate(name: str, values: Any) -> np.ndarray:
    """Natural units -> fitting coordinates (log scale, except transfer and stage 1's offset and fractions)."""
    linear = name in stage2.LINEAR or (name in stage1.PARAMS and name not in stage1.LOG_PARAMS)
    return np.asarray(values, float) if linear else np.log(np.maximum(np.asarray(values, float), 1e-300))


def sensitivity(rows: list[dict[str, Any]], names: tuple[str, ...]) -> np.ndarray:
    """g_p = d gain / d x_p from decided_by's two ends (0 for a parameter it does not list or that did not vary)."""
    by_name, g = {row["parameter"]: row for row in rows}, np.zeros(len(names))
    for p, name in enumerate(names):
        row = by_name.get(name)
        if row and len(row["values"]) == 2 and np.all(np.isfinite(row["gains"])):
            lo, hi = coordinate(name, row["values"])
            g[p] = (row["gains"][1] - row["gains"][0]) / (hi - lo) if hi > lo else 0.0
    return g


def covariance(draws: dict[str, list[float]], names: tuple[str, ...]) -> np.ndarray:
    """Covariance of the draws of ``names`` in fitting coordinates (p, p)."""
    x = np.stack([coordinate(n, draws[n]) for n in names], axis=1)
    return np.atleast_2d(np.cov(x.T)) if x.shape[0] > 1 else np.zeros((len(names), len(names)))


def updated_covariance(sigma0: np.ndarray, info: np.ndarray) -> np.ndarray:
    """(Sigma0^-1 + I)^-1 written as (1 + Sigma0 I)^-1 Sigma0 (I projected onto the positive semidefinite)."""
    values, vectors = np.linalg.eigh((info + info.T) / 2)
    info = (vectors * np.maximum(values, 0.0)) @ vectors.T
    out = np.linalg.solve(np.eye(len(sigma0)) + sigma0 @ info, sigma0)
    return (out + out.T) / 2


def candidates(dyn: dict[str, Any]) -> list[tuple[str, list[float], int]]:
    """(label, new arms' lrs, their steps): x2/x4/x8 the largest lr and 1/4 the smallest, at 1x and 2x steps,
    and the whole sweep again at 2x steps."""
    lrs, steps = [float(v) for v in dyn["lrs"]], int(dyn["steps"])
    arms = [(f"lr x{k} the largest", max(lrs) * k) for k in (2, 4, 8)] + [("lr 1/4 the smallest", min(lrs) / 4)]
    out = [(f"{label}, {s} steps", [lr], s) for label, lr in arms for s in (steps, 2 * steps)]
    return out + [(f"whole sweep again, {2 * steps} steps", lrs, 2 * steps)]


def eval_pattern(old_evals: np.ndarray, old_steps: int, steps: int) -> np.ndarray:
    """The sweep's eval steps, repeated every ``old_steps`` up to ``steps`` (what the same eval.every gives)."""
    return np.unique(np.concatenate([old_evals + k * old_steps for k in range(max(1, steps // old_steps))]))


def extra_information(fit: dict[str, Any], new_lrs: list[float], new_steps: int) -> np.ndarray:
    """dI (p, p): the new arms' information on x given the old sweep's (see the module docstring)."""
    dyn = fit["dynamics"]
    old_lrs, old_steps, steps = np.asarray(dyn["lrs"], float), int(dyn["steps"]), max(int(dyn["steps"]), new_steps)
    evals = eval_pattern(np.asarray(dyn["eval_steps"]), old_steps, steps)
    world = replace(WorldConfig(**fit["world"]), **{k: fit["difficulty"]["values"][k] for k in stage1.PARAMS},
                    score_noise=1.0, update_noise=0.05)  # as calibration.calibrate's stage-2 design
    design = stage2.Design(world=world, lrs=np.concatenate([old_lrs, new_lrs]), lr_ref=float(fit["plan"]["lr"]),
                           batch=int(dyn["batch"]), n=int(dyn["n"]), steps=steps, eval_steps=evals,
                           block=max(1, old_steps // 12))
    pooled, x = dyn["groups"] == ["pooled"], stage2.to_vector(dyn["medians"])
    at_x = stage2.simulate(design, x[None], pooled)
    full = stage2.Observation(at_x.success[0], at_x.delta[0], np.zeros_like(at_x.delta[0]))
    L, ends = old_lrs.size, (np.arange(design.num_blocks) + 1) * design.block
    for rows, last in ((slice(L, None), new_steps), (slice(0, L), old_steps)):  # what each arm runs
        full.success_LB[rows, ends > last], full.heldout_LEK[rows, evals > last] = np.nan, np.nan
    old = stage2.Observation(full.success_LB.copy(), full.heldout_LEK.copy(), full.heldout_se_LEK)
    old.success_LB[L:], old.heldout_LEK[L:] = np.nan, np.nan
    w = stage2.weights(at_x, 0, full, len(design.seeds))
    (lo, hi), eye = stage2.box(), np.eye(x.size)  # central differences as dynamics.jacobian, probes run once
    up, down = np.minimum(x + 2 * stage2.DIFF_STEP, hi), np.maximum(x - 2 * stage2.DIFF_STEP, lo)
    probes = stage2.simulate(design, np.concatenate([up * eye + x * (1 - eye), down * eye + x * (1 - eye)]), pooled)
    sweeps = stage2.realisations(design, x, np.zeros(len(dyn["groups"]) + 1), full, pooled, REALISATIONS,
                                 np.random.default_rng(0))
    info = []
    for obs in (full, old):
        r = stage2.residuals(probes, obs, w)[0]
        jac = ((r[:x.size] - r[x.size:]) / (up - down)[:, None]).T
        masked = [stage2.Observation(np.where(np.isfinite(obs.success_LB), s.success_LB, np.nan),
                                     np.where(np.isfinite(obs.heldout_LEK), s.heldout_LEK, np.nan), obs.heldout_se_LEK)
                  for s in sweeps]
        r_b = np.stack([stage2.residuals(at_x, s, w)[0][0] for s in masked])
        info.append(jac.T @ shrunk_precision(r_b, np.zeros(r_b.shape[1]), 1)[0] @ jac)
    return info[0] - info[1]


def sharp(median: float, sd: float, threshold: float) -> bool:
    """The verdict's side is clear (|median| > 1.96 sd) or the gain is clearly within +-threshold."""
    return abs(median) > 1.96 * sd or 1.96 * sd < threshold - abs(median)


def make_plan(cal_dir: Path, method: str = "prompt_gdro") -> dict[str, Any]:
    """The current spread of ``method``'s gain vs tuned GRPO, each candidate sweep's spread after it, the pick."""
    fit, summary = load(cal_dir)
    entry, dyn, threshold = summary.get("methods", {}).get(method), fit["dynamics"], float(summary["threshold"])
    if entry is None:
        raise ConfigError(f"--method {method}: not in {cal_dir}/predict/summary.json (it has "
                          f"{', '.join(summary.get('methods', {}))})")
    rows = entry.get("decided_by", {}).get(METRIC, {}).get("vs_tuned")
    if not rows:
        raise ConfigError(f"--plan {cal_dir}: summary.json has no decided_by for {method}: re-run gdro predict")
    names1 = tuple(n for n in stage1.PARAMS if n in fit["difficulty"]["draws"])
    g1, g, sigma0 = sensitivity(rows, names1), sensitivity(rows, stage2.PARAMS), covariance(dyn["draws"], stage2.PARAMS)
    floor = float(g1 @ covariance(fit["difficulty"]["draws"], names1) @ g1)
    linear = lambda sigma: float(np.sqrt(max(g @ sigma @ g, 0.0) + floor))  # noqa: E731
    gain = entry[METRIC]["vs_tuned"]
    drawn = (gain["hi"] - gain["lo"]) / 3.92 if np.isfinite(gain["hi"] - gain["lo"]) else np.nan
    # anchored: the linearised sd's relative change, applied to the drawn worlds' own spread (the gain is far from
    # linear over a wide interval: on the LM world the linearised sd was 3x the drawn worlds')
    anchor = drawn / linear(sigma0) if linear(sigma0) > 0 and np.isfinite(drawn) and drawn > 0 else 1.0
    sd = lambda sigma: anchor * linear(sigma)  # noqa: E731
    median, sd0, out = float(gain["median"]), sd(sigma0), []
    for label, lrs, steps in candidates(dyn):
        sigma1 = updated_covariance(sigma0, extra_information(fit, lrs, steps))
        evals = np.count_nonzero(eval_pattern(np.asarray(dyn["eval_steps"]), int(dyn["steps"]), steps) > 0)
        out.append({"label": label, "lrs": lrs, "steps": steps, "rollouts": len(lrs) * steps * dyn["batch"] * dyn["n"],
                    "evals": len(lrs) * int(evals), "sd": sd(sigma1), "sharp": sharp(median, sd(sigma1), threshold),
                    "sd_x": dict(zip(stage2.PARAMS, np.sqrt(np.maximum(np.diag(sigma1), 0)).tolist()))})
    out.sort(key=lambda c: c["rollouts"])
    pick = next((c for c in out if c["sharp"]), None) or max(out, key=lambda c: (sd0 - c["sd"]) / c["rollouts"])
    now = sharp(median, sd0, threshold)
    return {"method": method, "metric": METRIC, "median": median, "lo": entry[METRIC]["vs_tuned"]["lo"],
            "hi": entry[METRIC]["vs_tuned"]["hi"], "threshold": threshold, "sd": sd0, "floor_sd": anchor * np.sqrt(floor),
            "linearised_sd": linear(sigma0), "anchor": anchor,
            "sharp": now, "g": dict(zip(stage2.PARAMS, g.tolist())), "candidates": out,
            "pick": None if now else pick["label"], "command": [] if now else _commands(fit, pick, cal_dir)}


def _commands(fit: dict[str, Any], pick: dict[str, Any], cal_dir: Path) -> list[str]:
    """The gdro train loop for the picked arms (the sweep's own lr units and eval interval), then the refit."""
    every = int(np.min(np.diff(np.unique(np.r_[0, fit["dynamics"]["eval_steps"]]))))
    words = shlex.split(fit.get("command", "gdro calibrate --sweep RUN_DIRS"))
    at = words.index("--sweep") + 1 if "--sweep" in words else len(words)
    at = next((i for i in range(at, len(words)) if words[i].startswith("--")), len(words))
    words[at:at] = [f"runs/plan-lr{lr:.3g}" for lr in pick["lrs"]]  # gdro train's runs/<run_name>
    return [f"for lr in {' '.join(f'{lr:.3g}' for lr in pick['lrs'])}; do gdro train YOUR.toml method.name=grpo "
            f"optim.lr=$lr train.steps={pick['steps']} eval.every={every} train.run_name=plan-lr$lr; done",
            shlex.join(words), f"gdro predict {cal_dir / 'world.toml'}"]


def screen(plan: dict[str, Any]) -> str:
    """One screen: the current spread, the candidates by cost, the recommendation and its commands."""
    from simulators.calibrate.predict import LABELS

    pp = lambda v: f"{100 * v:+.1f}"  # noqa: E731
    lines = [f"gdro calibrate --plan: {LABELS.get(plan['method'], plan['method'])} vs tuned GRPO, {plan['metric']}: "
             f"median {pp(plan['median'])} pp, sd {100 * plan['sd']:.2f} pp (the drawn worlds' 95% / 3.92; linearised "
             f"{100 * plan['linearised_sd']:.2f}, difficulty floor "
             f"{100 * plan['floor_sd']:.2f}; drawn worlds' 95% [{pp(plan['lo'])}, {pp(plan['hi'])}]); sharp now: "
             + ("yes" if plan["sharp"] else "no"),
             f"  {'extra plain-GRPO runs':<40} {'rollouts':>10} {'evals':>6} {'sd after (pp)':>14}  sharp?"]
    lines += [f"  {c['label']:<40} {c['rollouts']:>10,} {c['evals']:>6} {100 * c['sd']:>14.2f}  "
              f"{'yes' if c['sharp'] else 'no'}" for c in plan["candidates"]]
    pick = next((c for c in plan["candidates"] if c["label"] == plan["pick"]), None)
    if pick is None:
        return "\n".join(lines + ["recommended: no extra sweep: the verdict is already sharp"])
    why = "the cheapest that makes it sharp" if pick["sharp"] else "none makes it sharp: the most sd cut per rollout"
    lines.append(f"recommended: {pick['label']} ({why}; sd {100 * plan['sd']:.2f} -> {100 * pick['sd']:.2f} pp); "
                 "then refit and predict:")
    return "\n".join(lines + [f"  {c}" for c in plan["command"]])


def write(plan: dict[str, Any], text: str, cal_dir: Path) -> Path:
    """CAL_DIR/plan.md (the screen and the approximation) and CAL_DIR/plan.json (the numbers)."""
    (cal_dir / "plan.json").write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
    (cal_dir / "plan.md").write_text(f"# Extra sweep plan\n\n```\n{text}\n```\n\n{NOTE}\n", encoding="utf-8")
    return cal_dir / "plan.md"
