"""Recovery study: calibrate from data of simulator worlds with KNOWN parameters and check the fit.

The data are made by the simulator's own loop (``simulators.loop.Simulation``): a stage-1 sample of
every training prompt and plain GRPO at a few learning rates, written by ``write_as_real`` in the files
``gdro calibrate`` reads (a samples file, ``gdro train``-style run directories).

    python -m simulators.calibrate.recovery --out reports/calibration/recovery --reps 3 --update-docs

For every parameter: the estimate's error against the truth and whether the 95% interval covers it;
coverage over worlds and seeds is compared with the nominal 95% (docs/calibration.md's table, which the
command above writes). The data in detail: docs/calibration-notes.md#simulators-calibrate-recovery.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from scipy.special import expit

from gdro_lab import RunWriter
from simulators.calibrate import initial_difficulty as stage1
from simulators.calibrate import dynamics as stage2
from simulators.calibrate.calibration import Plan, calibrate
from simulators.calibrate.initial_difficulty import SuccessCounts
from simulators.calibrate.observe import Sweep, SweepRun
from simulators.loop import Simulation
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig
from studykit.provenance import portable, provenance, rows_provenance, settings_of

#: Known worlds of the study: a middle world, a hard one (a large never-solved mass, fast learning,
#: cheap steps) and an easy one (a large always-solved mass, noisy scores, little transfer).
WORLDS: dict[str, dict[str, Any]] = {
    "middle": dict(difficulty_offset=-1.0, group_difficulty_scale=0.8, group_difficulty_tail=2.0,
                   prompt_difficulty_scale=1.2, prompt_difficulty_tail=1.5, unsolvable_frac=0.1,
                   always_solved_frac=0.1, lr_group=0.3, lr_shared=0.015, lr_prompt=0.2, curvature=0.2,
                   score_noise=2.0, transfer=0.5, update_noise=0.05),
    "hard": dict(difficulty_offset=0.5, group_difficulty_scale=1.0, group_difficulty_tail=2.5,
                 prompt_difficulty_scale=1.0, prompt_difficulty_tail=2.0, unsolvable_frac=0.25,
                 always_solved_frac=0.02, lr_group=0.6, lr_shared=0.03, lr_prompt=0.1, curvature=0.05,
                 score_noise=1.0, transfer=0.7, update_noise=0.1),
    "easy": dict(difficulty_offset=-2.0, group_difficulty_scale=0.5, group_difficulty_tail=3.0,
                 prompt_difficulty_scale=1.5, prompt_difficulty_tail=1.2, unsolvable_frac=0.05,
                 always_solved_frac=0.25, lr_group=0.2, lr_shared=0.01, lr_prompt=0.4, curvature=0.5,
                 score_noise=4.0, transfer=0.2, update_noise=0.02),
}
LRS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: The module whose import closure is the code of the report (coverage.json's provenance).
ENTRY = ["simulators.calibrate.recovery"]


def truth_world(name: str, num_prompts: int, num_groups: int, seed: int,
                worlds: dict[str, dict[str, Any]] | None = None) -> WorldConfig:
    """A known world of ``worlds`` (default WORLDS; its hardness ranks drawn once per seed, then explicit)."""
    ranks = tuple(int(r) for r in np.random.default_rng([seed, 7]).permutation(num_groups))
    return WorldConfig(num_prompts=num_prompts, num_groups=num_groups, group_hardness_rank=ranks,
                       aggregation="rollout", **(worlds or WORLDS)[name])


def synthetic_data(world: WorldConfig, *, lrs: Sequence[float], batch: int, n: int, steps: int, eval_every: int,
                   k: int, seed: int) -> tuple[SuccessCounts, Sweep]:
    """The stage-1 sample and the GRPO sweep of ``world`` (see the module docstring), lr_scale = each lr."""
    rng = np.random.default_rng([seed, 11])
    names = tuple(f"g{g}" for g in range(world.num_groups))
    runs: list[SweepRun] = []
    for lr in lrs:
        sim = Simulation(SimConfig(method="grpo", seed=seed, batch=batch, n_bar=n, steps=steps, world=world,
                                   lr_scale=float(lr), eval_every=steps, snapshot_every=-1))
        if not runs:
            c = rng.binomial(k, expit(-sim.world.difficulty_P))
            sample = SuccessCounts(names, sim.world.group_P, c, np.full(c.size, k))
        success, eval_steps, held, held_se = [], [], [], []
        for t in range(1, steps + 1):
            scalars, _ = sim.step(record=True)  # type: ignore[misc]
            success.append(scalars["mean_success"])
            if t % eval_every == 0:
                value, se = _heldout_estimate(sim, k, world.num_groups, rng)
                eval_steps.append(t)
                held.append(value)
                held_se.append(se)
        runs.append(SweepRun(float(lr), np.array(success), np.array(eval_steps), np.array(held), np.array(held_se),
                             f"grpo-lr{lr:g}"))
    return sample, Sweep(runs, names, batch, n, steps, world.aggregation, 1.0)


def _heldout_estimate(sim: Simulation, k: int, K: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each held-out group's accuracy from k samples per prompt, and its standard error."""
    group = sim.world.heldout_group_H
    rate = rng.binomial(k, sim.learner.heldout_prob()) / k
    size = np.bincount(group, minlength=K)
    mean = np.bincount(group, rate, K) / size
    var = np.bincount(group, (rate - mean[group]) ** 2, K) / np.maximum(size - 1, 1)
    return mean, np.sqrt(var / size)


def write_as_real(sample: SuccessCounts, sweep: Sweep, out: Path, k: int) -> tuple[Path, list[Path]]:
    """The data as `gdro eval --save-samples` and `gdro train` would write them (for the CLI and tests)."""
    samples_dir = out / "eval"
    with RunWriter(samples_dir, {"eval": {"temperature": sweep.temperature, "k": k}}, num_bins=1,
                   producer="recovery study (gdro eval format)", bin_labels=["all"]) as writer:
        writer.log_eval(0, {"pooled/mean@1": float(sample.successes_P.sum() / sample.samples_P.sum())})
    with open(samples_dir / "eval_samples_step0.jsonl", "w", encoding="utf-8") as handle:
        for i, (g, c, n) in enumerate(zip(sample.group_P, sample.successes_P, sample.samples_P)):
            for j in range(int(n)):
                record = {"id": f"p{i}", "sample": j, "success": bool(j < c), "text": "",
                          "group": sample.group_names[g], "source": "synthetic"}
                handle.write(json.dumps(record) + "\n")
    run_dirs = []
    for run in sweep.runs:
        config = {"method": {"name": "grpo", "n_bar": sweep.n}, "train": {"prompts_per_step": sweep.batch},
                  "loss": {"agg": "token-mean" if sweep.aggregation == "rollout" else "seq-mean-token-mean"},
                  "eval": {"k": k}, "rollout": {"temperature": sweep.temperature},
                  "optim": {"lr": run.lr, "lr_scale": 1.0}}
        path = out / run.name
        with RunWriter(path, config, num_bins=1, producer="recovery study (gdro train format)",
                       bin_labels=["all"]) as writer:
            for t, value in enumerate(run.success_T, 1):
                writer.log_step(t, {"mean_success": float(value)}, {})
            for e, step in enumerate(run.eval_steps_E):
                metrics: dict[str, float] = {}
                for g, name in enumerate(sweep.group_names):
                    value, se = float(run.heldout_EK[e, g]), float(run.heldout_se_EK[e, g])
                    metrics.update({f"group/{name}/mean@{k}": value, f"group/{name}/mean@{k}_lo": value - 1.96 * se,
                                    f"group/{name}/mean@{k}_hi": value + 1.96 * se})
                writer.log_eval(int(step), metrics)
        run_dirs.append(path)
    return samples_dir, run_dirs


def recover(name: str, seed: int, *, num_prompts: int = 1600, num_groups: int = 5, k: int = 8, batch: int = 64,
            steps: int = 60, eval_every: int = 20, boots: int = 40, pilot: int = 48) -> list[dict[str, Any]]:
    """Calibrate from one known world's data; a row per parameter: truth, estimate, interval, covered."""
    truth = truth_world(name, num_prompts, num_groups, seed)
    sample, sweep = synthetic_data(truth, lrs=LRS, batch=batch, n=4, steps=steps, eval_every=eval_every, k=k,
                                   seed=seed)
    plan = Plan(pool_size=num_prompts, batch=batch, steps=steps, lr=1.0, optimizer="sgd")
    record = calibrate(sample, sweep, plan, boots=boots, pilot=pilot, seed=seed, log=lambda _: None)
    rows = []
    for stage, params in (("difficulty", stage1.PARAMS), ("dynamics", stage2.PARAMS)):
        for param in params:
            lo, hi = record[stage]["intervals"][param]
            true, est = float(getattr(truth, param)), float(record[stage]["values"][param])
            rows.append({"world": name, "seed": seed, "stage": stage, "parameter": param, "truth": true,
                         "estimate": est, "lo": lo, "hi": hi, "covered": bool(lo <= true <= hi),
                         "identification": record["identification"].get(param, "")})
    return rows


def recover_difficulty(name: str, seed: int, *, num_prompts: int = 1600, num_groups: int = 5, k: int = 8,
                       boots: int = 40) -> list[dict[str, Any]]:
    """Stage 1 alone (cheap, so many more replicates): a row per difficulty parameter."""
    truth = truth_world(name, num_prompts, num_groups, seed)
    from simulators.world import make_world

    world = make_world(truth, np.random.default_rng([seed, 5]))
    c = np.random.default_rng([seed, 11]).binomial(k, expit(-world.difficulty_P))
    sample = SuccessCounts(tuple(f"g{g}" for g in range(num_groups)), world.group_P, c, np.full(c.size, k))
    fit = stage1.fit_difficulty(sample, boots=boots, seed=seed)
    return [{"world": name, "seed": seed, "stage": "difficulty", "parameter": param, "truth": float(getattr(truth, param)),
             "estimate": float(fit.values[param]), "lo": fit.interval(param)[0], "hi": fit.interval(param)[1],
             "covered": bool(fit.interval(param)[0] <= getattr(truth, param) <= fit.interval(param)[1]),
             "identification": ""} for param in stage1.PARAMS]


def coverage_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per parameter over worlds and seeds: coverage (with its binomial 95% interval), median relative error."""
    from scipy.stats import binomtest

    out = []
    for param in dict.fromkeys(r["parameter"] for r in rows):
        mine = [r for r in rows if r["parameter"] == param]
        hits = sum(r["covered"] for r in mine)
        ci = binomtest(hits, len(mine)).proportion_ci(0.95)
        errors = [abs(r["estimate"] - r["truth"]) / max(abs(r["truth"]), 1e-9) for r in mine]
        weak = sum(r["identification"].startswith("weak") for r in mine)
        silent = sum(not r["covered"] and not r["identification"].startswith("weak") for r in mine)
        out.append({"parameter": param, "stage": mine[0]["stage"], "replicates": len(mine), "covered": hits,
                    "coverage": hits / len(mine), "coverage_lo": ci.low, "coverage_hi": ci.high,
                    "median_relative_error": float(np.median(errors)), "flagged_weak": weak,
                    "missed_unflagged": silent})
    return out


def coverage_markdown(table: list[dict[str, Any]]) -> str:
    """The docs' table: per parameter, coverage of the 95% intervals and the median relative error."""
    from studykit.tables import markdown_table

    rows = [[f"`{r['parameter']}`", r["stage"], f"{r['covered']}/{r['replicates']}",
             f"{100 * r['coverage']:.0f}% [{100 * r['coverage_lo']:.0f}, {100 * r['coverage_hi']:.0f}]",
             f"{100 * r['median_relative_error']:.0f}%", f"{r['flagged_weak']}/{r['replicates']}"] for r in table]
    return markdown_table(["parameter", "stage", "intervals covering the truth", "coverage [95% CI] (nominal 95%)",
                           "median |error| / truth", "flagged weak"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulators.calibrate.recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=6, help="seeds per known world (default 6)")
    parser.add_argument("--worlds", default=",".join(WORLDS))
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + reps - 1")
    parser.add_argument("--stage1-only", action="store_true", help="only the difficulty fit (many replicates cheaply)")
    parser.add_argument("--summarize-only", action="store_true", help="no fits: summarize OUT/rows.json")
    parser.add_argument("--update-docs", action="store_true",
                        help="also put the table into docs/calibration.md (between its recovery markers)")
    args = parser.parse_args(argv)
    words = list(sys.argv[1:] if argv is None else argv)
    made_by = provenance(ENTRY, " ".join(["python -m simulators.calibrate.recovery", *portable(words)]),
                         settings_of(args))  # the code that runs, taken as it starts
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    previous = args.out / "coverage.json"
    earlier = json.loads(previous.read_text()).get("provenance") if previous.is_file() else None
    if args.summarize_only or args.first_seed:
        rows = json.loads((args.out / "rows.json").read_text())
    for name in [] if args.summarize_only else args.worlds.split(","):  # more seeds append to OUT/rows.json
        for seed in range(args.first_seed, args.first_seed + args.reps):
            made = recover_difficulty(name, seed) if args.stage1_only else recover(name, seed)
            rows += [{**row, "code_digest": made_by["code_digest"]} for row in made]  # the code that made it
            print(f"recovery: {name} seed {seed} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
            (args.out / "rows.json").write_text(json.dumps(rows, indent=1))
    table = coverage_table(rows)
    seconds, commands = time.perf_counter() - started, []
    made_by, note = rows_provenance(made_by, earlier, rows)  # rows made earlier: by the earlier code
    if (args.summarize_only or args.first_seed) and previous.is_file():  # the fits' time and commands so far
        before = json.loads(previous.read_text())
        commands = before.get("commands", [before["command"]] if "command" in before else [])
        seconds = before.get("seconds", 0.0) + (0.0 if args.summarize_only else seconds)
    if not args.summarize_only:
        commands.append("python -m simulators.calibrate.recovery " + " ".join(portable(words)))
    (args.out / "coverage.json").write_text(json.dumps({"table": table, "seconds": seconds, "commands": commands,
                                                        "provenance": made_by}, indent=1))
    if note:
        print(f"recovery: note: {args.out}: {note}", file=sys.stderr)
    (args.out / "coverage.md").write_text(coverage_markdown(table) + "\n", encoding="utf-8")
    print(coverage_markdown(table))
    if args.update_docs:
        from simulators.calibrate.calibration_report import ROOT, update_between

        update_between(ROOT / "docs" / "calibration.md", "recovery", coverage_markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
