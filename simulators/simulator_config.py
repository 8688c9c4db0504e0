"""SimConfig: one simulated training run (method, seed, budget, evaluation, the world, controller
overrides), validated, with its resolved controller configs. ``simulators.loop`` runs it."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from gdro_lab._validate import require, require_int, require_range
from gdro_lab.methods import StepConfig, configure, get_method
from simulators.simulator_methods import GROUP_METHODS, LOCAL_CONTROLLERS, method_names  # registers the simulator's
from simulators.world import WorldConfig


#: Values of SimConfig.match: "" (not a derived baseline) or the moment a step-matched run matches
#: ("selector_step": the arena's GRPO with a selector's shared and group steps, simulators/studies/allocation_arena.py).
MATCHES = ("", "first_moment", "second_moment", "selector_step")


@dataclass(frozen=True)
class SimConfig:
    """One simulated training run."""

    method: str = "joint"
    """A method of gdro_lab.methods.METHODS, the simulator's own (simulators.simulator_methods) included."""
    seed: int = 0
    """Seeds the world instance, the batch order, the rollouts and every controller."""
    steps: int = 1000
    """Training steps."""
    batch: int = 256
    """Prompts per step."""
    num_bins: int = 10
    """Difficulty bins of the classifier (evenly spaced pass@k edges)."""
    n_bar: int = 4
    """Mean rollouts per prompt (every method spends exactly batch * n_bar per step)."""
    n_min: int = 2
    """Smallest rollout count an allocator may choose."""
    n_max: int = 12
    """Largest rollout count an allocator may choose."""
    eval_every: int = 20
    """Steps between exact evaluations (also at step 0 and the last step)."""
    snapshot_every: int = 0
    """Steps between controller snapshots (and one at the last step); 0 = only at the last step; -1 = never."""
    pass_k: int = 8
    """k of the exact pass@k evaluation."""
    lr_scale: float = 1.0
    """Multiplies all three learning rates of the learner (the tuned and step-matched baselines vary it)."""
    matched_to: str = ""
    """A derived baseline's method (step-matched GRPO: the method whose multipliers set its lr_scale); "" for
    any other run. config.json carries it (top level, for the app's run names) only when set."""
    match: str = ""
    """With ``matched_to``: which moment of the method's multipliers was matched, "first_moment" (E[m]) or
    "second_moment" (sqrt E[m^2]; studykit.stepmatch); "" otherwise."""
    log_every: int = 1
    """Steps between step records in steps.jsonl (and the last step); larger = less bookkeeping."""
    ppo_minibatches: int = 1
    """PPO mini-batches per step for the surrogate-loss signal's drift (simulators/ppo_drift.py); 1 = none."""
    ppo_clip: float = 0.2
    """PPO clip epsilon of that surrogate loss."""
    abort_horizon: int = 0
    """DUET's early stopping (gdro_lab.allocation.duet.marker_gated_abort), on when > 0 (needs world.lengths):
    a rollout still running at abort_horizon + abort_grace tokens (its answer, which ends it, not yet written)
    is aborted there, out of the controllers' feedback and the update, unless kept (probability
    abort_keep_prob, its update term x 1 / abort_keep_prob). config.json carries the three only when on."""
    abort_grace: int = 0
    """Grace tokens after the horizon (and after the answer marker)."""
    abort_keep_prob: float = 0.05
    """Probability that a marker-less rollout at the check runs to its end (importance weight 1 / it)."""
    world: WorldConfig = field(default_factory=WorldConfig)
    """The world and learner."""
    classifier: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of gdro_lab ClassifierConfig (edges come from num_bins; with exclude_extremes the last of the
    num_bins bins is the extremes' class and the edges split [0, 1] into num_bins - 1)."""
    weighter: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of gdro_lab WeighterConfig on top of the method's."""
    allocator: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the allocator's config (gdro_lab AllocatorConfig, KnapsackConfig, ...) on top of the method's."""
    selector: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of gdro_lab SelectorConfig on top of the method's."""

    def __post_init__(self) -> None:
        owner = "SimConfig"
        get_method(self.method, method_names())
        for name in ("steps", "batch", "num_bins", "pass_k"):
            value = getattr(self, name)
            require(isinstance(value, int) and value >= 1, owner, name, value, "an integer >= 1")
        require(self.num_bins >= 2, owner, "num_bins", self.num_bins, "an integer >= 2")
        require(isinstance(self.eval_every, int) and self.eval_every >= 1, owner, "eval_every",
                self.eval_every, "an integer >= 1")
        require(isinstance(self.log_every, int) and self.log_every >= 1, owner, "log_every",
                self.log_every, "an integer >= 1")
        require(isinstance(self.ppo_minibatches, int) and self.ppo_minibatches >= 1, owner, "ppo_minibatches",
                self.ppo_minibatches, "an integer >= 1")
        require(isinstance(self.ppo_clip, (int, float)) and 0 < self.ppo_clip < 1, owner, "ppo_clip",
                self.ppo_clip, "a number in (0, 1)")
        require(isinstance(self.lr_scale, (int, float)) and 0 < self.lr_scale <= 1000, owner, "lr_scale",
                self.lr_scale, "a number in (0, 1000]")
        require(isinstance(self.snapshot_every, int) and self.snapshot_every >= -1, owner, "snapshot_every",
                self.snapshot_every, "an integer >= -1 (0 = only at the end, -1 = never)")
        require(self.match in MATCHES, owner, "match", self.match, "one of " + ", ".join(map(repr, MATCHES)))
        require(isinstance(self.matched_to, str), owner, "matched_to", self.matched_to, "a method name or \"\"")
        if self.matched_to:
            get_method(self.matched_to, method_names())
        require(bool(self.match) == bool(self.matched_to), owner, "matched_to", self.matched_to,
                "a method name exactly when `match` is set (a step-matched baseline)")
        require_int(owner, "abort_horizon", self.abort_horizon, 0)
        require_int(owner, "abort_grace", self.abort_grace, 0)
        require_range(owner, "abort_keep_prob", self.abort_keep_prob, 0.0, 1.0, lo_open=True)
        require(not self.abort_horizon or self.world.lengths, owner, "abort_horizon", self.abort_horizon,
                "0 unless world.lengths = true (early stopping cuts rollouts by their tokens)")
        require(self.batch <= self.world.num_prompts, owner, "batch", self.batch,
                f"at most the number of prompts ({self.world.num_prompts})")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["world"] = self.world.to_dict()
        for name in ("classifier", "weighter", "allocator", "selector"):
            out[name] = dict(getattr(self, name))
        for name in ("matched_to", "match"):
            if not out[name]:
                del out[name]  # only derived baselines carry the marker (the app names them by it)
        if not self.abort_horizon:
            for name in ("abort_horizon", "abort_grace", "abort_keep_prob"):
                del out[name]  # runs without early stopping keep their config (and digests) as before
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "SimConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in known}
        if "world" in kwargs:
            kwargs["world"] = WorldConfig(**kwargs["world"])
        return cls(**kwargs)

    def step_config(self) -> StepConfig:
        """The method's resolved configuration (gdro_lab.methods.configure: the run's values, then the
        method's, then this config's controller overrides); class_gdro's weighter on the world's latent groups."""
        spec = get_method(self.method)
        groups = {"weighter": {"num_bins": self.world.num_groups}} if self.method in GROUP_METHODS else {}
        return configure(spec, num_bins=self.num_bins, n_bar=self.n_bar, n_min=self.n_min, n_max=self.n_max,
                         user={family: getattr(self, family) for family in ("classifier", "weighter", "allocator",
                                                                              "selector")},
                         base=groups, controllers=LOCAL_CONTROLLERS)

    def controller_configs(self) -> dict[str, dict[str, Any]]:
        """Resolved config mappings of the four controllers (:meth:`step_config`'s values)."""
        return self.step_config().values
