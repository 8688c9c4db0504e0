"""gdro train's checkpoint and snapshot of the method go through MethodStep.state_dict / load_state_dict
(real_runs.train_setup.saved_state, state_slots), in the layout written before: one entry per controller
family, the selector only when the method has one."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from gdro_lab import PromptIndex  # noqa: E402
from gdro_lab.methods import get_method  # noqa: E402
from gdro_lab.runformat.runlog import decode_state, encode_state  # noqa: E402
from gdro_lab.step import MethodStep  # noqa: E402
from real_runs.train_setup import saved_state, state_slots  # noqa: E402


def stepped(name: str, steps: int) -> MethodStep:
    step = MethodStep.from_method(get_method(name), 3, PromptIndex(f"p{i}" for i in range(40)), num_bins=4, n_bar=4,
                                  n_min=2, n_max=8)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        plan = step.plan(step.choose(rng.choice(40, 8, replace=False), lambda k: rng.choice(40, k), lambda ids: ids))
        successes = rng.random(int(plan.counts_P.sum())) < 0.5
        feedback, _, _ = step.feedback(plan, np.where(successes, 1.0, -1.0), successes)
        assert feedback is not None
        step.observe(feedback)
    return step


@pytest.mark.parametrize(("name", "families"), [("joint", ["allocator", "classifier", "weighter"]),
                                                ("greso", ["allocator", "classifier", "selector", "weighter"])])
def test_a_checkpoint_round_trip_goes_through_the_method_steps_state(name: str, families: list[str]) -> None:
    """The entries a checkpoint writes (each slot's state_dict, as real_runs.checkpoint calls them) are
    MethodStep.state_dict's, less a selector-less method's selector; loading them through the slots and
    MethodStep.load_state_dict into a fresh step restores it exactly (its next steps equal the original's)."""
    original = stepped(name, 5)
    states = saved_state(original)
    written = json.dumps(encode_state({family: slot.state_dict() for family, slot in state_slots(states, states).items()}))
    assert sorted(json.loads(written)) == families
    fresh = stepped(name, 0)
    loaded: dict = {}
    for family, slot in state_slots(loaded, saved_state(fresh)).items():
        slot.load_state_dict(decode_state(json.loads(written))[family])
    fresh.load_state_dict(loaded)
    assert json.dumps(encode_state(saved_state(fresh))) == written
