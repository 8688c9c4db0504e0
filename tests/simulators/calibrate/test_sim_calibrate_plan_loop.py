"""The plan's loop at toy size: the plan's pick runs in the true world, the refit sees the old and new runs,
and the row compares the promise with what the refit achieved (scripts/plan_loop.py writes the table)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scriptload import load_file

from simulators.calibrate import plan_loop
from simulators.calibrate.observe import Sweep, SweepRun

ROOT = Path(__file__).resolve().parents[3]


def test_merged_sweep_pads_the_shorter_runs() -> None:
    def run(lr: float, steps: int) -> SweepRun:
        return SweepRun(lr, np.full(steps, lr), np.array([steps]), np.zeros((1, 2)), np.zeros((1, 2)), f"lr{lr}")

    old = Sweep([run(1.0, 4), run(2.0, 4)], ("a", "b"), 8, 4, 4, "rollout")
    both = plan_loop.merged(old, Sweep([run(8.0, 8)], ("a", "b"), 8, 4, 8, "rollout"))
    assert both.steps == 8 and both.lrs.tolist() == [1.0, 2.0, 8.0]
    assert np.array_equal(both.runs[0].success_T[:4], [1.0] * 4) and np.isnan(both.runs[0].success_T[4:]).all()
    assert np.array_equal(both.runs[2].success_T, [8.0] * 8)


@pytest.mark.slow
def test_plan_loop_driver_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny world through scripts/plan_loop.py's close_loop: the row's pick is one of the plan's candidates, the
    promise starts from the fit's own spread, and the refit ran on the old sweep plus the picked runs."""
    seen = {}
    original = plan_loop._fit_and_predict

    def spy(sample, sweep, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        seen.setdefault("lrs", []).append(sweep.lrs.tolist())
        return original(sample, sweep, *args, **kwargs)

    monkeypatch.setattr(plan_loop, "_fit_and_predict", spy)
    script = load_file(ROOT / "scripts" / "plan_loop.py", "plan_loop_script")
    monkeypatch.setattr(plan_loop, "close_loop", _tiny(plan_loop.close_loop))
    assert script.main(["--out", str(tmp_path), "--worlds", "middle", "--draws", "3", "--truth-seeds", "2",
                        "--steps", "6"]) == 0
    (row,) = json.loads((tmp_path / "rows.json").read_text())
    assert row["world"] == "middle" and row["pick"] in row["candidates"]
    assert seen["lrs"][0] == [0.5, 1.0, 2.0] and seen["lrs"][1] == [0.5, 1.0, 2.0, *row["lrs"]]
    assert row["promised_sd_before"] == pytest.approx(row["before"]["sd"])
    assert row["promised_sd_after"] <= row["promised_sd_before"] + 1e-12
    assert np.isfinite(row["after"]["sd"]) and np.isfinite(row["truth"])
    assert "| middle (seed 0) |" in (tmp_path / "table.md").read_text()
    from studykit.provenance import code_digest, freshness
    block = json.loads((tmp_path / "summary.json").read_text())["provenance"]
    assert block["entry"] == ["simulators.calibrate.plan_loop"] and row["code_digest"] == block["code_digest"] \
        == code_digest(block["entry"])["code_digest"], "the report records the code that made its rows"
    assert block["command"] == ("python scripts/plan_loop.py --out OUT --worlds middle --draws 3 --truth-seeds 2 "
                                "--steps 6"), "rerunnable: a temporary --out written OUT"
    assert freshness(tmp_path / "summary.json") is None


def _tiny(close_loop):  # noqa: ANN001, ANN202
    def tiny(name, seed, out, **kwargs):  # noqa: ANN001, ANN003, ANN202
        kwargs.update(num_prompts=160, num_groups=2, lrs=(0.5, 1.0, 2.0), data_batch=16, data_steps=12, pilot=8,
                      boots=6, seeds=1)  # one seed per predicted world: the checks are structural
        return close_loop(name, seed, out, **kwargs)

    return tiny
