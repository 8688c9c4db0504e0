"""Knobs (--set, TOML), user methods from a plug-in module, and the decision's verdicts."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gdro_lab import ConfigError
from gdro_lab.registry import REGISTRY
from simulators import cli, knobs
from simulators.loop import SimConfig
from simulators.methods import METHODS
from simulators.studies.baselines import best_lr, verdict


def test_assignments_parse_toml_values_and_apply_where_they_belong() -> None:
    o = knobs.parse_assignments(["world.transfer=0.25", "prompt_gdro.eta=0.4", "prompt_gdro.weight_mode=mean1",
                                 "rollout_gdro.eta=0.1", "run.lr_scale=2", "classifier.hysteresis=0"])
    assert o == {"world": {"transfer": 0.25}, "prompt_gdro": {"eta": 0.4, "weight_mode": "mean1"},
                 "rollout_gdro": {"eta": 0.1}, "run": {"lr_scale": 2}, "classifier": {"hysteresis": 0}}
    knobs.validate(o)
    prompt = knobs.apply(SimConfig(method="prompt_gdro"), o)
    assert prompt.world.transfer == 0.25 and prompt.lr_scale == 2
    assert prompt.weighter["eta"] == 0.4 and "eta" not in prompt.allocator
    grpo = knobs.apply(SimConfig(method="grpo"), o)  # uniform weighter: Prompt-GDRO knobs do not apply
    assert dict(grpo.weighter) == {} and dict(grpo.allocator) == {} and grpo.world.transfer == 0.25
    joint = knobs.apply(SimConfig(method="joint"), o)
    assert joint.controller_configs()["allocator"]["eta"] == 0.1


@pytest.mark.parametrize("items, needle", [
    (["world.trasnfer=1"], "no field 'trasnfer'"),
    (["universe.x=1"], "NAMESPACE.FIELD"),
    (["world.transfer=abc"], "transfer"),
    (["world.transfer=2"], "transfer"),
    (["prompt_gdro.weight_mode=sideways"], "weight_mode"),
    (["run.lr_scale=0"], "lr_scale"),
    (["nothing"], "KEY=VALUE"),
])
def test_bad_knobs_are_one_line_errors(items: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        knobs.validate(knobs.parse_assignments(items))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "k.toml"
    path.write_text("[world]\ntransfer = 0.7\n[prompt_gdro]\neta = 0.3\n", encoding="utf-8")
    assert knobs.load_toml(path) == {"world": {"transfer": 0.7}, "prompt_gdro": {"eta": 0.3}}
    path.write_text("transfer = 0.7\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a table"):
        knobs.load_toml(path)
    path.write_text("[world\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        knobs.load_toml(path)
    with pytest.raises(ConfigError, match="no such file"):
        knobs.load_toml(tmp_path / "missing.toml")


PLUGIN = textwrap.dedent('''
    """A user's own weighter: Prompt-GDRO with a fixed double weight on the hardest bin."""
    import numpy as np
    from gdro_lab.prompt_gdro import UniformWeighter
    from gdro_lab.registry import REGISTRY
    from simulators.methods import MethodSpec, register_method

    class HardBinWeighter(UniformWeighter):
        def multipliers(self, bins_P):
            return np.where(np.asarray(bins_P) == 0, 2.0, 1.0)

    REGISTRY["weighter"]["hard_bin_x2"] = HardBinWeighter
    register_method(MethodSpec("hard_bin", "hard bin x2", weighter="hard_bin_x2", summary="doubles bin 0"))
''')


def test_plugin_registers_a_user_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "my_methods_plugin.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        out = tmp_path / "cur"
        code = cli.main(["curriculum", "--plugin", "my_methods_plugin", "--methods", "grpo,hard_bin", "--out",
                         str(out), "--steps", "30", "--seeds", "2", "--prompts", "400", "--batch", "32",
                         "--lr-grid", "1", "--no-progress"])
        stdout = capsys.readouterr().out
        assert code == 0 and "hard bin x2" in stdout
        assert (out / "runs" / "hard_bin" / "lr1" / "seed1").is_dir()
    finally:
        METHODS.pop("hard_bin", None)
        REGISTRY["weighter"].pop("hard_bin_x2", None)
        sys.modules.pop("my_methods_plugin", None)


def test_register_method_refuses_unknown_controllers() -> None:
    from simulators.methods import MethodSpec, register_method
    with pytest.raises(ConfigError, match="unknown weighter"):
        register_method(MethodSpec("x", "x", weighter="nope"))
    with pytest.raises(ConfigError, match="already exists"):
        register_method(MethodSpec("grpo", "again"))


@pytest.mark.parametrize("mean, half, sign, expected", [
    (2.0, 1.0, 1, "reproduced"), (-2.0, 1.0, 1, "refuted"), (0.5, 1.0, 1, "inconclusive"),
    (-2.0, 1.0, -1, "reproduced"), (1.0, float("nan"), 1, "inconclusive"),
])
def test_verdicts(mean: float, half: float, sign: int, expected: str) -> None:
    assert verdict(mean, half, sign) == expected


class _Run:
    def __init__(self, val: float):
        self.evals = {"val/accuracy": np.array([0.0, val])}


def test_best_lr_uses_the_val_split_seed_mean() -> None:
    grid = {("m", 0.5): [_Run(0.4), _Run(0.5)], ("m", 1.0): [_Run(0.6), _Run(0.2)], ("m", 2.0): [_Run(0.3), _Run(0.3)],
            ("g", 1.0): [_Run(0.9), _Run(0.9)]}
    assert best_lr(grid, "m", "test/accuracy") == 0.5  # means 0.45, 0.40, 0.30
