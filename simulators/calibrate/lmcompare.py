"""Close the loop on the CPU LM study: predict its outcome in the world calibrated to it, compare with
what the study measured.

    python -m simulators.calibrate.lmcompare --calibration CAL_DIR --study reports/lm-study/summary.json \\
        --out reports/calibration/lm-study --update-docs

CAL_DIR is ``gdro calibrate``'s output for the LM study (``gdro study lm --calibration-data``). The
prediction runs ``predict.run_all`` at the study's design, read from its ``summary.json``; the measured
side is the study's per-seed final held-out metrics in that file, paired by seed (mean ± Student-t 95%).
"Consistent" when the interval of measured − predicted median contains 0. The metrics paired and the
interval's half-width: docs/calibration-notes.md#simulators-calibrate-lmcompare.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gdro_lab import ConfigError
from simulators.calibrate import predict
from simulators.calibrate.posterior import side_towards
from studykit.stats import mean_ci
from studykit.tables import markdown_table, write_json

PAIRS = (("test/accuracy", "pass@1"), ("test/pass@8", "pass@8"))
#: The study's run labels -> the prediction's (step-matched GRPO under the study's own definition).
STUDY_METHODS = {"grpo_matched": "grpo_matched_c1", "grpo_matched_first": "grpo_matched_c1",
                 "grpo_matched_second": "grpo_matched_c2", "prompt_gdro": "prompt_gdro", "rollout_gdro": "rollout_gdro",
                 "joint": "joint"}


def measured(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Paired (by seed) gains over GRPO (and over tuned GRPO when the study tuned it) per study method and metric,
    and GRPO's gain over the warm start."""
    final = summary["final"]
    tuned = (summary.get("tuned_grpo") or {}).get("final", {})
    out: dict[str, dict[str, Any]] = {}
    for method, predicted_label in STUDY_METHODS.items():
        if method in final:
            out[predicted_label] = {m: _ci(np.array(final[method][m]) - np.array(final["grpo"][m])) for _, m in PAIRS}
            out[predicted_label]["vs_tuned"] = {m: _ci(np.array(final[method][m]) - np.array(tuned[m]))
                                                for _, m in PAIRS if m in tuned}
    start = summary.get("initial", {})
    out["grpo_vs_start"] = {m: _ci(np.array(final["grpo"][m]) - np.array(start[m])) for _, m in PAIRS if m in start}
    return out


def _ci(values: np.ndarray) -> tuple[float, float]:
    mean, half = mean_ci(np.asarray(values, float))
    return float(mean), float(half)


def study_settings(summary: dict[str, Any], draws: int, seeds: int, workers: int, out: Path) -> predict.Settings:
    config = summary.get("config")
    if not isinstance(config, dict) or "steps" not in config:
        raise ConfigError("the study's summary.json has no config: regenerate it with gdro study lm --report-only")
    return predict.Settings(draws=draws, seeds=seeds, steps=int(config["steps"]), batch=int(config["prompts_per_step"]),
                            lr_scale=1.0, optimizer="adam", workers=workers, out=out, n_bar=int(config["n_bar"]),
                            n_min=int(config["n_min"]), n_max=int(config["n_max"]))


def comparison_rows(predicted: dict[str, Any], observed: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (comparison, metric): predicted and measured gain with intervals, the error and its interval."""
    rows = []
    cases: list[tuple[str, str, str]] = [("grpo_vs_start", "", "GRPO − warm start")]
    cases += [(k, "vs_grpo", f"{predict.LABELS[k]} − GRPO") for k in predict.LABELS if k in observed]
    cases += [(k, "vs_tuned", f"{predict.LABELS[k]} − tuned GRPO") for k in predict.LABELS
              if k in observed and observed[k].get("vs_tuned")]
    for label, baseline, name in cases:
        for world_metric, study_metric in PAIRS:
            if label == "grpo_vs_start":
                entry = predicted["grpo_vs_start"].get(world_metric)
                meas = observed[label].get(study_metric, (math.nan, math.nan))
            else:
                entry = predicted["methods"][label][world_metric][baseline]
                source = observed[label]["vs_tuned"] if baseline == "vs_tuned" else observed[label]
                meas = source.get(study_metric, (math.nan, math.nan))
            pred = (entry["median"], entry["wide_lo"], entry["wide_hi"]) if entry else (math.nan,) * 3
            error = meas[0] - pred[0]
            side = side_towards(meas[0], *pred)  # the predicted interval's half towards the measurement
            half = math.hypot(np.nan_to_num(side), np.nan_to_num(meas[1]))
            rows.append({"comparison": name, "metric": study_metric, "predicted": pred, "measured": meas,
                         "error": (error, half), "consistent": bool(abs(error) <= half)})
    return rows


def _pp(entry: Sequence[float]) -> str:
    """'mean ± half' (two numbers) or 'median [lo, hi]' (three), in pp."""
    if not math.isfinite(entry[0]):
        return "n/a"
    if len(entry) == 3:
        return f"{100 * entry[0]:+.1f} [{100 * entry[1]:+.1f}, {100 * entry[2]:+.1f}]"
    return f"{100 * entry[0]:+.1f} ± {100 * entry[1]:.1f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    return markdown_table(["comparison", "metric (held-out)", "predicted (pp)", "measured (pp)",
                           "error = measured − predicted (pp)", "consistent?"],
                          [[r["comparison"], r["metric"], _pp(r["predicted"]), _pp(r["measured"]), _pp(r["error"]),
                            "yes" if r["consistent"] else "**no**"] for r in rows])


def write_report(args: argparse.Namespace, settings: predict.Settings, rows: list[dict[str, Any]], table: str,
                 seconds: float) -> None:
    """report.md: what was predicted from what, the table, the prediction error, how to read it."""
    errors = np.array([abs(r["error"][0]) for r in rows if math.isfinite(r["error"][0])])
    gdro = [r for r in rows if r["comparison"].startswith(("Prompt", "Rollout", "joint"))]
    lines = ["# The CPU LM study: predicted vs measured", "",
             f"Prediction: `python -m simulators.calibrate.lmcompare --calibration {args.calibration} --study {args.study} "
             f"--out {args.out} --draws {settings.draws} --seeds {settings.seeds}` ({seconds:.0f} s): the world calibrated "
             f"to the study's seed-0 warm start and {_sweep_words(args.calibration)} ([fit report]({_relative(args)})), "
             f"{settings.draws} worlds drawn from the fit x {settings.seeds} seeds, at the study's design "
             f"({settings.steps} steps x {settings.batch} prompts, n̄ = {settings.n_bar} in [{settings.n_min}, "
             f"{settings.n_max}], every method at the study's lr, optimizer adam). Measured: the study's per-seed "
             f"final held-out metrics in `{args.study}`, paired by seed (mean ± Student-t 95%).", "", table, "",
             f"Prediction error (|measured − predicted|, all rows): mean {100 * errors.mean():.1f} pp, largest "
             f"{100 * errors.max():.1f} pp; {sum(r['consistent'] for r in rows)}/{len(rows)} rows consistent "
             f"(the error's interval, sqrt(h_pred² + h_meas²), contains 0); GDRO rows: "
             f"{sum(r['consistent'] for r in gdro)}/{len(gdro)}.", "",
             "How to read it: 'consistent' is a weak statement when both intervals are wide (a 3-seed study resolves "
             "about ±1-2 pp); the GRPO − warm start rows test the calibrated dynamics themselves (how much GRPO "
             "learns in 200 steps), the other rows the methods' differences. Step-matched GRPO scales advantages by "
             "a constant, which Adam cancels: the world predicts it equal to GRPO. World metric ↔ study metric: "
             "held-out accuracy ↔ pass@1 (mean@8), held-out pass@8 ↔ pass@8; the world's held-out prompts are sibling "
             "prompts of every group (heldout_split = prompts), like the study's test halves."]
    (args.out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _sweep_words(calibration: Path) -> str:
    """'a 4-lr x 60-step GRPO sweep' from the fit record (what the calibration actually saw)."""
    dyn = (predict.load(calibration).fit or {}).get("dynamics") or {}
    if not dyn:
        return "no GRPO sweep (difficulty only)"
    return f"a {len(dyn['lrs'])}-lr x {dyn['steps']}-step GRPO sweep (lr {', '.join(f'{x:g}' for x in dyn['lrs'])})"


def _relative(args: argparse.Namespace) -> str:
    import os

    return os.path.relpath(Path(args.calibration) / "report.md", args.out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulators.calibrate.lmcompare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibration", type=Path, required=True, help="gdro calibrate's output folder")
    parser.add_argument("--study", type=Path, required=True, help="the LM study's summary.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--update-docs", action="store_true",
                        help="also put the table into docs/calibrate-predict.md and docs/calibration.md (between their markers)")
    parser.add_argument("--work", type=Path, help="folder for the simulated runs (default: a temporary folder; they "
                                                  "are not part of the report)")
    args = parser.parse_args(argv)
    from studykit.provenance import portable, provenance, settings_of
    words = portable(list(sys.argv[1:] if argv is None else argv), drop=("--work",))  # --work: scratch runs
    made_by = provenance(["simulators.calibrate.lmcompare"], " ".join(["python -m simulators.calibrate.lmcompare",
                         *words]), settings_of(args, drop=("out", "work")))  # the code that runs, taken as it starts
    try:
        summary = json.loads(args.study.read_text(encoding="utf-8"))
        cal = predict.load(args.calibration)
        import tempfile
        work = args.work or Path(tempfile.mkdtemp(prefix="lmcompare-"))
        settings = study_settings(summary, min(args.draws, cal.draw_count), args.seeds, args.workers, work)
        from simulators.reporting import prepare_output
        prepare_output(settings.out)
        started = time.perf_counter()
        # the study's held-out halves are sibling problems of every skill: the world's "prompts" split
        predicted = predict.predict(cal, settings, extra={"heldout_split": "prompts"})
        seconds = time.perf_counter() - started
    except (ConfigError, OSError, KeyError, json.JSONDecodeError) as err:
        print(f"lmcompare: error: {err}", file=sys.stderr)
        return 2
    rows = comparison_rows(predicted, measured(summary))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "comparison.json", {"rows": rows, "predicted": predicted, "seconds": seconds,
                                              "study": str(args.study), "calibration": str(args.calibration),
                                              "provenance": made_by})
    table = markdown(rows)
    (args.out / "table.md").write_text(table + "\n", encoding="utf-8")
    write_report(args, settings, rows, table, seconds)
    if args.update_docs:
        from simulators.calibrate.calibration_report import ROOT, update_between

        try:
            for doc in (ROOT / "docs" / "calibrate-predict.md", ROOT / "docs" / "calibration.md"):
                update_between(doc, "lm-study", table)
        except ConfigError as err:
            print(f"lmcompare: error: {err}", file=sys.stderr)
            return 2
    print(table)
    print(f"{sum(r['consistent'] for r in rows)}/{len(rows)} predictions consistent with the measurement ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
