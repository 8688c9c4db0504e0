"""The plan's loop on known worlds (simulators/calibrate/plan_loop.py): per world, fit, take the extra sweep
`gdro calibrate --plan` recommends, run it in the true world, refit, and compare the achieved spread and
verdict with the promise. Writes OUT/rows.json, OUT/table.md and OUT/summary.json (the provenance: the code
that made the rows, :mod:`studykit.provenance`); --update-docs puts the table into docs/calibration.md between
the markers named after OUT's folder (``plan-loop``, ``plan-loop-320``).

    python scripts/plan_loop.py --out reports/calibration/plan-loop-320 --worlds middle,hard,cheap,noisy,costly
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence


#: The module whose import closure is the loop's code.
ENTRY = ["simulators.calibrate.plan_loop"]


def main(argv: Sequence[str] | None = None) -> int:
    from simulators.calibrate import plan_loop
    from studykit.provenance import portable, provenance, rows_provenance, settings_of

    parser = argparse.ArgumentParser(prog="python scripts/plan_loop.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--worlds", default="middle,hard,cheap,noisy", help="known worlds (gain_recovery.GAIN_WORLDS)")
    parser.add_argument("--seeds", default="0", help="fit seeds, comma-separated (default 0)")
    parser.add_argument("--num-prompts", type=int, default=320)
    parser.add_argument("--data-steps", type=int, default=12, help="the sweep's steps (default 12)")
    parser.add_argument("--steps", type=int, default=20, help="the predicted run's steps (default 20)")
    parser.add_argument("--draws", type=int, default=8, help="posterior draws (default 8)")
    parser.add_argument("--truth-seeds", type=int, default=8)
    parser.add_argument("--groups", type=int, default=5, help="the known world's groups (default 5)")
    parser.add_argument("--lrs", default="0.25,0.5,1,2,4", help="the sweep's lrs (default 0.25,0.5,1,2,4)")
    parser.add_argument("--data-batch", type=int, default=64, help="the sweep's prompts per step (default 64)")
    parser.add_argument("--pilot", type=int, default=48, help="stage 2's pilot fits (default 48)")
    parser.add_argument("--update-docs", action="store_true")
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(words)
    command = " ".join(["python scripts/plan_loop.py", *portable(words)])
    made_by = provenance(ENTRY, command, settings_of(args, drop=("out", "update_docs")))  # as the loop starts
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "rows.json"
    rows = json.loads(path.read_text()) if path.is_file() else []  # more worlds or seeds append
    earlier = (json.loads((args.out / "summary.json").read_text()).get("provenance")
               if (args.out / "summary.json").is_file() else None)
    started = time.perf_counter()
    for name in args.worlds.split(","):
        for seed in map(int, args.seeds.split(",")):
            with tempfile.TemporaryDirectory(prefix="plan-loop-") as work:
                row = plan_loop.close_loop(name, seed, Path(work), num_prompts=args.num_prompts,
                                           data_steps=args.data_steps, steps=args.steps, draws=args.draws,
                                           boots=args.draws, truth_seeds=args.truth_seeds, num_groups=args.groups,
                                           lrs=tuple(map(float, args.lrs.split(","))), data_batch=args.data_batch,
                                           pilot=args.pilot)
            row["code_digest"] = made_by["code_digest"]  # the code that made it
            rows = [r for r in rows if (r["world"], r["seed"]) != (name, seed)] + [row]
            path.write_text(json.dumps(rows, indent=1))
            print(f"plan loop: {name} seed {seed} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr,
                  flush=True)
    block, note = rows_provenance(made_by, earlier, rows)  # rows made earlier: by the earlier code
    summary = {"worlds": sorted({r["world"] for r in rows}), "rows": len(rows), "provenance": block}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if note:
        print(f"plan loop: note: {args.out}: {note}", file=sys.stderr)
    table = plan_loop.markdown(rows)
    (args.out / "table.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    if args.update_docs:
        from simulators.calibrate.calibration_report import ROOT, update_between

        update_between(ROOT / "docs" / "calibration.md", args.out.resolve().name, table)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
