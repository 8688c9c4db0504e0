"""The GDRO controllers of one verl run, driven once per training step by the trainer.

Adapts the method's gdro_lab.step.MethodStep to verl's batches; metrics go to verl's tracker under
``gdro/*`` and ``rollout_alloc/*`` (the released code's names). The step in full:
docs/verl-notes.md#real_runs-verl-controller.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import torch
from verl import DataProto

from gdro_lab.controllers.prompts import PromptIndex
from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.methods import FAMILIES, MethodSpec, configure, real_methods, resolve_method
from gdro_lab.runformat.runlog import LOCK_FILE, META_FILE, RunLock, RunWriter
from gdro_lab.step import BudgetError, MethodStep
from real_runs.overhead import RunClock, logged_elapsed
from real_runs.verl import VerlPluginError
from real_runs.verl import batch as vb
from real_runs.verl.state import lock_run_dir


@dataclass(frozen=True)
class GDROSettings:
    """The ``gdro`` section of the launch config."""

    method: str = ""
    """A method of gdro_lab.methods.METHODS (its controllers and overrides, as ``gdro train``'s method.name);
    "" = the four controllers named below. With a method, a family left at its default below takes the
    method's controller, one set to another name replaces it."""
    classifier: str = "window"
    """Difficulty classifier, a name in gdro_lab.REGISTRY['classifier'] ('window' = the paper's)."""
    classifier_config: Mapping[str, Any] = field(default_factory=dict)
    """gdro_lab.ClassifierConfig fields (edges, window, k, hysteresis...)."""
    weighter: str = "gdro"
    """Prompt weighter: 'gdro' (Prompt-GDRO) or 'uniform' (GRPO's advantages untouched)."""
    weighter_config: Mapping[str, Any] = field(default_factory=dict)
    """gdro_lab.WeighterConfig fields; num_bins defaults to the classifier's."""
    allocator: str = "gdro"
    """Rollout allocator: 'gdro' (Rollout-GDRO), 'sqrt' or 'uniform' (verl's fixed rollout.n)."""
    allocator_config: Mapping[str, Any] = field(default_factory=dict)
    """Fields of the allocator's config class; num_bins defaults to the classifier's, n_bar to rollout.n."""
    selector: str = "none"
    """Prompt selector: 'none', 'dynamic_sampling' (DAPO) or 'greso' (needs data.gen_batch_size > train_batch_size)."""
    selector_config: Mapping[str, Any] = field(default_factory=dict)
    """gdro_lab.SelectorConfig fields."""
    seed: int = 0
    """Seed of the controllers' RNGs (saved with their state)."""
    id_key: str = "index"
    """Field of extra_info holding the stable prompt id."""
    run_dir: str | None = None
    """Our run directory (steps.jsonl, snapshots) for the app; None = no run directory."""
    resume_without_state: bool = False
    """Resume from a checkpoint that has no gdro_ctrl.json, starting the controllers fresh."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> "GDROSettings":
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise VerlPluginError(f"gdro has no setting(s) {', '.join(unknown)}: allowed are {', '.join(sorted(known))}")
        for family in ("classifier", "weighter", "allocator", "selector"):
            name = values.get(family, getattr(cls, family))
            if name not in REGISTRY[family]:
                raise VerlPluginError(f"gdro.{family}={name!r} is unknown: choose one of {', '.join(REGISTRY[family])}")
        method = str(values.get("method", ""))
        if method and method not in real_methods():
            raise VerlPluginError(f"gdro.method={method!r} is unknown here: choose one of {', '.join(real_methods())} "
                                  "(or leave it out and name the controllers)")
        return cls(**values)

    def method_spec(self) -> MethodSpec:
        """The run's method: ``method``'s row of the table with the families set away from their defaults
        replacing its controllers; without ``method``, the four named controllers."""
        names = {family: getattr(self, family) for family in FAMILIES}
        if not self.method:
            return resolve_method("custom", **names)
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        return resolve_method(self.method, **{family: "" if name == defaults[family] else name
                                              for family, name in names.items()})


class GDROController:
    """The method step of one run (classifier, weighter, allocator, selector), its bookkeeping between
    plan and observe, and the run directory."""

    def __init__(self, settings: GDROSettings, n_bar: int, run_config: Mapping[str, Any] | None = None,
                 batch_size: int | None = None):
        self.settings = settings
        self.n_bar = int(n_bar)
        self.batch_size = batch_size  # prompts generated per step (data.train_batch_size); None = every row
        self.prompts = PromptIndex()  # stable ids interned on first sight; the controllers' rows
        names = {**{family: f"gdro.{family}_config" for family in FAMILIES}, "n_bar": "actor_rollout_ref.rollout.n",
                 "num_bins": "the classifier's bins (len(gdro.classifier_config.edges) + 1)"}
        user = {family: getattr(settings, f"{family}_config") for family in FAMILIES}
        resolved = configure(settings.method_spec(), n_bar=self.n_bar, user=user, names=names)  # ConfigError
        num_bins = resolved.num_bins
        self.method_step = MethodStep(resolved.method, resolved.configs, settings.seed, self.prompts)  # k > n_min...
        self.num_bins = num_bins
        self._run_config = dict(run_config or {})
        self._step_bins: dict[str, int] = {}
        self._train_rows: np.ndarray | None = None
        self.last_plan: dict[str, int] = {}
        self.writer: RunWriter | None = None
        self._lock: RunLock | None = None
        self._clock = RunClock()  # time/elapsed; a resume adds the run's earlier seconds (open_run)

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

    # ------------------------------------------------------------------ per step

    def plan(self, ids: list[str]) -> np.ndarray:
        """Rollouts per row of this step's batch: the chosen batch_size rows (module docstring) get the
        allocator's plan (sum exactly batch_size n_bar, each >= n_min), the others 0."""
        size = len(ids) if self.batch_size is None else min(self.batch_size, len(ids))
        index = self.prompts.intern(ids)
        candidates = np.arange(len(ids))
        position = [size]

        def draw(count: int) -> np.ndarray:  # the rest of the dataloader's batch, in order
            start, position[0] = position[0], min(position[0] + count, len(ids))
            return candidates[start:position[0]]

        chosen = self.method_step.choose(candidates[:size], draw, lambda rows: index[rows])
        try:
            plan = self.method_step.plan(index[chosen])
        except BudgetError as err:
            raise VerlPluginError(str(err)) from None
        bins, counts = plan.bins_P, plan.counts_P
        chosen_ids = [ids[r] for r in chosen.tolist()]
        self._step_bins = {i: int(b) for i, b in zip(chosen_ids, bins)}
        self.last_plan = {i: int(n) for i, n in zip(chosen_ids, counts)}  # candidates passed over: not generated
        counts_all = np.zeros(len(ids), np.int64)
        counts_all[chosen] = counts
        return counts_all

    def observe(self, data: DataProto, step: int) -> dict[str, float]:
        """Update the controllers from the step's rewards and scale ``advantages`` in place.

        Returns the metrics for verl's tracker (finite values only).
        """
        if "advantages" not in data.batch.keys():
            raise VerlPluginError("the batch has no advantages: observe() runs after verl's compute_advantage")
        feedback, prompt_index = vb.feedback_from_batch(data, self._step_bins, self.settings.id_key)
        vb.check_executed(feedback.prompt_ids, feedback.counts_P, self.last_plan)
        tokens_R = vb.response_tokens(data)[np.argsort(prompt_index, kind="stable")]
        outcome = self.method_step.observe(feedback, tokens_R=tokens_R)
        self._train_rows = outcome.train_P[prompt_index]
        data.batch["advantages"] = vb.scaled_advantages(data, outcome.multipliers_P, prompt_index)
        # the record handles steps whose prompts have no bin yet (lead-lag and SE fields null)
        scalars, bins = self.method_step.record(outcome)
        scalars["time/elapsed"] = self._clock.elapsed()
        if self.writer is not None:
            self.writer.log_step(step, scalars, bins)
        return tracker_metrics(scalars, bins)

    @contextlib.contextmanager
    def trained_rows_only(self, data: DataProto) -> Iterator[None]:
        """During the actor update, rows of the groups the selector dropped have an all-zero
        ``response_mask`` (verl's loss aggregations then leave them out: token-mean counts no token of
        theirs, the seq-mean modes skip fully masked sequences); the mask is restored afterwards."""
        keep = self._train_rows
        if keep is None or keep.all():
            yield
            return
        original = data.batch["response_mask"]
        data.batch["response_mask"] = original * torch.as_tensor(keep, dtype=original.dtype,
                                                                 device=original.device)[:, None]
        try:
            yield
        finally:
            data.batch["response_mask"] = original

    # ------------------------------------------------------------------ state and run directory

    def state_dict(self) -> dict[str, Any]:
        """The method step's state (the four controllers, RNG included) and the run's prompt numbering."""
        return {**self.method_step.state_dict(), "prompts": self.prompts.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        missing = {"classifier", "weighter", "allocator"} - set(state)
        if missing:
            raise VerlPluginError(f"controller state lacks {', '.join(sorted(missing))}: the file is damaged")
        if "prompts" in state:  # the run's numbering (states written before interning have none)
            self.prompts.load_state_dict(state["prompts"])
        self.method_step.load_state_dict(state)  # checkpoints written before the selector family have none ('none')

    def open_run(self, resume_step: int | None = None) -> None:
        """Create (or, resuming after ``resume_step``, reopen) the run directory, if configured.

        Takes the run's :class:`gdro_lab.runformat.runlog.RunLock` first (held until :meth:`close`): never two writers.
        """
        if not self.settings.run_dir:
            return
        path = Path(self.settings.run_dir)
        problem = run_dir_problem(path, resume_step)
        if problem:
            raise VerlPluginError(problem)
        self._lock = lock_run_dir(path)
        try:
            if resume_step is not None and (path / META_FILE).exists():
                self.writer = RunWriter.resume(path, resume_step, lock=self._lock)
                self._clock.before = logged_elapsed(path, resume_step)
            else:
                labels = [f"bin_{b}" for b in range(self.num_bins)]
                self.writer = RunWriter(path, self._run_config, self.num_bins, "verl", labels, lock=self._lock)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def snapshot(self, step: int) -> None:
        """Controller state into the run directory's snapshots (for the app and for resume checks)."""
        if self.writer is not None:
            self.writer.save_snapshot(step, self.state_dict())

    def close(self, status: str = "finished") -> None:
        if self.writer is not None:
            self.writer.close(status)
            self.writer = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def run_dir_problem(path: Path, resume_step: int | None) -> str | None:
    """Why ``path`` cannot be (re)opened as this launch's run directory, in one line; None if it can.

    A run is continued only when verl resumes a checkpoint; a folder that holds other files is
    never written into (it is not ours).
    """
    if path.exists() and not path.is_dir():
        return f"gdro.run_dir={path} is a file: choose a folder path"
    if not path.is_dir():
        return None
    if (path / META_FILE).exists():
        if resume_step:
            return None
        return (f"gdro.run_dir={path} already holds a run, but this launch resumes no checkpoint (the earlier "
                "job stopped before its first save, or trainer.resume_mode=disable): set a new gdro.run_dir, "
                "or delete that folder to start over (nothing was touched)")
    others = sorted(p.name for p in path.iterdir() if p.name != LOCK_FILE)
    if others:
        return (f"gdro.run_dir={path} is not empty and holds no run ({others[0]}...): choose a new or empty "
                "folder (nothing was touched)")
    return None


def tracker_metrics(scalars: Mapping[str, float], bins: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Step record -> verl tracker keys: ``gdro/<name>``, ``gdro/<field>/bin_<b>``, ``rollout_alloc/*``.

    Allocator scalars (``rollout/...``) go to ``rollout_alloc/...``; per-bin rollouts and shares also
    appear as ``rollout_alloc/mean_n/bin_<b>`` and ``rollout_alloc/class_share/bin_<b>``. Non-finite
    values (empty bins) are left out.
    """
    out: dict[str, float] = {}
    for name, value in scalars.items():
        key = f"rollout_alloc/{name[len('rollout/'):]}" if name.startswith("rollout/") else f"gdro/{name}"
        out[key] = float(value)
    for name, row in bins.items():
        for b, value in enumerate(np.asarray(row, float)):
            out[f"gdro/{name}/bin_{b}"] = float(value)
            if name == "rollouts":
                out[f"rollout_alloc/mean_n/bin_{b}"] = float(value)
            elif name == "share":
                out[f"rollout_alloc/class_share/bin_{b}"] = float(value)
    return {k: v for k, v in out.items() if math.isfinite(v)}
