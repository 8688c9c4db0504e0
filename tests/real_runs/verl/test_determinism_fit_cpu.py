"""verl 0.9.1's real fit() on CPU with full determinism and the plugin's per-request seeds.

One launch of the CPU launcher (2 FSDP2 ranks over gloo, the ``hf_cpu`` rollout, the smoke's toy
setup, 2 steps) with ``rollout.full_determinism=true`` and
``agent_loop_manager_class=real_runs.verl.seeding.SeededAgentLoopManager``, the combination the
launcher accepts for vLLM: verl builds our manager, its workers put a seed into every request, the
server samples with them, and the rollouts of every group differ. The same launch runs the
shared-filesystem check for real on its one-node Ray. Runtime: one launch, about 1-2 minutes of CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from real_runs.verl import seeding, smoke  # noqa: E402
from verl_helpers import launch  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
STEPS = 2


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_fit_seeded")
    smoke.prepare(out)
    args = ["-m", "real_runs.verl.cpu", "--audit", str(out / "audit"),
            *smoke.overrides(out, STEPS, save_freq=-1, ranks=2),
            "actor_rollout_ref.rollout.full_determinism=true",
            f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={seeding.MANAGER}"]
    rc, text = launch(args, out / "log.txt", 900)
    assert rc == 0, text[-3000:]
    return {"out": out, "log": text}


def test_the_requests_carry_the_plugins_seeds(fit):
    assert "hf_cpu: replica 0 samples with the requests' own seeds" in fit["log"]


def test_every_groups_rollouts_differ(fit):
    for step in range(1, STEPS + 1):
        audit = dict(np.load(fit["out"] / "audit" / f"step_{step}.npz"))
        responses = [tuple(r[m > 0]) for r, m in zip(audit["responses"], audit["response_mask"])]
        uids = audit["uids"].tolist()
        for uid in set(uids):
            group = [r for r, u in zip(responses, uids) if u == uid]
            assert len(group) >= 2 and len(set(group)) == len(group), f"step {step}: a group repeats a rollout"


def test_the_shared_filesystem_check_ran_on_the_one_node(fit):
    out = fit["out"]
    assert (f"shared filesystem: all 1 node(s) see trainer.default_local_dir={out / 'ckpt'}, "
            f"gdro.run_dir={out / 'run'}") in fit["log"]
