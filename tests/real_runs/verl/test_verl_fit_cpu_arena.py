"""verl 0.9.1's real ``fit()`` on CPU with the arena's controllers: Knapsack-RL plans from the
prompts' own histories and GRESO chooses data.train_batch_size of the loader's data.gen_batch_size
candidates, with the exact budget every step and the compute counts in verl's tracker.

One launch of the CPU launcher (:mod:`real_runs.verl.cpu`, the smoke's setup: 12 recurring toy
prompts, 6 trained x rollout.n 4 per step, 9 candidates per step, 2 FSDP ranks over gloo), 4 steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")

from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs.verl import smoke  # noqa: E402
from verl_helpers import launch  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
STEPS, CANDIDATES = 4, 9
ROWS = smoke.BATCH * smoke.N_BAR


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_fit_arena")
    smoke.prepare(out)
    args = ["-m", "real_runs.verl.cpu", "--audit", str(out / "audit"),
            *smoke.overrides(out, STEPS, save_freq=STEPS, ranks=2), "~gdro.allocator_config.eta",
            "gdro.allocator=knapsack", "gdro.weighter=uniform", "gdro.selector=greso",
            "+gdro.selector_config.p_easy=0.05", "+gdro.selector_config.p_hard=0.05",
            f"+data.gen_batch_size={CANDIDATES}", "trainer.logger=[console,file]"]
    rc, text = launch(args, out / "log.txt", 1200, VERL_FILE_LOGGER_PATH=str(out / "tracker.jsonl"))
    assert rc == 0, f"the launch failed:\n{text[-3000:]}"
    return out


def test_every_step_generates_the_budget_over_train_batch_size_chosen_prompts(fit):
    audits = sorted((fit / "audit").glob("step_*.npz"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(audits) == STEPS
    for path in audits:
        audit = np.load(path)
        plan = dict(zip(audit["plan_ids"].tolist(), audit["plan_counts"].tolist()))
        assert len(plan) == smoke.BATCH and sum(plan.values()) == ROWS and min(plan.values()) >= 2
        assert len(audit["ids"]) == ROWS  # only the chosen candidates were generated


def test_compute_counts_reach_the_run_directory_and_the_tracker(fit):
    run = read_run(fit / "run")
    assert run.steps.tolist() == list(range(1, STEPS + 1))
    np.testing.assert_array_equal(run.scalars["total_rollouts"], ROWS)
    np.testing.assert_array_equal(run.scalars["compute/rollouts_generated"], ROWS)
    tracked = {int(r["step"]): r["data"] for r in map(json.loads, (fit / "tracker.jsonl").read_text().splitlines())}
    for step in range(1, STEPS + 1):
        audit = np.load(fit / "audit" / f"step_{step}.npz")
        scores, uids = audit["scores"], audit["uids"]
        mixed_rows = sum(int((uids == u).sum()) for u in set(uids.tolist()) if np.ptp(scores[uids == u]) > 0)
        assert tracked[step]["gdro/compute/rollouts_trained"] == mixed_rows  # GRESO's DAPO filter
        assert tracked[step]["gdro/compute/rollouts_generated"] == ROWS
    skipped = sum(tracked[s].get("gdro/select/skipped", 0.0) for s in tracked)
    assert skipped > 0  # the known-odds prompts that always / never succeed were skipped before rollout
