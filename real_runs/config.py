"""`gdro train` configuration: TOML files (stdlib ``tomllib``) -> frozen, validated dataclasses.

A config has one table per section (``[model]``, ``[data]``, ``[rollout]``, ``[method]``,
``[loss]``, ``[optim]``, ``[train]``, ``[eval]``, ``[log]``). ``load_config(name_or_path,
overrides)`` takes a preset name (a TOML file under ``real_runs/presets/``) or a path, applies
``section.key=value`` overrides and returns a :class:`TrainConfig`; an unknown or invalid key is a
one-line :class:`gdro_lab.ConfigError`. ``config_to_dict`` gives the resolved config.json. Methods are
those of gdro_lab.methods that need no simulator truth. Detail: docs/train-notes.md#real_runs-config.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from gdro_lab._validate import ConfigError, require, require_choice, require_int, require_range
from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.methods import MethodSpec, StepConfig, configure, real_methods, resolve_method

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
MAX_LR = 0.1  # AdamW on a language model above this only diverges; the paper uses 1e-6


@dataclass(frozen=True)
class ModelConfig:
    """The policy (and frozen reference) model."""

    name: str = "tiny"
    """Hugging Face id, local folder, or ``tiny`` (a tiny random Qwen3 with a local tokenizer)."""
    dtype: str = "auto"
    """Weights of the trained policy: ``auto`` = fp32 master weights (bf16 autocast on GPU),
    or ``float32``, ``bfloat16``, ``float16`` (pure low-precision weights: lr 1e-6 updates may vanish)."""
    device: str = "auto"
    """``auto`` (cuda when available), ``cpu`` or ``cuda``."""
    autocast: str = "auto"
    """Mixed precision of forward/backward and generation: ``auto`` (bf16 autocast on CUDA, none on
    CPU), ``bf16`` (bf16 autocast on any device, and a bf16 reference model: what ``--rehearse``
    uses on CPU to run the GPU path) or ``off``."""
    attn_implementation: str = "auto"
    """``auto`` (flash_attention_2 when it imports, else sdpa), ``sdpa``, ``eager``, ``flash_attention_2``."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (memory for compute)."""
    compile: bool = False
    """Wrap the policy's forward in ``torch.compile`` (optional; off by default)."""

    def __post_init__(self) -> None:
        require(bool(self.name), "model", "name", self.name, "a model id, folder or 'tiny'")
        require_choice("model", "dtype", self.dtype, ("auto", "float32", "bfloat16", "float16"))
        require_choice("model", "device", self.device, ("auto", "cpu", "cuda"))
        require_choice("model", "autocast", self.autocast, ("auto", "bf16", "off"))
        require_choice("model", "attn_implementation", self.attn_implementation,
                       ("auto", "sdpa", "eager", "flash_attention_2"))


@dataclass(frozen=True)
class DataConfig:
    """Training prompts."""

    train: str = "dapo"
    """A known data set name (``dapo`` = DAPO-Math-17k in the data folder, docs/data.md), a
    .jsonl/.parquet file, or a Hugging Face id (``real_runs.data.load_dataset_records``)."""
    split: str = ""
    """Split for Hugging Face ids and multi-split folders (empty = the loader's default)."""
    limit: int = 0
    """Use only the first ``limit`` records (0 = all)."""
    shuffle: bool = True
    """Visit prompts in a seeded random order per epoch (else file order)."""
    english_only: bool = True
    """Drop rows whose question contains CJK characters (Han, kana, Hangul): the paper trains on
    the English subset of DAPO-Math-17k (17,917 rows -> 14,485 here; the paper says 14.1k).
    Applied before ``limit``; the count is reported at start."""

    def __post_init__(self) -> None:
        require(bool(self.train), "data", "train", self.train, "a data set path or id")
        require_int("data", "limit", self.limit, 0)


@dataclass(frozen=True)
class RolloutConfig:
    """Generation of the training rollouts."""

    engine: str = "hf"
    """Rollout engine by name (``real_runs.engines.make_engine``): ``hf`` or ``vllm``."""
    temperature: float = 1.0
    """Sampling temperature (released scripts: 1.0; the paper's App. A says 0.6)."""
    top_p: float = 1.0
    """Nucleus filter (1.0 = off)."""
    top_k: int = 0
    """Top-k filter (0 = off)."""
    max_new_tokens: int = 4096
    """Response length cap; also the constant divisor of ``seq-mean-token-sum-norm``."""
    max_prompt_tokens: int = 3200
    """Prompts longer than this many tokens are skipped when the data is loaded."""
    reward: str = "math"
    """Training reward: ``math`` (the response's last \\boxed{} against the gold answer, +1 / -1) or
    ``toy`` (tiny-cpu: NOT a task; prompt i succeeds with a known probability p_i, see
    ``real_runs.rewards.toy``, so the difficulty bins spread and the controllers act on a model
    that cannot solve anything). Evaluation always uses the math reward."""
    reward_workers: int | None = None
    """Worker processes of the math reward (math-verify under a hard timeout): an integer >= 1, or
    None (the default; leave the key out, TOML has no null) = one per usable core
    (``real_runs.rewards.math.MathReward``; scoring is CPU-bound)."""
    reward_timeout_s: float = 5.0
    """Hard wall-clock limit to score one response; a timeout scores -1 and is counted."""
    abort_horizon: int = 0
    """DUET's early stopping (``gdro_lab.allocation.duet.marker_gated_abort``; 0 = off; hf engine only): a
    rollout without a complete \\boxed{} by abort_horizon + abort_grace tokens is aborted (no reward, out
    of the loss) unless kept (probability abort_keep_prob, loss x 1 / abort_keep_prob); see docs/train.md."""
    abort_grace: int = 0
    """Tokens a rollout runs on after its \\boxed{} completes (and the grace after the horizon)."""
    abort_keep_prob: float = 0.05
    """Probability that a marker-less rollout at the horizon runs on to EOS (DUET's default)."""

    def __post_init__(self) -> None:
        require_range("rollout", "temperature", self.temperature, 0.0)
        require_range("rollout", "top_p", self.top_p, 0.0, 1.0, lo_open=True)
        require_int("rollout", "top_k", self.top_k, 0)
        require_int("rollout", "max_new_tokens", self.max_new_tokens, 1)
        require_int("rollout", "max_prompt_tokens", self.max_prompt_tokens, 1)
        require_choice("rollout", "reward", self.reward, ("math", "toy"))
        workers = self.reward_workers  # None: one worker per usable core
        require(workers is None or (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1),
                "rollout", "reward_workers", workers, "an integer >= 1, or left out for one worker per usable core")
        require_range("rollout", "reward_timeout_s", self.reward_timeout_s, 0.0, lo_open=True)
        require_int("rollout", "abort_horizon", self.abort_horizon, 0)
        require_int("rollout", "abort_grace", self.abort_grace, 0)
        require_range("rollout", "abort_keep_prob", self.abort_keep_prob, 0.0, 1.0, lo_open=True)
        require(not self.abort_horizon or self.engine == "hf", "rollout", "abort_horizon", self.abort_horizon,
                "0 with engine = 'vllm' (vLLM's offline generate cannot stop a request at the check): early stopping needs engine = 'hf'")


@dataclass(frozen=True)
class MethodConfig:
    """Which controllers run: a method name or explicit registry names, and their configs."""

    name: str = "grpo"
    """A method of gdro_lab.methods that needs no simulator truth (``grpo``, ``prompt_gdro``,
    ``rollout_gdro``, ``joint``, ``knapsack``...) or ``custom`` (set weighter and allocator below)."""
    classifier: str = "window"
    """Difficulty classifier by registry name (``window``, ``bayes``)."""
    weighter: str = ""
    """Prompt weighter by registry name; empty = the method's choice."""
    allocator: str = ""
    """Rollout allocator by registry name; empty = the method's choice."""
    num_bins: int = 10
    """B: difficulty bins (the classifier's edges must give this many)."""
    n_bar: int = 4
    """Mean rollouts per prompt; every step spends exactly prompts_per_step * n_bar."""
    n_min: int = 2
    """Smallest rollout count of an arm."""
    n_max: int = 12
    """Largest rollout count of an arm."""
    classifier_config: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``ClassifierConfig`` fields (e.g. ``window``, ``hysteresis``, ``edges``)."""
    weighter_config: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``WeighterConfig`` fields (e.g. ``eta``, ``max_weight``)."""
    allocator_config: Mapping[str, Any] = field(default_factory=dict)
    """Extra fields of the allocator's config (``AllocatorConfig``: ``dual_lr``, ``planner``...; ``KnapsackConfig``...)."""
    selector: str = "none"
    """Prompt selector by registry name: ``none`` (the method's: none but for ``dynamic_sampling`` and
    ``greso``), ``dynamic_sampling`` (DAPO), ``greso``. Every step still
    generates exactly prompts_per_step * n_bar rollouts (gdro_lab/controllers/selection.py: the equal-compute rule)."""
    selector_config: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``SelectorConfig`` fields (GRESO's p_easy, p_hard, target_zero_variance...)."""

    def __post_init__(self) -> None:
        require_choice("method", "name", self.name, (*real_methods(), "custom"))
        require_choice("method", "classifier", self.classifier, tuple(REGISTRY["classifier"]))
        for family in ("weighter", "allocator"):
            value = getattr(self, family)
            require(value == "" or value in REGISTRY[family], "method", family, value,
                    "empty or one of " + ", ".join(REGISTRY[family]))
            require(self.name != "custom" or value != "", "method", family, value,
                    "set when method.name = 'custom'")
        require_choice("method", "selector", self.selector, tuple(REGISTRY["selector"]))
        require_int("method", "num_bins", self.num_bins, 1)
        require_int("method", "n_min", self.n_min, 2)
        require_int("method", "n_max", self.n_max, self.n_min)
        require_int("method", "n_bar", self.n_bar, self.n_min, self.n_max)
        self.step_config()  # unknown controller keys fail here, at load time

    def method(self) -> MethodSpec:
        """The run's method: the table's ``name`` with the registry names set here replacing its own."""
        return resolve_method(self.name, classifier=self.classifier, weighter=self.weighter, allocator=self.allocator,
                              selector="" if self.selector == "none" else self.selector)

    def controller_names(self) -> tuple[str, str, str]:
        """(classifier, weighter, allocator) registry names after the method's defaults."""
        method = self.method()
        return method.classifier, method.weighter, method.allocator

    def step_config(self) -> StepConfig:
        """The method's resolved configuration (gdro_lab.methods.configure): the run's values, then the
        method's overrides, then ``<family>_config``'s, checked once."""
        names = {"classifier": "method.classifier_config", "weighter": "method.weighter_config",
                 "allocator": "method.allocator_config", "selector": "method.selector_config",
                 **{key: f"method.{key}" for key in ("num_bins", "n_bar", "n_min", "n_max")}}
        user = {"classifier": self.classifier_config, "weighter": self.weighter_config,
                "allocator": self.allocator_config, "selector": self.selector_config}
        return configure(self.method(), num_bins=self.num_bins, n_bar=self.n_bar, n_min=self.n_min, n_max=self.n_max,
                         user=user, names=names)

    def controller_configs(self) -> tuple[Any, Any, Any]:
        """Validated config objects of the classifier, weighter and allocator (:meth:`step_config`)."""
        configs = self.step_config().configs
        return configs["classifier"], configs["weighter"], configs["allocator"]

    def step_configs(self) -> dict[str, Any]:
        """Configs of the four controllers by family, as gdro_lab.step.MethodStep takes them."""
        resolved = self.step_config()
        return {**resolved.configs, "selector": resolved.values["selector"]}


@dataclass(frozen=True)
class LossConfig:
    """The clipped surrogate, KL penalty and aggregation (real_runs.loss)."""

    clip_low: float = 0.2
    """epsilon_low: ratio floor 1 - clip_low (paper App. A: 0.2)."""
    clip_high: float = 0.28
    """epsilon_high: ratio ceiling 1 + clip_high (paper App. A: 0.28, clip-higher)."""
    clip_ratio_c: float = 3.0
    """Dual clip: the loss of a negative-advantage token is capped at -A * c (verl's default 3)."""
    kl_coef: float = 0.001
    """beta_KL of the KL loss to the frozen reference (paper: 0.001; 0 = no reference model)."""
    kl_estimator: str = "k3"
    """``k1`` (log-ratio), ``k2`` (squared / 2) or ``k3`` (low-variance, verl's ``low_var_kl``)."""
    agg: str = "token-mean"
    """Loss aggregation, verl's names: token-mean (DAPO, default), seq-mean-token-mean (Eq. 4-5), ..."""
    adv_clip: float = 5.0
    """GRPO advantages are clipped to +-adv_clip before the Prompt-GDRO multipliers (paper: 5)."""
    adv_std: str = "population"
    """Group std of Eq. 3: ``population`` (paper) or ``bessel`` (verl)."""
    adv_scale: float = 1.0
    """Multiplies every advantage (a step-size knob for step-matched baselines; 1 = off)."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (0 = entropy is only logged)."""

    def __post_init__(self) -> None:
        require_range("loss", "clip_low", self.clip_low, 0.0, 1.0, hi_open=True)
        require_range("loss", "clip_high", self.clip_high, 0.0)
        require_range("loss", "clip_ratio_c", self.clip_ratio_c, 1.0, lo_open=True)
        require_range("loss", "kl_coef", self.kl_coef, 0.0)
        require_choice("loss", "kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        require_choice("loss", "agg", self.agg, AGG_MODES)
        require_range("loss", "adv_clip", self.adv_clip, 0.0, lo_open=True)
        require_choice("loss", "adv_std", self.adv_std, ("population", "bessel"))
        require_range("loss", "adv_scale", self.adv_scale, 0.0, lo_open=True)
        require_range("loss", "entropy_coef", self.entropy_coef, 0.0)


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with linear warm-up then constant learning rate, and gradient clipping."""

    lr: float = 1e-6
    """Peak learning rate (paper: 1e-6)."""
    lr_scale: float = 1.0
    """Multiplies lr (step-matched baselines scale the step size without touching lr)."""
    warmup_steps: int = 0
    """Optimizer steps of linear warm-up from 0 to lr."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay (verl's default 0.01)."""
    beta1: float = 0.9
    """AdamW beta1."""
    beta2: float = 0.999
    """AdamW beta2."""
    eps: float = 1e-8
    """AdamW epsilon."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this (0 = off); the norm is logged either way."""

    def __post_init__(self) -> None:
        require_range("optim", "lr", self.lr, 0.0, MAX_LR, lo_open=True)
        require_range("optim", "lr_scale", self.lr_scale, 0.0, lo_open=True)
        require_int("optim", "warmup_steps", self.warmup_steps, 0)
        require_range("optim", "weight_decay", self.weight_decay, 0.0)
        require_range("optim", "beta1", self.beta1, 0.0, 1.0, hi_open=True)
        require_range("optim", "beta2", self.beta2, 0.0, 1.0, hi_open=True)
        require_range("optim", "eps", self.eps, 0.0, lo_open=True)
        require_range("optim", "grad_clip", self.grad_clip, 0.0)


@dataclass(frozen=True)
class TrainLoopConfig:
    """Steps, batch shape, PPO epochs, checkpoints, determinism."""

    steps: int = 1000
    """Training steps (paper: 1,000)."""
    prompts_per_step: int = 256
    """P: prompts per step (paper: 256); rollouts per step are exactly P * n_bar."""
    mini_batches: int = 2
    """Optimizer steps per PPO epoch: the step's prompts split into this many mini-batches."""
    ppo_epochs: int = 1
    """Passes over the step's rollouts."""
    micro_batch_tokens: int = 16384
    """Token budget of one forward/backward micro-batch (padded prompt + response tokens)."""
    seed: int = 0
    """Seed of everything: data order, controllers, sampling, model init of ``tiny``."""
    save_every: int = 50
    """Checkpoint every this many steps (and at the end); 0 = only at the end."""
    keep_last: int = 2
    """Checkpoints kept (older ones are deleted after a newer one is complete)."""
    keep_best: bool = True
    """Also keep the checkpoint of the best evaluation so far (pooled mean@k; the paper reports each
    method's peak): a step whose evaluation is a new best is saved even off ``save_every`` and is never
    pruned. Needs ``eval.every`` > 0 to do anything."""
    keep_optimizer_last: int = 0
    """Only the newest this many checkpoints keep ``optimizer.pt`` (AdamW's two fp32 moments, twice
    the model's size); older kept ones hold the model only (evaluable, exportable, not resumable).
    0 = every kept checkpoint keeps it."""
    deterministic: bool = False
    """``torch.use_deterministic_algorithms(True)`` (CPU tests of exact resume)."""
    out: str = "runs"
    """Folder that holds the run directory."""
    run_name: str = ""
    """Run directory name (empty = ``{method}-{model}-{seed}``)."""
    progress: bool = True
    """Show a progress bar (tqdm) on stderr."""

    def __post_init__(self) -> None:
        require_int("train", "steps", self.steps, 1)
        require_int("train", "prompts_per_step", self.prompts_per_step, 1)
        require_int("train", "mini_batches", self.mini_batches, 1, self.prompts_per_step)
        require_int("train", "ppo_epochs", self.ppo_epochs, 1)
        require_int("train", "micro_batch_tokens", self.micro_batch_tokens, 1)
        require_int("train", "seed", self.seed, 0)
        require_int("train", "save_every", self.save_every, 0)
        require_int("train", "keep_last", self.keep_last, 1)
        require_int("train", "keep_optimizer_last", self.keep_optimizer_last, 0)
        require(bool(self.out), "train", "out", self.out, "a folder")
        require("/" not in self.run_name, "train", "run_name", self.run_name, "a name without '/'")


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation (``real_runs.eval_scoring.evaluate``; metrics go to eval.jsonl)."""

    every: int = 50
    """Evaluate every this many steps and at the end (0 = never)."""
    benchmarks: tuple[str, ...] = ("math500", "aime24", "aime25", "amc23", "minerva", "olympiadbench", "gpqa")
    """Benchmark names known to ``real_runs.data`` (the paper's pooled validation set; ``gpqa`` =
    GPQA-Diamond, scored as multiple choice by ``ChoiceReward``)."""
    limit: int = 0
    """First ``limit`` problems of each benchmark (0 = all)."""
    k: int = 8
    """Samples per problem for mean@k and pass@k (paper: 8)."""
    temperature: float = 0.6
    """Validation sampling (paper §3: 0.6, top-p 0.8, top-k 20)."""
    top_p: float = 0.8
    """Validation nucleus filter."""
    top_k: int = 20
    """Validation top-k filter."""
    max_new_tokens: int = 4096
    """Validation response length cap."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
        require_int("eval", "every", self.every, 0)
        require(all(isinstance(b, str) and b for b in self.benchmarks), "eval", "benchmarks",
                self.benchmarks, "a list of benchmark names")
        require_int("eval", "limit", self.limit, 0)
        require_int("eval", "k", self.k, 1)
        require_range("eval", "temperature", self.temperature, 0.0)
        require_range("eval", "top_p", self.top_p, 0.0, 1.0, lo_open=True)
        require_int("eval", "top_k", self.top_k, 0)
        require_int("eval", "max_new_tokens", self.max_new_tokens, 1)


@dataclass(frozen=True)
class LogConfig:
    """Optional metric sinks besides steps.jsonl (real_runs.sinks)."""

    tensorboard: bool = False
    """Write TensorBoard events to RUN_DIR/tensorboard (torch.utils.tensorboard)."""
    wandb: bool = False
    """Log to Weights & Biases in offline mode (RUN_DIR/wandb; sync later with ``wandb sync``)."""
    wandb_project: str = "gdro-lab"
    """W&B project name."""


@dataclass(frozen=True)
class TrainConfig:
    """The whole resolved configuration of one training run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def __post_init__(self) -> None:
        require(self.train.mini_batches <= self.train.prompts_per_step, "train", "mini_batches",
                self.train.mini_batches, "at most train.prompts_per_step")


SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(TrainConfig)}  # type: ignore[misc]
_MAPPING_FIELDS = {"classifier_config", "weighter_config", "allocator_config"}


def _check_type(section: str, key: str, value: Any, default: Any) -> Any:
    if key in _MAPPING_FIELDS:
        require(isinstance(value, Mapping), section, key, value, "a table of controller fields")
        return dict(value)
    if isinstance(default, bool):
        require(isinstance(value, bool), section, key, value, "true or false")
    elif isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    elif isinstance(default, (int, float)):
        require(isinstance(value, type(default)) and not isinstance(value, bool), section, key, value,
                f"a{'n integer' if isinstance(default, int) else ' number'}")
    elif isinstance(default, str):
        require(isinstance(value, str), section, key, value, "a string")
    elif isinstance(default, tuple):
        require(isinstance(value, (list, tuple)), section, key, value, "a list")
        return tuple(value)
    return value


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """Build a TrainConfig from nested mappings; unknown names and bad values are ConfigErrors."""
    sections = {}
    for name, table in values.items():
        if name not in SECTIONS:
            raise ConfigError(f"unknown config section [{name}]: {_hint(name, SECTIONS)}allowed are "
                              f"{', '.join(SECTIONS)}")
        require(isinstance(table, Mapping), name, "", table, "a table of keys")
        cls = SECTIONS[name]
        defaults = cls()
        known = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ConfigError(f"unknown config key {name}.{unknown[0]}: {_hint(unknown[0], known, name + '.')}"
                              f"[{name}] allows {', '.join(known)}")
        sections[name] = cls(**{k: _check_type(name, k, v, known[k]) for k, v in table.items()})
    return TrainConfig(**sections)


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """Nested plain dict of a config (what config.json stores; round-trips through config_from_dict)."""
    out = {}
    for section in dataclasses.fields(cfg):
        value = getattr(cfg, section.name)
        out[section.name] = {f.name: (dict(v) if isinstance(v := getattr(value, f.name), Mapping) else
                                      list(v) if isinstance(v, tuple) else v)
                             for f in dataclasses.fields(value)}
    return out


def _hint(name: str, known: Sequence[str] | Mapping[str, Any], prefix: str = "") -> str:
    """``"did you mean 'x'? "`` for the known name closest to ``name`` (``prefix`` before it), or ``""``."""
    from studykit.args import closest
    close = closest(name, list(known), 1)
    return f"did you mean {prefix + close[0]!r}? " if close else ""


def preset_names() -> list[str]:
    """Names of the shipped presets (TOML files under real_runs/presets/)."""
    folder = resources.files("real_runs") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def _read_toml(name_or_path: str) -> dict[str, Any]:
    path = Path(name_or_path)
    if path.suffix != ".toml" and not path.exists():
        preset = resources.files("real_runs") / "presets" / f"{name_or_path}.toml"
        if not preset.is_file():
            raise ConfigError(f"config {name_or_path!r} is neither a TOML file nor a preset: "
                              f"{_hint(name_or_path, preset_names())}presets are {', '.join(preset_names())}")
        text = preset.read_text(encoding="utf-8")
    elif path.is_dir():
        raise ConfigError(f"config {path} is a folder, not a TOML file: pass a TOML file or a preset name "
                          "(to continue a run: gdro train --resume RUN_DIR)")
    elif not path.is_file():
        raise ConfigError(f"config file {path} does not exist: pass a TOML file or a preset name")
    else:
        text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config {name_or_path} is not valid TOML ({err})") from None
    base = data.pop("preset", None)
    if base is not None:
        parent = _read_toml(str(base))
        for section, table in data.items():
            merged = dict(parent.get(section, {})) if isinstance(table, Mapping) else {}
            parent[section] = {**merged, **table} if isinstance(table, Mapping) else table
        data = parent
    return data


def parse_override(text: str) -> tuple[str, str, Any]:
    """``section.key=value`` -> (section, key, value); the value is read as TOML, else a string."""
    name, sep, raw = text.partition("=")
    section, dot, key = name.strip().partition(".")
    if not sep or not dot or not key:
        raise ConfigError(f"override {text!r} is invalid: write section.key=value, e.g. train.steps=10")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    if "." in key:  # method.weighter_config.eta=0.5
        key, _, sub = key.partition(".")
        value = {sub: value}
    return section, key, value


def load_config(name_or_path: str, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a preset or TOML file, apply ``section.key=value`` overrides, validate."""
    data = _read_toml(name_or_path)
    for text in overrides:
        section, key, value = parse_override(text)
        table = data.setdefault(section, {})
        if isinstance(value, dict) and isinstance(table.get(key), Mapping):
            value = {**table[key], **value}
        table[key] = value
    return config_from_dict(data)


def replace(cfg: TrainConfig, **sections: Mapping[str, Any]) -> TrainConfig:
    """A copy of ``cfg`` with some keys changed: ``replace(cfg, train={"steps": 3})``."""
    values = config_to_dict(cfg)
    for name, table in sections.items():
        values.setdefault(name, {}).update(table)
    return config_from_dict(values)
