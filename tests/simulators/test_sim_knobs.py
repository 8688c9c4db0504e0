"""Knobs (--set, TOML), user methods from a plug-in module, and the decision's verdicts."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gdro_lab import ConfigError
from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.methods import METHODS
from simulators import cli, knobs
from simulators.simulator_config import SimConfig
from simulators.studies.tuning import best_lr


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
    from gdro_lab.controllers.prompt_gdro import UniformWeighter
    from gdro_lab.controllers.registry import REGISTRY
    from gdro_lab.methods import MethodSpec, register_method

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


def test_a_user_method_names_a_simulator_reference_through_the_one_registration() -> None:
    """There is one register_method (gdro_lab's): the simulator's references are known to it only when the
    simulator's own controllers are passed, as simulators.simulator_methods does for its methods."""
    import simulators.simulator_methods as simulator_methods
    from gdro_lab.methods import MethodSpec, register_method
    assert not hasattr(simulator_methods, "register_method")
    spec = MethodSpec("my_oracle", "my oracle", allocator="prompt_oracle", loop="simulator")
    with pytest.raises(ConfigError, match="unknown allocator 'prompt_oracle'"):
        register_method(spec)
    try:
        assert register_method(spec, controllers=simulator_methods.LOCAL_CONTROLLERS) is METHODS["my_oracle"]
        assert "my_oracle" in simulator_methods.method_names()
    finally:
        METHODS.pop("my_oracle", None)


class _Run:
    def __init__(self, val: float):
        self.evals = {"val/accuracy": np.array([0.0, val])}


def test_best_lr_uses_the_val_split_seed_mean() -> None:
    grid = {("m", 0.5): [_Run(0.4), _Run(0.5)], ("m", 1.0): [_Run(0.6), _Run(0.2)], ("m", 2.0): [_Run(0.3), _Run(0.3)],
            ("g", 1.0): [_Run(0.9), _Run(0.9)]}
    assert best_lr(grid, "m", "test/accuracy") == 0.5  # means 0.45, 0.40, 0.30


def test_presets_set_the_world_and_name_the_report(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from simulators.presets import PRESETS
    from simulators.studies import curriculum_study
    seen = {}
    monkeypatch.setattr(curriculum_study, "run", lambda settings: seen.setdefault("s", settings) and Path("x/report.md"))
    assert cli.main(["--preset", "paper-1.7b", "--set", "world.transfer=0.1"]) == 0
    s = seen["s"]
    assert s.overrides["world"] == {**PRESETS["paper-1.7b"], "transfer": 0.1}
    assert s.out == Path("gdro-runs") / "curriculum-paper-1.7b" and s.preset == "paper-1.7b"
    assert cli.main(["--preset", "paper-9b"]) == 2
    assert "paper-1.7b, paper-4b, paper-8b" in capsys.readouterr().err


def test_preset_mass_profiles_are_ordered() -> None:
    """1.7b leaves the most never-solved prompts and 8b the fewest, before any training."""
    from simulators.learner import Learner
    from simulators.presets import PRESETS
    from simulators.world import WorldConfig, make_world
    hopeless = []
    for name in ("paper-1.7b", "paper-4b", "paper-8b"):
        cfg = WorldConfig(num_prompts=2000, num_groups=16, **PRESETS[name])
        p = Learner(cfg, make_world(cfg, np.random.default_rng(0))).success_prob()
        hopeless.append(np.mean(p < 0.05))
    assert hopeless[0] > 0.3 and hopeless[0] > hopeless[1] > hopeless[2]


def test_se_dispersion_table_matches_the_closed_form() -> None:
    """Two bins, one at sigma ~ 0 with share f: the optimum gives it n_min = 2 and the other bin the rest,
    n = (4 - 2 f) / (1 - f) capped at 12, so the reduction is 1 - 2 / sqrt(n) (WSE ~ (1 - f) / sqrt(n))."""
    from simulators.studies.se_dispersion import best_reduction as _best_reduction
    from simulators.studies.se_dispersion import dispersion_table
    for f in (0.25, 0.5, 0.6):
        n = min((4 - 2 * f) / (1 - f), 12)
        assert _best_reduction(f, 1e6, 4, 2, 12) == pytest.approx(100 * (1 - 2 / np.sqrt(n)), abs=0.05)
    data, _ = dispersion_table(targets=(22.6,))
    share = data[0]["zero_variance_share"]
    assert _best_reduction(share, 1e6, 4, 2, 12) == pytest.approx(22.6, abs=0.05)
    assert not np.isfinite(data[0]["sigma_ratio_equal_shares"])  # at 50/50 the box caps it at 1 - 2/sqrt(6)


def test_sweep_runs_every_cell_and_reports_paired_gains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from simulators import knob_sweep
    out = tmp_path / "sw"
    code = knob_sweep.main(["--grid", "world.transfer=0,1", "--methods", "grpo,prompt_gdro", "--seeds", "2", "--steps",
                       "20", "--prompts", "400", "--batch", "32", "--out", str(out), "--no-progress"])
    stdout = capsys.readouterr().out
    assert code == 0 and stdout.count("world.transfer=") == 4
    import json
    summary = json.loads((out / "summary.json").read_text())
    assert [c["cell"] for c in summary["cells"]] == [{"world.transfer": 0}, {"world.transfer": 1}]
    gain = summary["cells"][0]["methods"]["grpo"]["test/accuracy"]["gain_vs_grpo"]
    assert gain[0] == 0.0
    report = (out / "report.md").read_text()
    assert "Reproduce: `gdro sweep --grid world.transfer=0,1 --methods grpo,prompt_gdro --seeds 2 --steps 20 " \
           "--prompts 400 --batch 32`" in report
    assert knob_sweep.main(["--grid", "world.nope=1"]) == 2
    assert "no field 'nope'" in capsys.readouterr().err


def test_sweep_update_reports_copies_its_report_under_the_given_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from simulators import cli, knob_sweep
    reports = tmp_path / "repo_reports"
    monkeypatch.setattr(cli, "repository_reports", lambda: reports)
    args = ["--grid", "world.transfer=0,1", "--methods", "grpo", "--seeds", "2", "--steps", "10", "--prompts",
            "200", "--batch", "16", "--no-progress"]
    assert knob_sweep.main([*args, "--out", str(tmp_path / "a"), "--update-reports", "../x"]) == 2
    assert "a report name" in capsys.readouterr().err and not (tmp_path / "a").exists()
    # a study's own report is the study's: a sweep never replaces reports/curriculum
    assert knob_sweep.main([*args, "--out", str(tmp_path / "c"), "--update-reports", "curriculum"]) == 2
    assert "that is a study's report" in capsys.readouterr().err and not (tmp_path / "c").exists()
    # the same names as gdro simulate's (one check): a '.' inside a name is a name
    assert cli.checked_report_name("sweep-paper-1.7b", "gdro sweep") == "sweep-paper-1.7b"
    assert knob_sweep.main([*args, "--out", str(tmp_path / "b"), "--update-reports", "sweep-transfer"]) == 0
    assert f"updated: {(reports / 'sweep-transfer' / 'report.md').resolve()}" in capsys.readouterr().out
    summary = json.loads((reports / "sweep-transfer" / "summary.json").read_text())
    assert summary["provenance"]["command"] == " ".join(["gdro sweep", *args[:-1], "--update-reports", "sweep-transfer"]), \
        "the machine's --out and progress switch left out"
    assert "update_reports" not in summary["provenance"]["settings"]
