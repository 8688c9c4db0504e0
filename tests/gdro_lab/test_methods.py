"""gdro_lab.methods.configure, the one configuration step of every loop: the loop's values, then the
method's overrides, then the user's (the user's wins), the box and the bins checked once; and the three
loops (the simulator, gdro train, the verl plugin) resolve the same method to the same configs."""

from __future__ import annotations

import dataclasses

import pytest

from gdro_lab import ConfigError, PromptIndex
from gdro_lab.methods import configure, even_edges, get_method
from gdro_lab.step import MethodStep


def test_user_value_wins_over_the_methods_override() -> None:
    """prompt_gdro overrides ema_beta to 0.12; the user's 0.3 wins, the loop's num_bins sits underneath."""
    spec = get_method("prompt_gdro")
    plain = configure(spec, num_bins=4, n_bar=4, n_min=2, n_max=8)
    assert plain.configs["weighter"].ema_beta == 0.12 and plain.configs["weighter"].share_normalize is True
    user = configure(spec, num_bins=4, n_bar=4, n_min=2, n_max=8, user={"weighter": {"ema_beta": 0.3}})
    assert user.configs["weighter"].ema_beta == 0.3 and user.configs["weighter"].share_normalize is True
    assert user.values["weighter"] == {"num_bins": 4, "ema_beta": 0.3, "share_normalize": True}


def test_derives_edges_k_and_bins_once() -> None:
    """Evenly spaced edges for num_bins (one class less with exclude_extremes), k = min(2, n_min), the bins
    of weighter and allocator; without num_bins the classifier's edges set the bins."""
    resolved = configure(get_method("joint"), num_bins=5, n_bar=4, n_min=2, n_max=8)
    assert resolved.configs["classifier"].edges == (0.2, 0.4, 0.6, 0.8) == even_edges(5)
    assert resolved.configs["classifier"].k == 2 and resolved.num_bins == 5
    assert resolved.configs["weighter"].num_bins == resolved.configs["allocator"].num_bins == 5
    assert (resolved.n_bar, resolved.n_min, resolved.n_max) == (4, 2, 8)
    extremes = configure(get_method("joint"), num_bins=4, n_bar=4, n_min=2, n_max=8,
                         user={"classifier": {"exclude_extremes": True}})
    assert extremes.configs["classifier"].edges == even_edges(3) == (0.3333333333, 0.6666666667)
    assert extremes.num_bins == 4
    free = configure(get_method("joint"), n_bar=4, user={"classifier": {"edges": [0.3, 0.7]}})
    assert free.num_bins == 3 and free.configs["allocator"].num_bins == 3 and free.configs["classifier"].k == 2


@pytest.mark.parametrize(("user", "message"), [
    ({"allocator": {"n_bar": 6}}, r"allocator\.n_bar=6 is invalid: must be left out \(it differs from n_bar=4"),
    ({"allocator": {"n_min": 3}}, r"allocator\.n_min=3 is invalid: must be left out"),
    ({"weighter": {"num_bins": 3}}, r"weighter\.num_bins=3 is invalid: must be left out"),
    ({"classifier": {"edges": [0.5]}}, r"classifier\.edges=\[0\.5\] is invalid: must be 3 edges for num_bins = 4"),
])
def test_a_restated_box_or_bin_count_is_one_line(user: dict, message: str) -> None:
    """The box and the bins are the loop's: a user value that restates one differently is refused once,
    here; the same value restated is accepted."""
    spec = get_method("rollout_gdro")
    with pytest.raises(ConfigError, match=message):
        configure(spec, num_bins=4, n_bar=4, n_min=2, n_max=8, user=user)
    same = configure(spec, num_bins=4, n_bar=4, n_min=2, n_max=8, user={"allocator": {"n_bar": 4, "n_min": 2}})
    assert same.configs["allocator"].n_bar == 4


def test_messages_use_the_loops_names() -> None:
    with pytest.raises(ConfigError, match=r"^method\.allocator_config\.n_max=9 is invalid: must be left out "
                                          r"\(it differs from method\.n_max=8, which sets it\)$"):
        configure(get_method("rollout_gdro"), num_bins=4, n_bar=4, n_min=2, n_max=8,
                  user={"allocator": {"n_max": 9}},
                  names={"allocator": "method.allocator_config", "n_max": "method.n_max"})


def test_from_method_builds_the_resolved_step() -> None:
    step = MethodStep.from_method(get_method("joint"), 0, PromptIndex(), num_bins=4, n_bar=4, n_min=2, n_max=8,
                                  user={"weighter": {"ema_beta": 0.5}})
    assert step.weighter.config.ema_beta == 0.5 and step.num_bins == 4 and (step.n_bar, step.n_max) == (4, 8)


def test_the_simulator_and_gdro_train_resolve_a_method_alike() -> None:
    """The same method, box, bins and user overrides give the same configs in the simulator and in gdro train."""
    pytest.importorskip("scipy")
    from real_runs.config import MethodConfig
    from simulators.simulator_config import SimConfig

    for name in ("prompt_gdro", "rollout_gdro", "joint", "knapsack", "greso"):
        sim = SimConfig(method=name, num_bins=5, n_bar=4, n_min=2, n_max=8, weighter={"eta": 0.3})
        real = MethodConfig(name=name, num_bins=5, n_bar=4, n_min=2, n_max=8, weighter_config={"eta": 0.3})
        assert sim.step_config().configs == real.step_config().configs, name
        assert dataclasses.asdict(sim.step_config().configs["weighter"])["eta"] == 0.3


def test_the_verl_plugin_takes_a_method_from_the_table() -> None:
    """gdro.method=<name> builds the table's method (its overrides included); a family set away from its
    default replaces the method's; without gdro.method the named controllers run as before (no overrides)."""
    pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs this)")
    from real_runs.verl import VerlPluginError
    from real_runs.verl.controller import GDROController, GDROSettings

    edges = {"classifier_config": {"edges": [0.3, 0.7]}}
    prompt = GDROController(GDROSettings.from_mapping({"method": "prompt_gdro_mean1", **edges}), 4)
    assert (prompt.method_step.method.weighter, prompt.method_step.method.allocator) == ("gdro", "uniform")
    assert prompt.weighter.config.weight_mode == "mean1" and prompt.allocator.config.n_bar == 4
    mixed = GDROSettings.from_mapping({"method": "rollout_gdro", "selector": "greso", **edges}).method_spec()
    assert (mixed.weighter, mixed.allocator, mixed.selector) == ("uniform", "gdro", "greso")
    plain = GDROController(GDROSettings.from_mapping(edges), 4)
    assert plain.method_step.method.name == "custom" and plain.weighter.config.weight_mode == "paper"
    user = GDROController(GDROSettings.from_mapping({"method": "prompt_gdro_mean1",
                                                     "weighter_config": {"weight_mode": "paper"}, **edges}), 4)
    assert user.weighter.config.weight_mode == "paper"
    with pytest.raises(VerlPluginError, match="gdro.method='prompt_oracle' is unknown here"):
        GDROSettings.from_mapping({"method": "prompt_oracle"})
    with pytest.raises(ConfigError, match=r"gdro\.allocator_config\.n_bar=6 is invalid: must be left out \(it "
                                          r"differs from actor_rollout_ref\.rollout\.n=4"):
        GDROController(GDROSettings.from_mapping({"allocator_config": {"n_bar": 6}, **edges}), 4)


def test_the_launch_config_takes_gdro_method_as_a_plain_override(tmp_path) -> None:
    """verl's Hydra config has the ``gdro.method`` key (so ``gdro.method=prompt_gdro`` needs no ``+``), and the
    launch's controller runs the method's controllers."""
    pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs this)")
    from real_runs.verl.cpu import compose
    from real_runs.verl.trainer import controller_from_config

    config = compose(["gdro.method=rollout_gdro", "actor_rollout_ref.rollout.n=4"])
    controller = controller_from_config(config)
    assert (controller.method_step.method.weighter, controller.method_step.method.allocator) == ("uniform", "gdro")
