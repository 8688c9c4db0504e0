"""Gain-level recovery: per known world and seed, calibrate from the simulator's own data, predict each
method's gain over drawn worlds, measure the true gain over ``--truth-seeds`` seeds; report the coverage of
the true gains, the sign the verdict names where the truth is clear (|gain| > 2 se and > the threshold), the
median width, and the candidate intervals (docs/calibration.md).

    python -m simulators.calibrate.gain_recovery --out reports/calibration/gain-recovery --update-docs
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from simulators.calibrate import bootstrap, predict
from simulators.calibrate.bootstrap import true_gains
from simulators.calibrate.calibration import Plan, calibrate
from simulators.calibrate.posterior import side_towards
from simulators.calibrate.recovery import LRS, WORLDS, synthetic_data, truth_world
from studykit.provenance import portable, provenance, rows_provenance, settings_of

#: The module whose import closure is the code of the report (summary.json's provenance).
ENTRY = ["simulators.calibrate.gain_recovery"]

GAIN_WORLDS: dict[str, dict[str, Any]] = {
    **WORLDS,
    "cheap": dict(difficulty_offset=-0.5, group_difficulty_scale=0.8, group_difficulty_tail=2.0,
                  prompt_difficulty_scale=1.0, prompt_difficulty_tail=2.0, unsolvable_frac=0.4,
                  always_solved_frac=0.05, lr_group=0.4, lr_shared=0.02, lr_prompt=0.2, curvature=0.02,
                  score_noise=0.5, transfer=0.5, update_noise=0.05),
    "costly": dict(difficulty_offset=-1.5, group_difficulty_scale=0.6, group_difficulty_tail=2.5,
                   prompt_difficulty_scale=1.2, prompt_difficulty_tail=1.5, unsolvable_frac=0.05,
                   always_solved_frac=0.3, lr_group=0.3, lr_shared=0.015, lr_prompt=0.2, curvature=1.0,
                   score_noise=6.0, transfer=0.9, update_noise=0.05),
    "noisy": dict(difficulty_offset=0.0, group_difficulty_scale=1.2, group_difficulty_tail=1.5,
                  prompt_difficulty_scale=0.8, prompt_difficulty_tail=2.5, unsolvable_frac=0.15,
                  always_solved_frac=0.1, lr_group=0.5, lr_shared=0.025, lr_prompt=0.3, curvature=0.3,
                  score_noise=8.0, transfer=0.3, update_noise=0.2),
}
"""The parameter study's three worlds plus a cheap-step / low-noise / many never-solved world, a costly /
high-noise / many always-solved world with high transfer, and a very noisy hard one."""


def _settings(out: Path, draws: int, seeds: int, steps: int, batch: int, workers: int) -> predict.Settings:
    return predict.Settings(draws=draws, seeds=seeds, steps=steps, batch=batch, lr_scale=1.0, optimizer="sgd",
                            workers=workers, out=out)


def recover_gains(name: str, seed: int, out: Path, *, draws: int = 40, seeds: int = 2, truth_seeds: int = 18,
                  num_prompts: int = 1600, steps: int = 100, batch: int = 32, data_steps: int = 60,
                  workers: int = 2, threshold: float = predict.THRESHOLD, boot: int = 0) -> list[dict[str, Any]]:
    """One known world and seed: calibrate, predict, measure the truth; a row per predicted gain. With ``boot``
    > 0 each row also carries the fit's own bootstrap intervals (``bootstrap.py``: ``error_lo``/``error_hi``, what
    gdro predict --bootstrap prints, and ``boot_lo``/``boot_hi``, the stretch factor before it), the refits' rows of
    that gain (``boot_rows``) and the fit's stage-2 posterior against the truth (``fit_params``: 2.5%, 50%,
    97.5%, truth)."""
    truth = truth_world(name, num_prompts, 5, seed, GAIN_WORLDS)
    sample, sweep = synthetic_data(truth, lrs=LRS, batch=64, n=4, steps=data_steps, eval_every=max(1, data_steps // 3),
                                   k=8, seed=seed)
    plan = Plan(pool_size=num_prompts, batch=batch, steps=steps, lr=1.0, optimizer="sgd")
    record = calibrate(sample, sweep, plan, boots=max(draws, 2), pilot=48, seed=seed, log=lambda _: None)
    record.pop("_objects")
    cal = predict.Calibrated({"world": record["world"]}, record, out)
    settings = _settings(out / f"{name}-s{seed}" / "predict", min(draws, cal.draw_count), seeds, steps, batch, workers)
    summary = predict.summarize(predict.run_all(settings, predict.world_draws(cal, settings.draws)), settings.draws,
                                [], threshold)
    true_settings = _settings(out / f"{name}-s{seed}" / "truth", 1, truth_seeds, steps, batch, workers)
    truth_table = true_gains(truth.to_dict(), true_settings)
    own = {}
    fit_params = {name: [*np.quantile(values, [0.025, 0.5, 0.975]).tolist(), truth.to_dict()[name]]
                  for name, values in record["dynamics"]["draws"].items()} if boot > 0 else {}
    if boot > 0:
        shapes = bootstrap.Shapes(num_prompts, truth.num_groups, 8, LRS, 64, 4, data_steps, max(1, data_steps // 3))
        started = time.perf_counter()
        own = bootstrap.bootstrap(cal, settings, boot, shapes=shapes, truth_seeds=max(4, truth_seeds // 3))
        own["seconds"] = time.perf_counter() - started
    rows = []
    for key, (gain, se) in truth_table.items():
        label, metric, base = key.split("|")
        entry = summary["methods"][label][metric][base]
        n = entry["worlds"]
        sign = 1 if entry["above_zero"] >= predict.DECISIVE * n else -1 if entry["below_zero"] >= predict.DECISIVE * n else 0
        clear = abs(gain) > max(2 * se, threshold)
        rows.append({"world": name, "seed": seed, "method": label, "metric": metric, "baseline": base, "truth": gain,
                     "truth_se": se, "median": entry["median"], "lo": entry["lo"], "hi": entry["hi"],
                     "covered": bool(entry["lo"] <= gain <= entry["hi"]), "width": entry["hi"] - entry["lo"],
                     "verdict_sign": sign, "clear": bool(clear), "sign_right": bool(clear and sign == np.sign(gain)),
                     "sign_wrong": bool(clear and sign == -np.sign(gain)), "per_world": entry["per_world"]})
        if own:
            wide = bootstrap.widen(entry, own["factors"][metric])
            error = bootstrap.error_interval(entry, bootstrap.errors(own["rows"]).get(key, np.array([])))
            rows[-1].update({"boot": boot, "boot_factor": wide["widening"], "boot_lo": wide["wide_lo"],
                             "boot_hi": wide["wide_hi"], "boot_seconds": own["seconds"],
                             "error_lo": error["wide_lo"], "error_hi": error["wide_hi"],
                             "boot_rows": [{k: b[k] for k in ("seed", "truth", "truth_se", "median", "lo", "hi",
                                                              "per_world")}
                                           for b in own["rows"] if (b["method"], b["metric"], b["baseline"]) ==
                                           (label, metric, base)],
                             "fit_params": fit_params})
    return rows


def summarize_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage (with its binomial 95% interval), sign accuracy and median width, overall and per world."""
    from scipy.stats import binomtest

    def stats(mine: list[dict[str, Any]]) -> dict[str, Any]:
        hits = sum(r["covered"] for r in mine)
        ci = binomtest(hits, len(mine)).proportion_ci(0.95)
        clear = [r for r in mine if r["clear"]]
        return {"rows": len(mine), "covered": hits, "coverage": hits / len(mine), "coverage_lo": ci.low,
                "coverage_hi": ci.high, "clear": len(clear), "sign_right": sum(r["sign_right"] for r in clear),
                "sign_wrong": sum(r["sign_wrong"] for r in clear),
                "median_width": float(np.median([r["width"] for r in mine]))}

    worlds = dict.fromkeys(r["world"] for r in rows)
    return {"all": stats(rows), "worlds": {w: stats([r for r in rows if r["world"] == w]) for w in worlds},
            "fits": len({(r["world"], r["seed"]) for r in rows}), "intervals": interval_kinds(rows)}


def widening(row: dict[str, Any]) -> float:
    """How far the central interval's side towards the truth must be stretched about the median to reach it
    (0 inside the median, inf when that side has no width and the truth lies beyond it)."""
    gap = row["truth"] - row["median"]
    side = side_towards(row["truth"], row["median"], row["lo"], row["hi"])
    return 0.0 if gap == 0 else abs(gap) / side if side > 0 else math.inf


def interval_kinds(rows: list[dict[str, Any]], level: float = 0.95) -> dict[str, Any]:
    """Coverage of the candidate intervals on the same drawn worlds: the central 95% (order statistics), the
    Gaussian mean +- 1.96 sd, and the central interval widened by the factor k that covers ``level`` of the
    rows, k chosen on the other worlds' rows (leave one world out) so the coverage is not in-sample."""
    gauss = [abs(r["truth"] - np.mean(r["per_world"])) <= 1.96 * np.std(r["per_world"], ddof=1) + 1e-12 for r in rows]
    factors = np.array([widening(r) for r in rows])
    worlds = np.array([r["world"] for r in rows])
    covered = 0
    for w in dict.fromkeys(worlds):
        k = float(np.quantile(factors[worlds != w], level, method="higher")) if np.any(worlds != w) else math.inf
        covered += int(np.sum(factors[worlds == w] <= k))
    k_all = float(np.quantile(factors, level, method="higher"))
    return {"central": float(np.mean([r["covered"] for r in rows])), "gaussian": float(np.mean(gauss)),
            "widening": k_all, "widened_leave_one_world_out": covered / len(rows)}


def with_error_interval(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its bootstrap's error interval (``error_lo``, ``error_hi``) computed from the refits' rows it
    carries (``boot_rows``) where it has none yet (rows written before the interval existed)."""
    if "error_lo" in row or "boot_rows" not in row:
        return row
    error_B = np.array([b["truth"] - b["median"] for b in row["boot_rows"]
                        if math.isfinite(b["truth"]) and math.isfinite(b["median"])])
    error = bootstrap.error_interval({k: row[k] for k in ("median", "lo", "hi")}, error_B)
    return {**row, "error_lo": error["wide_lo"], "error_hi": error["wide_hi"]}


def per_fit_comparison(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows that carry a bootstrap widening: per world and overall, coverage and median width of the central
    interval, of it widened by the global WIDENING, of it widened by each fit's own bootstrap stretch factor per
    metric (the method before), and of the bootstrap's error interval (``bootstrap.error_interval``, what
    ``gdro predict --bootstrap`` prints; rows written before it have none). Also over the rows against tuned
    GRPO alone: at a short planned run the methods' gains over GRPO at the same lr are often exactly 0 in every
    world, rows that any interval covers."""
    def stats(mine: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"rows": len(mine), "fits": len({(r["world"], r["seed"]) for r in mine})}
        for kind, lo, hi in (("central", lambda r: r["lo"], lambda r: r["hi"]),
                             ("global", lambda r: r["median"] - predict.WIDENING * (r["median"] - r["lo"]),
                              lambda r: r["median"] + predict.WIDENING * (r["hi"] - r["median"])),
                             ("bootstrap", lambda r: r["boot_lo"], lambda r: r["boot_hi"]),
                             ("error", lambda r: r["error_lo"], lambda r: r["error_hi"])):
            if kind == "error" and not all("error_lo" in r for r in mine):
                continue
            tuned = [r for r in mine if r.get("baseline") == "vs_tuned"]
            out[kind] = {"covered": sum(lo(r) <= r["truth"] <= hi(r) for r in mine),
                         "median_width": float(np.median([hi(r) - lo(r) for r in mine])),
                         "tuned_rows": len(tuned), "tuned_covered": sum(lo(r) <= r["truth"] <= hi(r) for r in tuned),
                         "tuned_median_width": float(np.median([hi(r) - lo(r) for r in tuned])) if tuned else math.nan}
            out[kind]["coverage"] = out[kind]["covered"] / len(mine)
        out["factors"] = sorted({round(r["boot_factor"], 3) for r in mine})
        out["sign_right"], out["sign_wrong"] = sum(r["sign_right"] for r in mine), sum(r["sign_wrong"] for r in mine)
        out["clear"] = sum(r["clear"] for r in mine)
        out["seconds_per_fit"] = float(np.median([r["boot_seconds"] for r in mine]))
        return out

    mine = [r for r in rows if "boot_lo" in r]
    worlds = dict.fromkeys(r["world"] for r in mine)
    return {"all": stats(mine), "worlds": {w: stats([r for r in mine if r["world"] == w]) for w in worlds},
            "bootstrap": mine[0]["boot"]} if mine else {}


def per_fit_markdown(comparison: dict[str, Any]) -> str:
    """The docs' table: the global x2.44 widening beside each fit's own bootstrap widening."""
    from studykit.tables import markdown_table

    def row(name: str, s: dict[str, Any]) -> list[str]:
        cells = [name, f"{s['fits']} / {s['rows']}"]
        for kind in kinds:
            cells.append(f"{s[kind]['covered']}/{s['rows']} ({100 * s[kind]['coverage']:.0f}%), "
                         f"{100 * s[kind]['median_width']:.1f} pp"
                         + (f"; vs tuned {s[kind]['tuned_covered']}/{s[kind]['tuned_rows']}, "
                            f"{100 * s[kind]['tuned_median_width']:.1f} pp" if "error" in kinds else ""))
        return cells + ([] if "error" in kinds else [", ".join(f"{f:.2f}" for f in s["factors"])]) + [
            f"{s['sign_right']} right, {s['sign_wrong']} wrong of {s['clear']}"]

    kinds = [k for k in ("central", "global", "bootstrap", "error") if k in comparison["all"]]
    rows = [row(w, s) for w, s in comparison["worlds"].items()] + [row("**all**", comparison["all"])]
    heads = {"central": "central 95%", "global": f"x{predict.WIDENING:g} (global)",
             "bootstrap": f"bootstrap stretch per metric (B = {comparison['bootstrap']})",
             "error": f"bootstrap errors, t x rms (B = {comparison['bootstrap']})"}
    return markdown_table(["world", "fits / rows", *(f"{heads[k]}: covered, median width" for k in kinds)]
                          + ([] if "error" in kinds else ["the fits' factors (per metric)"])
                          + ["verdict's sign where the truth is clear"], rows)


def markdown(summary: dict[str, Any]) -> str:
    from studykit.tables import markdown_table

    def row(name: str, s: dict[str, Any]) -> list[str]:
        return [name, f"{s['covered']}/{s['rows']}", f"{100 * s['coverage']:.0f}% [{100 * s['coverage_lo']:.0f}, "
                f"{100 * s['coverage_hi']:.0f}]", f"{s['sign_right']} right, {s['sign_wrong']} wrong of {s['clear']}",
                f"{100 * s['median_width']:.1f}"]

    rows = [row(w, s) for w, s in summary["worlds"].items()] + [row("**all**", summary["all"])]
    kinds = summary["intervals"]
    return markdown_table(["world", "true gains inside the interval", "coverage [95% CI] (nominal 95%)",
                           "sign named by the verdict, where the truth is clearly non-zero", "median width (pp)"],
                          rows) + (f"\n\nOther intervals on the same drawn worlds: mean ± 1.96 sd covers "
                                   f"{100 * kinds['gaussian']:.0f}%; the central interval widened x"
                                   f"{kinds['widening']:.2f} about the median (the factor that covers 95% of all rows) "
                                   f"covers {100 * kinds['widened_leave_one_world_out']:.0f}% when the factor is "
                                   "chosen on the other worlds (leave one world out).")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulators.calibrate.gain_recovery",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--worlds", default=",".join(GAIN_WORLDS))
    parser.add_argument("--seeds", default="0", help="fit seeds, comma-separated (default 0)")
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--truth-seeds", type=int, default=18)
    parser.add_argument("--steps", type=int, default=100, help="planned run's steps (default 100)")
    parser.add_argument("--batch", type=int, default=32, help="planned run's prompts per step (default 32)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--num-prompts", type=int, default=1600, help="known world's prompts (default 1600)")
    parser.add_argument("--data-steps", type=int, default=60, help="the sweep's steps (default 60)")
    parser.add_argument("--bootstrap", type=int, default=0, metavar="B",
                        help="also each fit's own intervals from B bootstrap worlds (bootstrap.py: the error "
                             "interval and, for comparison, the stretch factor; default 0)")
    parser.add_argument("--summarize-only", action="store_true", help="no fits: summarize OUT/rows.json")
    parser.add_argument("--update-docs", action="store_true", help="put the table into docs/calibration.md")
    args = parser.parse_args(argv)
    words = list(sys.argv[1:] if argv is None else argv)
    made_by = provenance(ENTRY, " ".join(["python -m simulators.calibrate.gain_recovery", *portable(words)]),
                         settings_of(args))  # the code that runs, taken as it starts
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "rows.json"
    rows = json.loads(path.read_text()) if path.is_file() else []  # more worlds or seeds append
    earlier = (json.loads((args.out / "summary.json").read_text()).get("provenance")
               if (args.out / "summary.json").is_file() else None)
    started = time.perf_counter()
    for name in [] if args.summarize_only else args.worlds.split(","):
        for seed in map(int, args.seeds.split(",")):
            rows = [r for r in rows if (r["world"], r["seed"]) != (name, seed)]
            with tempfile.TemporaryDirectory(prefix="gain-recovery-") as work:  # the simulated runs: not kept
                made = recover_gains(name, seed, Path(work), draws=args.draws, truth_seeds=args.truth_seeds,
                                     steps=args.steps, batch=args.batch, workers=args.workers,
                                     num_prompts=args.num_prompts, data_steps=args.data_steps, boot=args.bootstrap)
            rows += [{**row, "code_digest": made_by["code_digest"]} for row in made]  # the code that made it
            path.write_text(json.dumps(rows, indent=1))
            print(f"gain recovery: {name} seed {seed} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr,
                  flush=True)
    rows = [with_error_interval(r) for r in rows]
    summary = summarize_rows(rows)
    if not args.summarize_only:
        summary["command"] = "python -m simulators.calibrate.gain_recovery " + " ".join(portable(words))
    elif (args.out / "summary.json").is_file():
        summary["command"] = json.loads((args.out / "summary.json").read_text()).get("command", "")
    made_by, note = rows_provenance(made_by, earlier, rows)  # rows made earlier: by the earlier code
    summary["provenance"] = made_by
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    if note:
        print(f"gain recovery: note: {args.out}: {note}", file=sys.stderr)
    table = markdown(summary)
    (args.out / "table.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    comparison = per_fit_comparison(rows)
    if comparison:
        (args.out / "per-fit.json").write_text(json.dumps(comparison, indent=1))
        (args.out / "per-fit.md").write_text(per_fit_markdown(comparison) + "\n", encoding="utf-8")
        print(per_fit_markdown(comparison))
    if args.update_docs and comparison:
        from simulators.calibrate.calibration_report import ROOT, update_between

        update_between(ROOT / "docs" / "calibration.md", "per-fit", per_fit_markdown(comparison))
    if args.update_docs:
        from simulators.calibrate.calibration_report import ROOT, update_between

        update_between(ROOT / "docs" / "calibration.md", "gain-recovery", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
