"""A runs folder shaped like one ``gdro arena`` output (about 1,200 runs), written in seconds.

No simulation: the files are synthesized in the exact run format (docs/run-format.md) with the sizes of
real runs. :func:`build_root` writes, under ``root``:

* ``runs/<world>/<method>/lr<x>/seed<k>``: the simulator's arena, 5 worlds x 11 methods x 3 seeds x
  each method's learning-rate grid (the sqrt(2) grid 0.5 to 2, extended by one step down for
  every other method and up for the rest: 6 scales), plus the step-matched GRPO baselines of the
  two selectors (``runs/<world>/grpo_stepmatched_<m>/seed<k>``): 1,020 runs of :data:`SIM_STEPS`
  steps logged every :data:`LOG_EVERY` (80 lines of 54 to 57 scalars and 10 per-bin fields, about
  240 kB a run as a real one) and an evaluation every :data:`EVAL_EVERY` steps (24 metrics). The
  configs are the simulator's own (``simulators.loop`` of the arena's settings); the arena writes no
  snapshots, so ``snapshots/`` is empty as in a real arena;
* ``lm/runs/<method>-lr<x>-s<k>``: the LM part, 10 methods x 5 lr scales x 3 seeds = 150 runs in
  ``gdro train``'s layout (producer ``gdro train``, :data:`TRAIN_STEPS` steps with step times,
  agreed-name evaluations every :data:`TRAIN_EVAL_EVERY` steps);
* ``damaged/truncated`` (a finished run whose steps.jsonl stops halfway, in a cut line),
  ``damaged/newer`` (format version 99), ``damaged/bad-meta`` (meta.json is not JSON) and
  ``damaged/no-steps`` (finished, but no steps.jsonl);
* ``empty/``: an empty folder.

``python tests/apps/root1000.py OUT`` builds one to look at (benchmarks/bench_app.py uses it).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gdro_app_synthetic import SyntheticCurriculum, trainer_config  # noqa: E402
from gdro_lab.runformat.runlog import to_jsonable  # noqa: E402

SIM_STEPS, LOG_EVERY, EVAL_EVERY, SEEDS, NUM_BINS, BATCH = 400, 5, 50, 3, 10, 128
TRAIN_STEPS, TRAIN_EVAL_EVERY = 60, 20
WORLDS = ("default", "paper-1.7b", "paper-4b", "paper-8b", "bimodal")
METHODS = ("grpo", "rollout_gdro", "gdro_prompt", "knapsack", "knapsack_code", "vip", "duet", "cero",
           "dynamic_sampling", "greso", "prompt_oracle")
SELECTORS = ("dynamic_sampling", "greso")
BASE_GRID = (0.5, 0.707106781187, 1.0, 1.41421356237, 2.0)  # studykit.lrgrid.sqrt2_grid(0.5, 2)
LM_METHODS = METHODS[:-1]  # the LM part has no oracle
LM_SCALES = (0.5, 0.707106781187, 1.0, 1.41421356237, 2.0)
#: The trainer's method fields of each LM method (real_runs/lmstudy/lm_arena.py's METHODS).
LM_METHOD_FIELDS = {"rollout_gdro": {"name": "rollout_gdro"}, "gdro_prompt": {"allocator": "gdro_prompt"},
                    "knapsack": {"allocator": "knapsack"}, "knapsack_code": {"name": "knapsack_code"},
                    "vip": {"allocator": "vip"}, "duet": {"allocator": "duet"}, "cero": {"allocator": "cero"},
                    "dynamic_sampling": {"selector": "dynamic_sampling"}, "greso": {"selector": "greso"}}
TRUNCATED, NEWER, BAD_META, NO_STEPS = "damaged/truncated", "damaged/newer", "damaged/bad-meta", "damaged/no-steps"
EMPTY = "empty"
TRUNCATED_FROM = "runs/default/knapsack/lr1/seed0"

#: Scalars every simulator run logs (the order of a real GRPO run), and each method's additions and
#: omissions (as logged by ``gdro simulate``).
SCALARS = ("mean_success", "mean_reward", "mean_rollouts", "total_rollouts", "num_prompts", "num_unassigned",
           "zero_variance_frac", "mu", "lead_lag_gap", "mu_weight", "mu_data", "effective_support",
           "worst_bin_success", "multiplier_mean", "multiplier_sq_mean", "se_actual", "se_uniform", "se_sqrt",
           "se_reduction_pct", "se_sqrt_reduction_pct", "classifier/tracked_prompts", "classifier/new_prompts",
           "classifier/moves", "classifier/mean_passk", "prompt_gdro/effective_support", "prompt_gdro/max_weight",
           "prompt_gdro/score_max", "prompt_gdro/signal_mean", "rollout/mean_n", "rollout/mu",
           "rollout/prompts_tracked", "rollout/prompts_first_visit", "rollout/cero_spend_ratio",
           "rollout/cero_dual_mean", "select/screened", "select/skipped", "compute/rollouts_generated",
           "compute/rollouts_trained", "compute/prompts_trained", "compute/prompts_generated",
           "compute/tokens_generated", "compute/tokens_trained", "sim/forgetting", "sim/se_true_actual",
           "sim/se_true_uniform", "sim/se_true_sqrt", "sim/se_true_reduction_pct", "sim/se_true_sqrt_reduction_pct",
           "sim/prompt_var_reduction_pct", "sim/prompt_wse_reduction_pct", "sim/prompt_oracle_var_reduction_pct",
           "sim/prompt_oracle_wse_reduction_pct", "sim/true_success", "sim/delta_shared")
_TRACKED = ("rollout/prompts_tracked", "rollout/prompts_first_visit")
_CERO = ("rollout/cero_spend_ratio", "rollout/cero_dual_mean")
EXTRA_SCALARS = {"rollout_gdro": ("rollout/sampled_mean_n", "rollout/budget_violation", "rollout/arm_entropy"),
                 "gdro_prompt": ("rollout/best_response_mean_n",), "vip": ("rollout/prior_success",),
                 "duet": ("rollout/prior_success",),
                 "greso": ("select/p_easy", "select/p_hard", "select/easy_share", "select/hard_share")}
MISSING_SCALARS = {"grpo": _TRACKED + _CERO, "rollout_gdro": _TRACKED + _CERO, "dynamic_sampling": _TRACKED + _CERO,
                   "greso": _TRACKED + _CERO, "prompt_oracle": _TRACKED + _CERO, "gdro_prompt": _CERO,
                   "knapsack": _CERO, "knapsack_code": _CERO, "vip": _CERO, "duet": _CERO}
#: Scalars a method without a Prompt-GDRO weighter (every arena method) logs as null.
NULL_SCALARS = ("mu", "lead_lag_gap", "mu_weight", "mu_data", "rollout/mu")
BINS = ("count", "share", "weight", "rollouts", "reward", "success", "sigma", "multiplier", "signal", "score")
EVAL_METRICS = ("accuracy", "worst_group_accuracy", "pass@8", "worst_group_pass@8", "mean_group_accuracy",
                "unsolved_frac", "solved_frac", "val/accuracy", "val/worst_group_accuracy", "val/pass@8",
                "val/worst_group_pass@8", "test/accuracy", "test/worst_group_accuracy", "test/pass@8",
                "test/worst_group_pass@8", "memorisation_gap", "effective_support", "active_groups", "weight_support",
                "rollouts_total", "rollouts_trained_total", "steps", "tokens_total", "tokens_trained_total")
#: How much each method gains over the run, its best lr scale, and each world's starting success.
GAIN = {m: 0.30 + 0.012 * i for i, m in enumerate(METHODS)}
BEST_LR = {m: (0.707, 1.0, 1.41)[i % 3] for i, m in enumerate(METHODS)}
WORLD_START = {"default": 0.33, "paper-1.7b": 0.18, "paper-4b": 0.27, "paper-8b": 0.55, "bimodal": 0.4}


@dataclass(frozen=True)
class Root1000:
    """The generated root and the labels (folders relative to it) of each kind of folder in it."""

    root: Path
    simulator: tuple[str, ...]
    trainer: tuple[str, ...]
    damaged: tuple[str, ...] = (TRUNCATED, NEWER, BAD_META, NO_STEPS)
    empty: str = EMPTY

    @property
    def healthy(self) -> tuple[str, ...]:
        """Every run that is neither damaged nor unreadable."""
        return (*self.simulator, *self.trainer)


def lr_dir(lr: float) -> str:
    """The simulator's folder name of an lr scale (``simulators.studies.tuning.lr_dir``)."""
    return f"lr{lr:g}"


def method_grid(index: int) -> tuple[float, ...]:
    """A method's lr grid: the base grid extended by one sqrt(2) step down (even index) or up (odd)."""
    return (0.353553390593,) + BASE_GRID if index % 2 == 0 else BASE_GRID + (2.82842712475,)


def sim_config(world: str, method: str, seed: int, lr: float, matched_factor: float = 1.0) -> dict[str, Any]:
    """The simulator's config.json of one arena run (its own code: ``simulators.loop``)."""
    from simulators.loop import _config_payload
    from simulators.studies.allocation_arena import WORLDS as ARENA_WORLDS
    from simulators.studies.common import StudySettings
    from simulators.studies.common import sim_config as study_config
    from studykit.arena_settings import METHOD_SETTINGS

    settings = StudySettings(out=Path("."), seeds=SEEDS, steps=SIM_STEPS, prompts=4000, batch=BATCH, eval_every=EVAL_EVERY,
                             log_every=LOG_EVERY, snapshot_seeds=0, world={"lengths": True, **ARENA_WORLDS[world]})
    config = study_config(settings, method, seed, METHOD_SETTINGS.get(method), lr_scale=lr)
    if matched_factor != 1.0:
        config = replace(config, world=replace(config.world, lr_shared=config.world.lr_shared * matched_factor,
                                               lr_group=config.world.lr_group * matched_factor))
    return to_jsonable(_config_payload(config))


def _meta(producer: str, created: float, status: str = "finished") -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(created))
    return {"format": "gdro-run", "version": 1, "producer": producer, "created": stamp, "num_bins": NUM_BINS,
            "bin_labels": [f"accbin_{b}" for b in range(NUM_BINS)], "status": status}


def _write_run(path: Path, meta: dict[str, Any], config: dict[str, Any], steps_text: str, eval_text: str) -> None:
    """The files of a run as ``RunWriter`` leaves them (without its fsyncs: a fixture needs no crash safety)."""
    (path / "snapshots").mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config, indent=1))
    (path / "steps.jsonl").write_text(steps_text)
    (path / "eval.jsonl").write_text(eval_text)
    (path / ".writer.lock").write_text("pid 4242 on arena")
    (path / "meta.json").write_text(json.dumps(meta, indent=1))


def _lines(records: list[dict[str, Any]]) -> str:
    """JSON lines as ``RunWriter`` writes them (NaN written as null)."""
    return "".join(json.dumps(record).replace("NaN", "null") + "\n" for record in records)


def _sim_steps(rng: np.random.Generator, method: str, world: str, lr: float, seed: int) -> tuple[str, str]:
    """(steps.jsonl, eval.jsonl) of one simulator run: success rising with a method's gain at its lr."""
    logged_T = np.arange(LOG_EVERY, SIM_STEPS + 1, LOG_EVERY)
    progress_T = logged_T / SIM_STEPS
    fit = math.exp(-0.5 * (math.log2(lr / BEST_LR[method]) / 1.2) ** 2)
    start = WORLD_START[world]
    level_T = start + GAIN[method] * fit * (1 - np.exp(-3 * progress_T)) * (1 - start) + rng.normal(0, 0.01, len(logged_T))
    logits_TG = (np.arange(NUM_BINS) - 4.5) / 1.2 + 4 * (level_T[:, None] - 0.5)
    success_TG = np.clip(1 / (1 + np.exp(-logits_TG)) + rng.normal(0, 0.03, logits_TG.shape), 0.0, 1.0)
    share_TG = rng.dirichlet(np.full(NUM_BINS, 3.0), size=len(logged_T))
    count_TG = np.round(share_TG * BATCH)
    share_TG = count_TG / np.maximum(count_TG.sum(axis=1, keepdims=True), 1)
    empty_TG = count_TG == 0
    allocates = method not in ("grpo", "dynamic_sampling", "greso")
    sigma_TG = 2 * np.sqrt(success_TG * (1 - success_TG))
    rollouts_TG = (np.clip(np.round(4 * sigma_TG / max(float(sigma_TG.mean()), 1e-6), 1), 2, 12) if allocates
                   else np.full_like(sigma_TG, 4.0))
    nan_empty = np.where(empty_TG, np.nan, 1.0)
    bins = {"count": count_TG, "share": share_TG, "weight": np.full_like(share_TG, 1 / NUM_BINS),
            "rollouts": rollouts_TG * nan_empty, "reward": (2 * success_TG - 1) * nan_empty,
            "success": success_TG * nan_empty, "sigma": sigma_TG * nan_empty,
            "multiplier": np.ones_like(share_TG) * nan_empty, "signal": (1 - success_TG) * nan_empty,
            "score": np.abs(rng.normal(1.0, 1.0, share_TG.shape)) * (1 - success_TG)}
    names = [n for n in SCALARS if n not in MISSING_SCALARS.get(method, ())] + list(EXTRA_SCALARS.get(method, ()))
    noise_TS = rng.random((len(logged_T), len(names)))
    mean_success_T = np.nansum(share_TG * success_TG, axis=1)
    known = {"mean_success": mean_success_T, "mean_reward": 2 * mean_success_T - 1,
             "mean_rollouts": np.nansum(share_TG * rollouts_TG, axis=1), "num_prompts": count_TG.sum(axis=1),
             "num_unassigned": np.zeros(len(logged_T)), "sim/true_success": level_T,
             "effective_support": np.full(len(logged_T), float(NUM_BINS)), "multiplier_mean": np.ones(len(logged_T)),
             "multiplier_sq_mean": np.ones(len(logged_T))}
    known["total_rollouts"] = known["num_prompts"] * known["mean_rollouts"]
    columns = [known.get(name, np.round(noise_TS[:, index] * 5000) if _counted(name) else noise_TS[:, index])
               for index, name in enumerate(names)]
    lines = []
    for row in range(len(logged_T)):
        scalars = {name: (None if name in NULL_SCALARS else float(columns[index][row])) for index, name in enumerate(names)}
        lines.append({"step": int(logged_T[row]), "scalars": scalars,
                      "bins": {name: bins[name][row].tolist() for name in BINS}})
    evals = []
    for step in range(0, SIM_STEPS + 1, EVAL_EVERY):
        accuracy = start + GAIN[method] * fit * (1 - math.exp(-3 * step / SIM_STEPS)) * (1 - start)
        values = rng.normal(1.0, 0.05, len(EVAL_METRICS)) * accuracy
        metrics = dict(zip(EVAL_METRICS, values.tolist()))
        metrics.update({"accuracy": accuracy + float(rng.normal(0, 0.005)), "steps": float(step),
                        "rollouts_total": float(step * BATCH * 4), "rollouts_trained_total": float(step * BATCH * 4)})
        evals.append({"step": step, "metrics": metrics})
    return _lines(lines), _lines(evals)


def _counted(name: str) -> bool:
    """A scalar that counts something (logged as a whole number)."""
    return name.startswith(("compute/", "classifier/", "select/")) or "prompts" in name


def write_sim_run(path: Path, world: str, method: str, seed: int, lr: float, created: float,
                  matched_factor: float = 1.0) -> None:
    """One finished simulator run of the arena."""
    rng = np.random.default_rng(zlib.crc32(f"{world}/{method}/{lr:g}/{seed}".encode()))
    config = sim_config(world, "grpo" if matched_factor != 1.0 else method, seed, lr, matched_factor)
    steps_text, eval_text = _sim_steps(rng, "grpo" if matched_factor != 1.0 else method, world, lr, seed)
    _write_run(path, _meta("gdro-lab simulator", created), config, steps_text, eval_text)


def write_lm_run(path: Path, method: str, seed: int, lr: float, base_config: dict[str, Any], created: float) -> None:
    """One finished run of the LM part in ``gdro train``'s layout."""
    curve = "rollout_gdro" if method not in ("grpo", *SELECTORS) else "grpo"
    curriculum = SyntheticCurriculum(num_bins=NUM_BINS, total_steps=TRAIN_STEPS + 1, method=curve,
                                     seed=zlib.crc32(path.name.encode()), batch=16, real=True, layout="trainer",
                                     lr_scale=lr)
    config = json.loads(json.dumps(base_config))
    config["method"].update(LM_METHOD_FIELDS.get(method, {}))
    config["optim"]["lr_scale"] = lr
    config["train"].update({"seed": seed, "steps": TRAIN_STEPS, "run_name": path.name, "out": str(path.parent)})
    steps, evals = [], []
    for step in range(1, TRAIN_STEPS + 1):
        scalars, bins = curriculum.record(step)
        steps.append({"step": step, "scalars": to_jsonable(scalars), "bins": to_jsonable(bins)})
        if step % TRAIN_EVAL_EVERY == 0:
            evals.append({"step": step, "metrics": to_jsonable(curriculum.eval_metrics(step))})
    _write_run(path, _meta("gdro train", created), config, _lines(steps), _lines(evals))


def lm_base_config() -> dict[str, Any]:
    """The trainer's resolved config (``real_runs.config``) when importable, else the synthetic one."""
    try:
        from real_runs.config import config_to_dict, load_config
    except ImportError:
        return trainer_config("grpo", 0, 1.0, NUM_BINS, TRAIN_STEPS, 16)
    return dict(config_to_dict(load_config("tiny-cpu", ["method.name=grpo"])))


def write_damaged(root: Path) -> None:
    """The damaged folders (copies of a healthy run) and the empty one."""
    source = root / TRUNCATED_FROM
    target = root / TRUNCATED
    shutil.copytree(source, target)
    text = (target / "steps.jsonl").read_bytes()
    (target / "steps.jsonl").write_bytes(text[: len(text) // 2])  # halfway: in the middle of a line
    shutil.copytree(source, root / NEWER)
    meta = json.loads((root / NEWER / "meta.json").read_text())
    (root / NEWER / "meta.json").write_text(json.dumps({**meta, "version": 99}, indent=1))
    shutil.copytree(source, root / BAD_META)
    (root / BAD_META / "meta.json").write_text('{"format": "gdro-run", "version": 1, "produc')
    shutil.copytree(source, root / NO_STEPS)
    (root / NO_STEPS / "steps.jsonl").unlink()
    (root / EMPTY).mkdir()


def build_root(root: Path) -> Root1000:
    """Write the whole root (see the module docstring) and return what it holds."""
    root.mkdir(parents=True, exist_ok=True)
    created = 1_790_000_000.0
    simulator, trainer = [], []
    for world in WORLDS:
        for index, method in enumerate(METHODS):
            for lr in method_grid(index):
                for seed in range(SEEDS):
                    label = f"runs/{world}/{method}/{lr_dir(lr)}/seed{seed}"
                    write_sim_run(root / label, world, method, seed, lr, created)
                    simulator.append(label)
                    created += 7
        for selector in SELECTORS:
            for seed in range(SEEDS):
                label = f"runs/{world}/grpo_stepmatched_{selector}/seed{seed}"
                write_sim_run(root / label, world, selector, seed, 1.0, created, matched_factor=1.25)
                simulator.append(label)
                created += 7
    base = lm_base_config()
    for method in LM_METHODS:
        for lr in LM_SCALES:
            for seed in range(SEEDS):
                label = f"lm/runs/{method}-lr{lr:g}-s{seed}"
                write_lm_run(root / label, method, seed, lr, base, created)
                trainer.append(label)
                created += 60
    write_damaged(root)
    return Root1000(root, tuple(sorted(simulator)), tuple(sorted(trainer)))


if __name__ == "__main__":  # python tests/apps/root1000.py OUT: build a root to look at (benchmarks, screenshots)
    began = time.perf_counter()
    built = build_root(Path(sys.argv[1]))
    size = sum(file.stat().st_size for file in built.root.rglob("*") if file.is_file())
    print(f"{built.root}: {len(built.simulator)} simulator runs, {len(built.trainer)} trainer runs, "
          f"{len(built.damaged)} damaged folders, 1 empty folder; {size / 1e6:.0f} MB, "
          f"written in {time.perf_counter() - began:.1f} s")
