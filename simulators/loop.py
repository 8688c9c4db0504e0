"""The simulator's training loop: one (method, seed) run written as a gdro run directory.

Each step follows docs/architecture.md: choose, plan, Bernoulli rollouts (with ``world.lengths``, their
token counts from a stream of their own), observe (the method's
gdro_lab.step.MethodStep), a learner step on the kept groups, record. Exact evaluations go to eval.jsonl
every ``eval_every`` steps, snapshots every ``snapshot_every`` steps, so ``resume_simulation`` continues
bit-identically. Config: ``simulators.simulator_config``. Departure from the paper: the oracle allocator plans the
next batch with the current batch's true variances, since it knows v, not the next batch's bins.
The step in full: docs/simulator-notes.md#simulators-loop.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from gdro_lab import ConfigError, MethodStep, PromptIndex, RunWriter
from gdro_lab.allocation import duet
from gdro_lab.allocation.prompt_oracle import oracle_plan, prompt_se_report
from gdro_lab.functional import diagnostics as diag
from gdro_lab.methods import get_method
from gdro_lab.runformat.runlog import load_snapshot
from gdro_lab.step import Outcome
from simulators.learner import Learner
from simulators.ppo_drift import surrogate_losses
from simulators.simulator_config import SimConfig
from simulators.simulator_methods import GROUP_METHODS, build_controller
from simulators.world import BatchSampler, make_world, sample_lengths, sample_rollouts

PRODUCER = "gdro-lab simulator"


@dataclasses.dataclass(frozen=True)
class EarlyStop:
    """Early stopping's outcome for one step's rollouts: their tokens (None without lengths), their weights
    (None without early stopping: every rollout counts) and the step's ``compute/*`` scalars of it."""

    tokens_R: np.ndarray | None
    weights_R: np.ndarray | None
    scalars: dict[str, float]


@dataclasses.dataclass(frozen=True)
class Learned:
    """The learner step on the trained groups: their prompts and counts, each one's update u, the shared
    move (logged) and the forgetting it caused."""

    index_P: np.ndarray
    counts_P: np.ndarray
    update_P: np.ndarray
    delta_shared: float
    forgetting: float


class Simulation:
    """World, learner and controllers of one run; ``step()`` advances one training step."""

    def __init__(self, config: SimConfig):
        self.config = config
        self.spec = get_method(config.method)
        seeds = np.random.SeedSequence(config.seed).spawn(6)  # the first four as before the lengths, then the aborts
        self.world = make_world(config.world, np.random.default_rng(seeds[0]))
        self.learner = Learner(config.world, self.world, config.lr_scale)
        self.sampler = BatchSampler(config.world.num_prompts, config.batch, np.random.default_rng(seeds[1]))
        self.rollout_rng = np.random.default_rng(seeds[2])
        self.length_rng = np.random.default_rng(seeds[4])  # its own stream: successes are the same with lengths
        self.abort_rng = np.random.default_rng(seeds[5])  # early stopping's keep draws (abort_horizon > 0)
        c_seeds = [int(s) for s in seeds[3].generate_state(4)]  # the first three as before the selector
        # prompt ids interned once: index i is world prompt i, so the sampler's indices are the prompts
        self.prompts = PromptIndex(f"p{i:05d}" for i in range(config.world.num_prompts))
        self.method_step = MethodStep(self.spec, config.step_config().configs, c_seeds, self.prompts,
                                      builder=build_controller)
        self.step_index = 0
        self.rollouts_total = 0
        self.rollouts_trained = 0
        self.tokens_total = self.tokens_trained = 0
        self.rollouts_aborted = self.tokens_saved = 0  # early stopping (abort_horizon > 0)
        self.controller_seconds = 0.0  # plan + update time of the controllers (not logged: not deterministic)
        self._reset_accumulators()

    def _reset_accumulators(self) -> None:
        K = self.config.world.num_groups
        self.signal_mass_K = np.zeros(K)
        self.multiplier_sum_K = np.zeros(K)
        self.visits_K = np.zeros(K)

    @property
    def classifier(self) -> Any:
        return self.method_step.classifier

    @property
    def weighter(self) -> Any:
        return self.method_step.weighter

    @property
    def allocator(self) -> Any:
        return self.method_step.allocator

    @property
    def selector(self) -> Any:
        return self.method_step.selector

    def step(self, record: bool = True) -> tuple[dict[str, float], dict[str, np.ndarray]] | None:
        """One training step; returns the step record (scalars, per-bin rows), or None when ``record`` is
        False (the record is bookkeeping: skipping it does not change the run)."""
        cfg = self.config
        G = cfg.num_bins
        method = self.method_step
        clock = time.perf_counter()
        index = method.choose(self.sampler.next(), self.sampler.take, self._ids_of)
        self.controller_seconds += time.perf_counter() - clock
        groups = self.world.group_P[index]
        p = self.learner.success_prob(index)
        if hasattr(self.allocator, "observe_truth"):  # the reference allocators' truth (simulator only)
            self.allocator.observe_truth(p, self.learner.success_prob())
        clock = time.perf_counter()
        plan = method.plan(np.asarray(index, np.int64))
        self.controller_seconds += time.perf_counter() - clock
        counts = plan.counts_P
        successes = sample_rollouts(self.rollout_rng, p, counts)
        noise = self.rollout_rng.standard_normal(successes.size) if cfg.world.score_noise > 0 else None
        tokens = sample_lengths(self.length_rng, p, counts, successes, cfg.world) if cfg.world.lengths else None
        stop = self._early_stop(tokens, counts)
        tokens, weights, aborts = stop.tokens_R, stop.weights_R, stop.scalars
        generated, p_batch = counts, p  # the whole batch's, for the record (early stopping may cut them below)
        self.step_index += 1  # every rollout generated is spent, whatever early stopping leaves
        self.rollouts_total += int(generated.sum())
        if tokens is not None:
            self.tokens_total += int(tokens.sum())
        variance_batch = 4.0 * p * (1.0 - p)  # true variance of a +-1 reward
        # early stopping: the prompts with enough scored rollouts and those rollouts are all the step sees
        feedback, seen, rows = method.feedback(plan, 2.0 * successes - 1.0, successes, weights)
        if feedback is None:  # early stopping left no prompt a group (as the trainer: no controller or learner update)
            return ({**method.empty_record()[0], **aborts}, {}) if record and aborts else None
        if weights is not None:
            index, groups, p = index[seen], groups[seen], p[seen]
            counts = feedback.counts_P
            successes, weights = successes[rows], weights[rows]
            noise = None if noise is None else noise[rows]
        variance_P = variance_batch[seen]
        losses = None
        if cfg.ppo_minibatches > 1:
            losses = surrogate_losses(self.learner, index, counts, successes, p, noise, cfg.ppo_minibatches,
                                      cfg.ppo_clip, cfg.n_bar)
        feedback = dataclasses.replace(feedback, losses_R=losses,
                                       variance_G=diag.bin_mean(variance_P, feedback.bins_P, G))
        clock = time.perf_counter()
        outcome = method.observe(feedback, weighter_bins=groups if self.spec.name in GROUP_METHODS else None,
                                 tokens_R=None if tokens is None else tokens[rows])
        self.controller_seconds += time.perf_counter() - clock
        multipliers = outcome.multipliers_P
        learned = self._learn(outcome.train_P, index, counts, successes, p, noise, multipliers, weights)
        self.rollouts_trained += int(learned.counts_P.sum())
        if tokens is not None:
            self.tokens_trained += int(tokens[rows][np.repeat(outcome.train_P, counts)].sum())
        K = cfg.world.num_groups
        self.signal_mass_K += np.bincount(self.world.group_P[learned.index_P], weights=np.abs(learned.update_P),
                                          minlength=K)
        self.multiplier_sum_K += np.bincount(groups, weights=multipliers, minlength=K)
        self.visits_K += np.bincount(groups, minlength=K)
        if not record:
            return None
        scalars, rows_G = self._record(outcome, plan.bins_P, generated, variance_batch, p_batch, learned.delta_shared,
                                       learned.forgetting)
        scalars.update(aborts)
        return scalars, rows_G

    def _early_stop(self, lengths: np.ndarray | None, counts: np.ndarray) -> EarlyStop:
        """Tokens, weights and the step's compute/* of early stopping of the step's rollouts under DUET's abort rule
        (``abort_horizon`` > 0), or (lengths, None, {}) without it. A simulated rollout's answer marker is its last
        token (the answer ends it), so the rule cuts exactly the rollouts still running at horizon + grace. The
        draws come from a stream of their own; the tokens saved are exact here (the full lengths are known)."""
        cfg = self.config
        if lengths is None or not cfg.abort_horizon:
            return EarlyStop(lengths, None, {})
        tokens, weights = duet.marker_gated_abort(lengths, lengths,
                                                  cfg.abort_horizon, cfg.abort_grace,
                                                  self.abort_rng.random(lengths.size), cfg.abort_keep_prob)
        saved = int((lengths - tokens).sum())
        self.rollouts_aborted += int(np.sum(weights == 0))
        self.tokens_saved += saved
        return EarlyStop(tokens, weights, {**duet.abort_scalars(counts, tokens, weights),
                                           "compute/tokens_saved": float(saved)})

    def _learn(self, train: np.ndarray, index: np.ndarray, counts: np.ndarray, successes: np.ndarray, p: np.ndarray,
               noise: np.ndarray | None, multipliers: np.ndarray, weights: np.ndarray | None = None
               ) -> Learned:
        """The learner step on the groups the selector kept (the dropped ones were generated, not trained
        on). ``weights``: early stopping's."""
        cfg = self.config
        if not train.all():
            rows = np.repeat(train, counts)
            index, counts, successes, p = index[train], counts[train], successes[rows], p[train]
            noise, multipliers = (None if noise is None else noise[rows]), multipliers[train]
            weights = None if weights is None else weights[rows]
        gradient, _ = self.learner.gradient(successes, counts, p, noise, weights)
        delta_shared, delta_K, update_P = self.learner.step_direction(index, counts, gradient, multipliers, cfg.n_bar)
        noise_K = (self.rollout_rng.standard_normal(cfg.world.num_groups) if cfg.world.update_noise > 0 else None)
        forgetting = self.learner.apply(delta_shared, delta_K, index, update_P, noise_K)
        return Learned(index, counts, update_P, float(delta_shared), forgetting)

    def _ids_of(self, index: np.ndarray) -> np.ndarray:
        return np.asarray(index, np.int64)  # the sampler's indices are the PromptIndex's

    def _record(self, outcome: Outcome, bins: np.ndarray, counts: np.ndarray, variance_P: np.ndarray, p: np.ndarray,
                delta_shared: float, forgetting: float) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """The method step's record plus the simulator's truth: the SE of the plan (``bins``, ``counts``: the
        whole batch's, early stopping's aborts included) under the true variances (per bin and per prompt, and
        the per-prompt oracle's), the true success, the step."""
        cfg = self.config
        G = cfg.num_bins
        scalars, rows = self.method_step.record(outcome)
        scalars["sim/forgetting"] = forgetting
        share = diag.bin_share(bins, G)
        if share.sum() > 0:
            true_sigma = np.sqrt(diag.bin_mean(variance_P, bins, G))
            n_G = np.nan_to_num(diag.bin_mean(counts, bins, G), nan=cfg.n_bar)
            true_se = diag.se_report(share, true_sigma, n_G, cfg.n_bar, cfg.n_min, cfg.n_max)
            scalars.update({f"sim/{k.replace('se_', 'se_true_')}": v for k, v in true_se.items()})
        scalars.update(self._prompt_se(variance_P, counts))
        scalars["sim/true_success"] = float(p.mean())
        scalars["sim/delta_shared"] = float(delta_shared)
        return scalars, rows

    def _prompt_se(self, variance_P: np.ndarray, counts_P: np.ndarray) -> dict[str, float]:
        """Eq. 28 / Eq. 33 reductions per prompt (true v_i) of this plan and of the per-prompt oracle's."""
        cfg = self.config
        oracle = oracle_plan(variance_P, int(counts_P.sum()), cfg.n_min, cfg.n_max)
        out = {f"sim/prompt_{k}": v for k, v in prompt_se_report(variance_P, counts_P, cfg.n_bar).items()}
        out.update({f"sim/prompt_oracle_{k}": v for k, v in prompt_se_report(variance_P, oracle, cfg.n_bar).items()})
        return out

    def evaluate(self) -> dict[str, float]:
        """Exact metrics of the learner plus the latent-group support of the updates since the last call."""
        metrics = self.learner.evaluate(self.config.pass_k)
        K = self.config.world.num_groups
        mass = self.signal_mass_K
        if mass.sum() > 0:
            share = mass / mass.sum()
            metrics["effective_support"] = diag.effective_support(share)
            metrics["active_groups"] = float(np.sum(share >= 0.5 / K))
        seen = self.visits_K > 0
        if seen.any():
            metrics["weight_support"] = diag.effective_support(self.multiplier_sum_K[seen] / self.visits_K[seen])
        metrics["rollouts_total"] = float(self.rollouts_total)
        metrics["rollouts_trained_total"] = float(self.rollouts_trained)
        metrics["steps"] = float(self.step_index)
        if self.config.world.lengths:
            metrics.update(tokens_total=float(self.tokens_total), tokens_trained_total=float(self.tokens_trained))
        if self.config.abort_horizon:
            metrics.update(rollouts_aborted_total=float(self.rollouts_aborted), tokens_saved_total=float(self.tokens_saved))
        self._reset_accumulators()
        return metrics

    def state_dict(self) -> dict[str, Any]:
        lengths = ({"length_rng": self.length_rng.bit_generator.state,  # none without lengths: as before them
                    "tokens": [self.tokens_total, self.tokens_trained]} if self.config.world.lengths else {})
        if self.config.abort_horizon:
            lengths.update(abort_rng=self.abort_rng.bit_generator.state,
                           aborts=[self.rollouts_aborted, self.tokens_saved])
        return {**self.method_step.state_dict(), **lengths,
                "learner": self.learner.state_dict(),
                "sampler": self.sampler.state_dict(), "rollout_rng": self.rollout_rng.bit_generator.state,
                "loop": {"step": self.step_index, "rollouts_total": self.rollouts_total,
                         "rollouts_trained": self.rollouts_trained,
                         "signal_mass": self.signal_mass_K.copy(), "multiplier_sum": self.multiplier_sum_K.copy(),
                         "visits": self.visits_K.copy(),
                         "world_fingerprint": float(self.world.difficulty_P.sum())}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        loop = state["loop"]
        if not np.isclose(float(loop["world_fingerprint"]), float(self.world.difficulty_P.sum()), rtol=0, atol=1e-9):
            raise ConfigError("snapshot does not match this world (seed or world config changed)")
        self.method_step.load_state_dict(state)  # snapshots written before the selector family have none
        self.learner.load_state_dict(state["learner"])
        self.sampler.load_state_dict(state["sampler"])
        self.rollout_rng.bit_generator.state = state["rollout_rng"]
        if "length_rng" in state:
            self.length_rng.bit_generator.state = state["length_rng"]
            self.tokens_total, self.tokens_trained = (int(v) for v in state["tokens"])
        if "abort_rng" in state:
            self.abort_rng.bit_generator.state = state["abort_rng"]
            self.rollouts_aborted, self.tokens_saved = (int(v) for v in state["aborts"])
        self.step_index = int(loop["step"])
        self.rollouts_total = int(loop["rollouts_total"])
        self.rollouts_trained = int(loop.get("rollouts_trained", loop["rollouts_total"]))
        self.signal_mass_K = np.asarray(loop["signal_mass"], float).copy()
        self.multiplier_sum_K = np.asarray(loop["multiplier_sum"], float).copy()
        self.visits_K = np.asarray(loop["visits"], float).copy()


def _config_payload(config: SimConfig) -> dict[str, Any]:
    spec = get_method(config.method)
    payload = config.to_dict()
    payload["resolved"] = {"producer": PRODUCER, "method_label": spec.label, "method_summary": spec.summary,
                           "weighter": spec.weighter, "allocator": spec.allocator, "selector": spec.selector,
                           "partition": "groups" if spec.name in GROUP_METHODS else "difficulty",
                           "controllers": config.controller_configs()}
    return payload


def _bin_labels(num_bins: int) -> list[str]:
    return [f"accbin_{b}" for b in range(num_bins)]


class Observer(Protocol):
    """Receives what the writer logs (the studies keep their summaries in memory instead of reading
    the run directory back)."""

    def on_step(self, step: int, scalars: Mapping[str, float], rows: Mapping[str, np.ndarray]) -> None: ...

    def on_eval(self, step: int, metrics: Mapping[str, float]) -> None: ...


def _drive(sim: Simulation, writer: RunWriter, progress: Callable[[int], None] | None,
           stop_after: int | None, observer: Observer | None = None, snapshots: bool = True) -> None:
    cfg = sim.config
    last = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    pending = 0
    while sim.step_index < last:
        t = sim.step_index + 1
        result = sim.step(record=t % cfg.log_every == 0 or t == cfg.steps)
        if result is not None:
            writer.log_step(t, *result)
            if observer is not None:
                observer.on_step(t, *result)
        if t % cfg.eval_every == 0 or t == cfg.steps:
            metrics = sim.evaluate()
            writer.log_eval(t, metrics)
            if observer is not None:
                observer.on_eval(t, metrics)
        periodic = cfg.snapshot_every > 0 and t % cfg.snapshot_every == 0
        if snapshots and cfg.snapshot_every >= 0 and (periodic or t == cfg.steps):
            writer.save_snapshot(t, sim.state_dict())
        pending += 1
        if progress is not None and (pending >= 25 or t == last):
            progress(pending)
            pending = 0


def run_simulation(config: SimConfig, out_dir: str | Path, *, progress: Callable[[int], None] | None = None,
                   stop_after: int | None = None, observer: Observer | None = None, snapshots: bool = True) -> Path:
    """Run ``config`` into a new run directory ``out_dir``; returns it.

    ``stop_after`` ends early (status 'running', as a crash leaves it); ``observer`` sees every step record
    and evaluation as written; ``snapshots=False`` writes none (docs/simulator-notes.md#simulators-loop).
    """
    sim = Simulation(config)
    path = Path(out_dir)
    writer = RunWriter(path, _config_payload(config), config.num_bins, PRODUCER, _bin_labels(config.num_bins))
    try:
        metrics = sim.evaluate()
        writer.log_eval(0, metrics)
        if observer is not None:
            observer.on_eval(0, metrics)
        _drive(sim, writer, progress, stop_after, observer, snapshots)
    except BaseException:
        writer.close("failed")
        raise
    writer.close("finished" if sim.step_index >= config.steps else "running")
    if observer is not None and hasattr(observer, "on_close"):  # timing stays out of the (deterministic) records
        observer.on_close({"controller_s": sim.controller_seconds, "steps": float(sim.step_index)})
    return path


def resume_simulation(run_dir: str | Path, step: int | None = None, *,
                      progress: Callable[[int], None] | None = None) -> Path:
    """Continue a run from its snapshot at ``step`` (latest when None) to its configured end."""
    path = Path(run_dir)
    snap_step, state = load_snapshot(path, step)
    config = SimConfig.from_dict(json.loads((path / "config.json").read_text(encoding="utf-8")))
    sim = Simulation(config)
    sim.load_state_dict(state)
    writer = RunWriter.resume(path, snap_step)
    try:
        _drive(sim, writer, progress, None)
    except BaseException:
        writer.close("failed")
        raise
    writer.close("finished")
    return path
