"""Contract tests over every registered controller: round trip, determinism, invariants."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gdro_lab.controllers.registry import REGISTRY, build
from gdro_lab.runformat.runlog import decode_state, encode_state

NUM_BINS = 10
BATCH = 64
CONTROLLERS = [(family, name) for family, names in REGISTRY.items() for name in names]


def _config(family: str) -> dict:
    return {} if family in ("classifier", "selector") else {"num_bins": NUM_BINS}


class Loop:
    """A minimal controller loop: the real classifier bins prompts, the tested controller acts."""

    def __init__(self, family: str, name: str, world, seed: int):
        self.family = family
        self.world = world
        self.controller = build(family, name, _config(family), seed=seed)
        # The classifier that bins prompts for weighters/allocators is part of the loop state.
        self.binner = self.controller if family == "classifier" else build("classifier", "window", {}, seed=0)

    def step(self, t: int) -> dict:
        index = self.world.batch(t, BATCH)
        ids = [f"toy:train:{i}" for i in index]
        bins = self.binner.bins(ids)
        out: dict = {"bins": bins.copy()}
        counts = np.full(index.size, 4)
        if self.family == "allocator":
            counts = self.controller.plan(bins, ids)
            out["plan"] = counts.copy()
        if self.family == "selector":
            out["screen"] = self.controller.screen(ids)
        true_var = np.full(NUM_BINS, 0.5)
        feedback = self.world.feedback(t, index, bins, counts, variance_G=true_var)
        metrics = self.controller.update(feedback)
        if self.controller is not self.binner:
            self.binner.update(feedback)
        if self.family == "selector":
            out["accept"] = self.controller.accept(feedback)
        if self.family == "weighter":
            out["multipliers"] = self.controller.multipliers(bins)
            out["weights"] = self.controller.bin_weights()
        out["metrics"] = metrics
        return out

    def state(self) -> dict:
        state = {"controller": self.controller.state_dict(), "binner": self.binner.state_dict()}
        return decode_state(json.loads(json.dumps(encode_state(state))))  # through the on-disk encoding

    def load(self, state: dict) -> None:
        self.controller.load_state_dict(state["controller"])
        if self.binner is not self.controller:
            self.binner.load_state_dict(state["binner"])


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key == "metrics":
            assert a[key].keys() == b[key].keys()
            for m in a[key]:
                np.testing.assert_array_equal(a[key][m], b[key][m], err_msg=m)
        else:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("family,name", CONTROLLERS)
def test_state_round_trip_continues_identically(family, name, toy_world):
    straight = Loop(family, name, toy_world, seed=11)
    for t in range(25):
        straight.step(t)
    saved = straight.state()
    resumed = Loop(family, name, toy_world, seed=999)  # a different seed: the state must carry the RNG
    resumed.load(saved)
    for t in range(25, 45):
        _same(straight.step(t), resumed.step(t))


@pytest.mark.parametrize("family,name", CONTROLLERS)
def test_same_seed_same_output(family, name, toy_world):
    first, second = Loop(family, name, toy_world, seed=5), Loop(family, name, toy_world, seed=5)
    for t in range(30):
        _same(first.step(t), second.step(t))


@pytest.mark.parametrize("family,name", CONTROLLERS)
def test_invariants(family, name, toy_world):
    loop = Loop(family, name, toy_world, seed=3)
    for t in range(40):
        out = loop.step(t)
        bins = out["bins"]
        assert np.all((bins >= -1) & (bins < NUM_BINS))
        if t > 0 and family == "classifier":
            # every prompt observed before is binned; unseen ones are explicitly unassigned
            seen = set()
            for s in range(t):
                seen.update(f"toy:train:{i}" for i in toy_world.batch(s, BATCH))
            ids = [f"toy:train:{i}" for i in toy_world.batch(t, BATCH)]
            expected_seen = np.array([pid in seen for pid in ids])
            np.testing.assert_array_equal(bins >= 0, expected_seen)
        if family == "allocator":
            plan = out["plan"]
            cfg = loop.controller.config
            assert plan.sum() == BATCH * cfg.n_bar
            assert plan.min() >= cfg.n_min and plan.max() <= cfg.n_max
            assert np.all(plan[bins < 0] == cfg.n_bar)
        if family == "selector":
            assert out["screen"].dtype == bool and out["screen"].shape == bins.shape
            assert out["accept"].dtype == bool and out["accept"].shape == bins.shape
        if family == "weighter":
            weights = out["weights"]
            assert np.all(weights >= 0) and np.isclose(weights.sum(), 1.0)
            multipliers = out["multipliers"]
            assert np.all(multipliers > 0)
            assert np.all(multipliers <= loop.controller.config.max_weight + 1e-12)
            assert np.all(multipliers[bins < 0] == 1.0)
        for value in out["metrics"].values():
            assert isinstance(value, float)


LOOP_FIELDS = {"allocator": {"num_bins", "n_min", "n_max", "n_bar"}}


def test_every_family_has_uniform_constructor():
    """cls(config, seed) for every controller; one config class per family, except allocators, whose
    config classes differ (Knapsack-RL's alpha is no Rollout-GDRO field) but all take the fields a
    loop sets (LOOP_FIELDS), so a loop builds any of them the same way."""
    import dataclasses
    for family, names in REGISTRY.items():
        config_classes = {REGISTRY[family][n].config_class for n in names}
        if family in LOOP_FIELDS:
            for cls in config_classes:
                assert LOOP_FIELDS[family] <= {f.name for f in dataclasses.fields(cls)}, cls
        else:
            assert len(config_classes) == 1, f"{family} controllers must share one config class"
        for name in names:
            controller = build(family, name, _config(family), seed=0)
            assert isinstance(controller.rng, np.random.Generator)
            assert callable(controller.update) and callable(controller.state_dict)


@pytest.mark.parametrize("name", list(REGISTRY["allocator"]))
def test_every_allocator_accepts_prompt_ids(name, toy_world):
    """plan(bins_P, prompt_ids=None): the bin-level allocators give the same plan with or without ids."""
    bins = np.array([0, 1, 1, -1, 3, 9, 0, 2])
    ids = [f"toy:train:{i}" for i in range(bins.size)]
    with_ids = build("allocator", name, _config("allocator"), seed=3).plan(bins, ids)
    without = build("allocator", name, _config("allocator"), seed=3).plan(bins)
    np.testing.assert_array_equal(with_ids, without)
    assert with_ids.sum() == bins.size * 4
    with pytest.raises(ValueError, match="prompt_ids"):
        build("allocator", name, _config("allocator"), seed=3).plan(bins, ids[:-1])


def _every_controller() -> list[tuple[str, str, type]]:
    from simulators.simulator_methods import LOCAL_CONTROLLERS

    return [(family, name, cls) for table in (REGISTRY, LOCAL_CONTROLLERS)
            for family, names in table.items() for name, cls in names.items()]


@pytest.mark.parametrize("family,name,cls", _every_controller(), ids=lambda value: getattr(value, "__name__", value))
def test_every_controller_satisfies_its_familys_protocol(family, name, cls):
    """gdro_lab.controllers.protocols: the calls MethodStep makes exist on every registered controller (the core's
    and the simulator's), and each takes the Protocol's arguments (the required ones alone, and all of them)."""
    import inspect

    from gdro_lab.controllers.protocols import PROTOCOLS, ScoredWeighter
    from gdro_lab.controllers.registry import make_config

    protocol = PROTOCOLS[family]
    controller = cls(make_config(cls.config_class, _config(family)), 0)
    assert isinstance(controller, protocol), f"{family} {name!r} ({cls.__name__}) is not a {protocol.__name__}"
    if family == "weighter":
        assert isinstance(controller, ScoredWeighter) and controller.signal == controller.config.signal
    for member in dir(protocol):
        spec = inspect.getattr_static(protocol, member, None)
        if member.startswith("_") or not inspect.isfunction(spec):
            continue
        parameters = list(inspect.signature(spec).parameters.values())[1:]
        required = [p for p in parameters if p.default is inspect.Parameter.empty]
        implemented = inspect.signature(getattr(controller, member))
        implemented.bind(*[object()] * len(required))   # TypeError: it needs more, or other, arguments
        implemented.bind(*[object()] * len(parameters))


def test_a_weighter_without_signal_and_scores_logs_neither(toy_world):
    """MethodStep.record takes the signal and scores only from a ScoredWeighter: a user's weighter with the
    Weighter calls alone logs bins' weights but no signal or score row."""
    from gdro_lab.controllers.prompt_gdro import WeighterConfig
    from gdro_lab.controllers.protocols import ScoredWeighter, Weighter
    from gdro_lab.methods import MethodSpec
    from gdro_lab.step import MethodStep

    class Plain:
        config_class = WeighterConfig

        def __init__(self, config, seed):
            self.config, self.rng = config, np.random.default_rng(seed)

        def bin_weights(self):
            return np.full(self.config.num_bins, 1.0 / self.config.num_bins)

        def multipliers(self, bins_P):
            return np.ones(len(bins_P))

        def update(self, feedback):
            return {}

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    def builder(family, name, config, seed=None, prompts=None):
        return Plain(make_config_(config), seed) if family == "weighter" else build(family, name, config, seed, prompts)

    def make_config_(config):
        from gdro_lab.controllers.registry import make_config
        return config if isinstance(config, WeighterConfig) else make_config(WeighterConfig, config)

    assert isinstance(Plain(WeighterConfig(), 0), Weighter) and not isinstance(Plain(WeighterConfig(), 0), ScoredWeighter)
    step = MethodStep.from_method(MethodSpec("plain", "plain"), 0, builder=builder, n_bar=4, num_bins=3, n_min=2, n_max=8)
    ids = np.array([f"toy:train:{i}" for i in range(16)])
    plan = step.plan(ids)
    success = np.random.default_rng(0).random(int(plan.counts_P.sum())) < 0.5
    feedback, _, _ = step.feedback(plan, 2.0 * success - 1.0, success)
    scalars, rows = step.record(step.observe(feedback))
    assert "weight" in rows and "signal" not in rows and "score" not in rows
