"""real_runs.config: presets load and carry the paper's settings; overrides; one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdro_lab import ConfigError
from real_runs import config as C


def test_every_preset_loads_and_round_trips():
    assert set(C.preset_names()) >= {"paper-qwen3-1.7b", "paper-qwen3-4b", "paper-qwen3-8b", "tiny-cpu"}
    for name in C.preset_names():
        cfg = C.load_config(name)
        assert C.config_from_dict(C.config_to_dict(cfg)) == cfg


@pytest.mark.parametrize("size,model", [("1.7b", "Qwen/Qwen3-1.7B-Base"), ("4b", "Qwen/Qwen3-4B-Base"),
                                        ("8b", "Qwen/Qwen3-8B-Base")])
def test_paper_presets_have_the_paper_settings(size, model):
    cfg = C.load_config(f"paper-qwen3-{size}")
    assert cfg.model.name == model
    assert cfg.data.train == "dapo"
    assert (cfg.train.prompts_per_step, cfg.train.steps, cfg.eval.every, cfg.eval.k) == (256, 1000, 50, 8)
    assert (cfg.method.n_bar, cfg.method.n_min, cfg.method.n_max, cfg.method.num_bins) == (4, 2, 12, 10)
    assert (cfg.optim.lr, cfg.loss.kl_coef, cfg.loss.kl_estimator) == (1e-6, 0.001, "k3")
    assert (cfg.loss.clip_low, cfg.loss.clip_high, cfg.loss.adv_clip) == (0.2, 0.28, 5.0)
    assert (cfg.eval.temperature, cfg.eval.top_p, cfg.eval.top_k) == (0.6, 0.8, 20)
    # the paper's pooled validation set, GPQA-Diamond included; the English rows of DAPO-Math-17k
    assert set(cfg.eval.benchmarks) == {"math500", "aime24", "aime25", "amc23", "minerva", "olympiadbench", "gpqa"}
    assert cfg.data.english_only and cfg.rollout.engine == "hf" and cfg.rollout.reward == "math"
    assert cfg.model.gradient_checkpointing and cfg.model.autocast == "auto" and cfg.train.mini_batches == 2


def test_tiny_cpu_says_it_trains_on_the_toy_reward():
    cfg = C.load_config("tiny-cpu")
    assert cfg.rollout.reward == "toy" and cfg.data.limit == 8 and cfg.train.prompts_per_step == 4
    text = (Path(C.__file__).parent / "presets" / "tiny-cpu.toml").read_text()
    assert "TOY reward" in text and "NOT math" in text


def test_methods_map_to_controllers():
    names = {m: C.load_config("tiny-cpu", [f"method.name={m}"]).method.controller_names()[1:]
             for m in ("grpo", "prompt_gdro", "rollout_gdro", "joint")}
    assert names == {"grpo": ("uniform", "uniform"), "prompt_gdro": ("gdro", "uniform"),
                     "rollout_gdro": ("uniform", "gdro"), "joint": ("gdro", "gdro")}
    custom = C.load_config("tiny-cpu", ["method.name=custom", "method.weighter=gdro", "method.allocator=sqrt",
                                        "method.classifier=bayes"])
    assert custom.method.controller_names() == ("bayes", "gdro", "sqrt")
    _, _, allocator = custom.method.controller_configs()
    assert (allocator.n_bar, allocator.n_max) == (4, 8)


@pytest.mark.parametrize("method,override,field,value,own", [
    ("prompt_gdro", "method.weighter_config.ema_beta=0.5", "ema_beta", 0.5, 0.12),
    ("knapsack", "method.allocator_config.objective=\"code\"", "objective", "code", "paper")])
def test_a_users_controller_value_wins_over_the_methods_own(method, override, field, value, own):
    """`gdro train method.name=prompt_gdro method.weighter_config.ema_beta=0.5` trains with EMA beta 0.5, not
    the method's 0.12; knapsack's objective set to 'code' is 'code', not the method's 'paper'. Without the
    override the method's own value is used."""
    family = "weighter" if "weighter" in override else "allocator"
    cfg = C.load_config("tiny-cpu", [f"method.name={method}", override])
    assert getattr(cfg.method.step_configs()[family], field) == value
    plain = C.load_config("tiny-cpu", [f"method.name={method}"])
    assert getattr(plain.method.step_configs()[family], field) == own


def test_every_method_of_the_table_that_needs_no_simulator_truth_is_a_method_name():
    """method.name takes the rows of gdro_lab.methods (one table for the three loops) that run on a
    real model, with their selectors and overrides; the simulator-only ones are one-line errors;
    method.selector=none keeps the method's selector, another replaces it."""
    from gdro_lab.methods import METHODS, real_methods

    for name in real_methods():
        method = C.load_config("tiny-cpu", [f"method.name={name}"]).method
        spec = METHODS[name]
        assert method.method() == spec
        assert method.controller_names()[1:] == (spec.weighter, spec.allocator)
        assert method.step_configs()["selector"] == dict(spec.selector_overrides)
    mean1 = C.load_config("tiny-cpu", ["method.name=prompt_gdro_mean1"]).method.controller_configs()[1]
    assert mean1.weight_mode == "mean1"
    assert C.load_config("tiny-cpu", ["method.name=greso"]).method.method().selector == "greso"
    both = C.load_config("tiny-cpu", ["method.name=greso", "method.selector=dynamic_sampling"]).method.method()
    assert both.selector == "dynamic_sampling"
    for name in ("class_gdro", "sqrt_oracle", "prompt_oracle"):
        with pytest.raises(ConfigError, match=f"method.name='{name}' is invalid: must be one of") as info:
            C.load_config("tiny-cpu", [f"method.name={name}"])
        assert "\n" not in str(info.value)


def test_the_allocators_box_is_the_methods():
    """n_bar, n_min and n_max are set once, under [method]: an allocator_config that sets them
    otherwise is a one-line error at load time (the budget check and the record use the method's)."""
    with pytest.raises(ConfigError, match="allocator_config.n_min=3 is invalid: must be left out"):
        C.load_config("tiny-cpu", ["method.name=rollout_gdro", "method.allocator_config.n_min=3"])
    cfg = C.load_config("tiny-cpu", ["method.name=rollout_gdro", "method.allocator_config.n_min=2"])
    assert cfg.method.controller_configs()[2].n_min == 2


def test_overrides_are_typed_and_nested():
    cfg = C.load_config("tiny-cpu", ["train.steps=3", "optim.lr=2e-5", "loss.agg=seq-mean-token-mean",
                                     "method.weighter_config.eta=0.3", "eval.benchmarks=[\"aime24\"]",
                                     "optim.lr_scale=2"])
    assert (cfg.train.steps, cfg.optim.lr, cfg.loss.agg) == (3, 2e-5, "seq-mean-token-mean")
    assert cfg.method.controller_configs()[1].eta == 0.3
    assert cfg.eval.benchmarks == ("aime24",) and cfg.optim.lr_scale == 2.0


def test_file_extends_a_preset(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('preset = "tiny-cpu"\n[train]\nsteps = 2\n')
    cfg = C.load_config(str(path))
    assert cfg.train.steps == 2 and cfg.model.name == "tiny" and cfg.train.prompts_per_step == 4


@pytest.mark.parametrize("override,needle", [
    ("train.stepz=3", "unknown config key train.stepz"),
    ("trainer.steps=3", "unknown config section [trainer]"),
    ("train.steps=0", "train.steps=0 is invalid"),
    ("loss.clip_low=1.5", "loss.clip_low=1.5 is invalid"),
    ("loss.agg=mean", "loss.agg='mean' is invalid"),
    ("loss.kl_estimator=k4", "loss.kl_estimator='k4' is invalid"),
    ("method.name=dro", "method.name='dro' is invalid"),
    ("method.n_bar=20", "method.n_bar=20 is invalid"),
    ("method.weighter_config.etaa=1", "WeighterConfig has no field(s) etaa"),
    ("method.allocator_config.dual_lr=-1", "AllocatorConfig.dual_lr=-1"),
    ("train.steps=ten", "train.steps='ten' is invalid"),
    ("train.deterministic=1", "train.deterministic=1 is invalid"),
    ("steps=3", "write section.key=value"),
    ("optim.lr=100", "optim.lr=100.0 is invalid: must be a finite number in (0.0, 0.1]"),
    ("train.keep_optimizer_last=-1", "train.keep_optimizer_last=-1 is invalid"),
    ("rollout.reward=verify", "rollout.reward='verify' is invalid: must be one of 'math', 'toy'"),
    ("model.autocast=fp8", "model.autocast='fp8' is invalid"),
    ("rollout.reward_workers=0", "rollout.reward_workers=0 is invalid: must be an integer >= 1, or left out"),
    ("rollout.reward_workers=-2", "rollout.reward_workers=-2 is invalid"),
    ("rollout.reward_workers=1.5", "rollout.reward_workers=1.5 is invalid"),
    ("rollout.reward_workers=true", "rollout.reward_workers=True is invalid"),
    ("rollout.reward_workers=auto", "rollout.reward_workers='auto' is invalid"),
    ("rollout.abort_horizon=-1", "rollout.abort_horizon=-1 is invalid: must be an integer >= 0"),
    ("rollout.abort_horizon=2.5", "rollout.abort_horizon=2.5 is invalid"),
    ("rollout.abort_grace=-3", "rollout.abort_grace=-3 is invalid: must be an integer >= 0"),
    ("rollout.abort_keep_prob=0", "rollout.abort_keep_prob=0.0 is invalid: must be a finite number in (0.0, 1.0]"),
    ("rollout.abort_keep_prob=1.5", "rollout.abort_keep_prob=1.5 is invalid"),
])
def test_bad_values_are_one_line_errors(override, needle):
    with pytest.raises(ConfigError) as info:
        C.load_config("tiny-cpu", [override])
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_early_stopping_is_off_by_default_and_refused_with_vllm():
    cfg = C.load_config("tiny-cpu")
    assert (cfg.rollout.abort_horizon, cfg.rollout.abort_grace, cfg.rollout.abort_keep_prob) == (0, 0, 0.05)
    assert C.load_config("tiny-cpu", ["rollout.engine=vllm", "rollout.abort_grace=5"]).rollout.abort_grace == 5
    with pytest.raises(ConfigError) as info:
        C.load_config("tiny-cpu", ["rollout.engine=vllm", "rollout.abort_horizon=64"])
    assert "rollout.abort_horizon=64 is invalid: must be 0 with engine = 'vllm' (vLLM's offline generate cannot " \
        "stop a request at the check): early stopping needs engine = 'hf'" in str(info.value) and "\n" not in str(info.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="neither a TOML file nor a preset"):
        C.load_config("tiny-gpu")
    with pytest.raises(ConfigError, match="does not exist"):
        C.load_config(str(tmp_path / "nope.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nsteps=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        C.load_config(str(bad))


def test_reward_workers_default_to_one_per_usable_core(monkeypatch):
    """rollout.reward_workers: None (the default) reaches MathReward, which then starts one worker per
    usable core; an integer is passed through; None survives config.json."""
    import json

    from real_runs import train_setup
    from real_runs.rewards import math as R
    cfg = C.load_config("tiny-cpu", ["rollout.reward=math"])
    assert cfg.rollout.reward_workers is None
    assert C.config_from_dict(json.loads(json.dumps(C.config_to_dict(cfg)))).rollout.reward_workers is None
    assert C.load_config("tiny-cpu", ["rollout.reward_workers=3"]).rollout.reward_workers == 3
    pools = []

    class FakePool:
        def __init__(self, task, workers, timeout_s):
            pools.append(workers)

    monkeypatch.setattr(R, "TimedPool", FakePool)
    monkeypatch.setattr(R, "available_cores", lambda: 7)
    train_setup.make_rewards(cfg, None)
    train_setup.make_rewards(C.load_config("tiny-cpu", ["rollout.reward=math", "rollout.reward_workers=3"]), None)
    assert pools == [7, 3]
