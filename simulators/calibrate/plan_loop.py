"""The plan's loop closed on known worlds: does the extra sweep `gdro calibrate --plan` recommends deliver?

Per known world: calibrate from its simulated data, predict, plan (``next_sweep.make_plan``); run the picked
extra plain-GRPO runs in the TRUE world (the simulator), refit on the old and new runs together, predict again;
compare the achieved spread and verdict of the planned method's gain vs tuned GRPO with what the plan promised,
and with the true gain. The driver: ``scripts/plan_loop.py``; the table: docs/calibration.md#the-plans-loop.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simulators.calibrate import next_sweep, predict
from simulators.calibrate.bootstrap import true_gains
from simulators.calibrate.calibration import Plan, calibrate
from simulators.calibrate.observe import Sweep, SweepRun
from simulators.calibrate.recovery import LRS, synthetic_data, truth_world

METHOD = "prompt_gdro"


def merged(old: Sweep, new: Sweep) -> Sweep:
    """One sweep of the old and new runs; runs shorter than the longest end in NaN (steps they did not run)."""
    steps = max(old.steps, new.steps)
    runs = [SweepRun(r.lr, np.r_[r.success_T, np.full(steps - r.success_T.size, np.nan)], r.eval_steps_E,
                     r.heldout_EK, r.heldout_se_EK, r.name) for r in old.runs + new.runs]
    return replace(old, runs=runs, steps=steps)


def _fit_and_predict(sample: Any, sweep: Sweep, plan: Plan, cal_dir: Path, settings: predict.Settings, *,
                     boots: int, pilot: int, seed: int) -> dict[str, Any]:
    """Calibrate, predict with the perturbed worlds (the plan needs decided_by); fit.json and predict/summary.json."""
    from studykit.tables import write_json

    record = calibrate(sample, sweep, plan, boots=boots, pilot=pilot, seed=seed, log=lambda _: None)
    record.pop("_objects")
    cal_dir.mkdir(parents=True, exist_ok=True)
    write_json(cal_dir / "fit.json", record)
    cal = predict.Calibrated({"world": record["world"]}, json.loads((cal_dir / "fit.json").read_text()),
                             cal_dir / "world.toml")
    summary = predict.predict(cal, replace(settings, out=cal_dir / "predict", draws=min(settings.draws,
                                                                                          cal.draw_count)))
    write_json(cal_dir / "predict" / "summary.json", summary)
    return summary


def spread(summary: dict[str, Any], method: str = METHOD) -> dict[str, float]:
    """The planned method's gain vs tuned GRPO in held-out accuracy: median, sd (central 95% / 3.92), sharp?"""
    entry = summary["methods"][method][next_sweep.METRIC]["vs_tuned"]
    sd = (entry["hi"] - entry["lo"]) / 3.92
    return {"median": entry["median"], "sd": sd, "lo": entry["lo"], "hi": entry["hi"],
            "sharp": next_sweep.sharp(entry["median"], sd, summary["threshold"])}


def close_loop(name: str, seed: int, out: Path, *, worlds: dict[str, dict[str, Any]] | None = None,
               num_prompts: int = 320, data_steps: int = 12, steps: int = 20, batch: int = 16, draws: int = 8,
               seeds: int = 2, truth_seeds: int = 8, boots: int = 8, pilot: int = 48, workers: int = 1,
               num_groups: int = 5, lrs: tuple[float, ...] = LRS, data_batch: int = 64) -> dict[str, Any]:
    """One known world: fit, plan, run the pick in the true world, refit; the promised and achieved spreads."""
    from simulators.calibrate.gain_recovery import GAIN_WORLDS

    truth = truth_world(name, num_prompts, num_groups, seed, worlds or GAIN_WORLDS)
    every = max(1, data_steps // 3)
    sample, sweep = synthetic_data(truth, lrs=lrs, batch=data_batch, n=4, steps=data_steps, eval_every=every, k=8, seed=seed)
    plan = Plan(pool_size=num_prompts, batch=batch, steps=steps, lr=1.0, optimizer="sgd")
    settings = predict.Settings(draws=draws, seeds=seeds, steps=steps, batch=batch, lr_scale=1.0, optimizer="sgd",
                                workers=workers, out=out)
    fit = dict(boots=boots, pilot=pilot, seed=seed)
    before = spread(_fit_and_predict(sample, sweep, plan, out / "before", settings, **fit))
    proposal = next_sweep.make_plan(out / "before", METHOD)
    labels = [c["label"] for c in proposal["candidates"]]
    pick = next((c for c in proposal["candidates"] if c["label"] == proposal["pick"]), None)
    ran_anyway = pick is None  # already sharp: run the cheapest candidate all the same, to check its promise
    pick = pick or proposal["candidates"][0]
    _, extra = synthetic_data(truth, lrs=pick["lrs"], batch=data_batch, n=4, steps=pick["steps"], eval_every=every, k=8,
                              seed=seed)
    after = spread(_fit_and_predict(sample, merged(sweep, extra), plan, out / "after", settings, **fit))
    gain, se = true_gains(truth.to_dict(), replace(settings, out=out / "truth", draws=1, seeds=truth_seeds))[
        f"{METHOD}|{next_sweep.METRIC}|vs_tuned"]
    covered = lambda s: bool(s["lo"] <= gain <= s["hi"])  # noqa: E731
    return {"world": name, "seed": seed, "pick": pick["label"], "ran_anyway": ran_anyway, "lrs": pick["lrs"],
            "steps": pick["steps"], "rollouts": pick["rollouts"], "candidates": labels,
            "promised_sd_before": proposal["sd"], "promised_sd_after": pick["sd"], "promised_sharp": pick["sharp"],
            "before": {**before, "covers_truth": covered(before)}, "after": {**after, "covers_truth": covered(after)},
            "truth": gain, "truth_se": se, "threshold": proposal["threshold"]}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The docs' table: per world, the pick, the promised and achieved sd (pp) and sharpness, the truth."""
    from studykit.tables import markdown_table

    pp = lambda v: f"{100 * v:+.1f}"  # noqa: E731
    side = lambda s: ("sharp" if s["sharp"] else "not sharp") + ("" if s["covers_truth"] else ", misses truth")  # noqa: E731
    body = [[f"{r['world']} (seed {r['seed']})", r["pick"] + (" (already sharp; run anyway)" if r["ran_anyway"] else ""),
             f"{r['rollouts']:,}", f"{pp(r['before']['median'])}, sd {100 * r['before']['sd']:.2f}: {side(r['before'])}",
             f"{100 * r['promised_sd_after']:.2f}: {'sharp' if r['promised_sharp'] else 'not sharp'}",
             f"{pp(r['after']['median'])}, sd {100 * r['after']['sd']:.2f}: {side(r['after'])}",
             f"{pp(r['truth'])} ± {100 * r['truth_se']:.1f}"] for r in rows]
    return markdown_table(["world", "plan's pick", "extra rollouts", "before: median, sd (pp)",
                           "promised sd after (pp)", "achieved after: median, sd (pp)", "true gain (pp) ± se"], body)
