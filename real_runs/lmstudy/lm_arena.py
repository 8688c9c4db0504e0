"""The allocation arena on the CPU LM study: the arena's methods through the real trainer.

Same model, warm start, tasks, loss and reward as ``gdro study lm``; each method is the trainer's
``method.allocator`` / ``method.selector``. Equal compute (prompts_per_step x n_bar rollouts per step);
every method at its own best lr scale from LR_SCALES chosen on **val**, reported on **test**, paired by
seed. Reduced setting ``ARENA``, stated in the report. Writes ``lm-arena.json`` and reuses unchanged
finished runs. The setting: docs/lm-study-notes.md#real_runs-lmstudy-lm_arena; cost per step:
docs/benchmarks.md#real_runs-lmstudy-lm_arena.
"""

from __future__ import annotations

import dataclasses
import json
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

import numpy as np

from real_runs.lmstudy import learning_study, tasks
from real_runs.lmstudy.warmstart import WarmStartConfig
from studykit.arena_settings import METHOD_SETTINGS
from studykit.stats import mean_ci
from studykit.tables import fmt, markdown_table

ARENA = learning_study.StudyConfig(seeds=3, steps=60, prompts_per_step=16, eval_every=60, train_size=320, heldout_per_group=100,
                          warm=WarmStartConfig(steps=300, batch_size=64, warmup_steps=20, heldout_per_group=100,
                                               slip_rate=learning_study.SLIP_RATE))
QUICK = dataclasses.replace(learning_study.QUICK, seeds=2)
LR_SCALES = (0.5, 0.707106781187, 1.0, 1.41421356237, 2.0)
"""The full setting's grid: the simulator part's sqrt(2) steps over [0.5, 2] (studykit.lrgrid.sqrt2_grid)."""
COARSE_SCALES = (0.5, 1.0, 2.0)
"""``--lm-grid coarse``: steps of 2x (the committed report's reduced setting)."""
METHODS: dict[str, tuple[str, dict[str, str]]] = {
    "grpo": ("GRPO", {}),
    "rollout_gdro": ("Rollout-GDRO", {"name": "rollout_gdro"}),
    "gdro_prompt": ("per-prompt Rollout-GDRO", {"allocator": "gdro_prompt"}),
    "knapsack": ("Knapsack-RL", {"allocator": "knapsack"}),
    "knapsack_code": ("Knapsack-RL (code's DP)", {"name": "knapsack_code"}),
    "vip": ("VIP", {"allocator": "vip"}),
    "duet": ("DUET", {"allocator": "duet"}),
    "cero": ("CERO", {"allocator": "cero"}),
    "dynamic_sampling": ("DAPO dynamic sampling", {"selector": "dynamic_sampling"}),
    "greso": ("GRESO", {"selector": "greso"}),
}
SPLITS = ("val", "test")


def eval_records(cfg: learning_study.StudyConfig) -> dict[str, list[Any]]:
    """Held-out problems as benchmarks ``lmstudy_{skill}/val`` and ``lmstudy_{skill}/test``, alternating
    within each skill. Not ``tasks.heldout_halves``' split: docs/lm-study-notes.md#real_runs-lmstudy-lm_arena.
    """
    by_skill: dict[str, list[Any]] = {}
    for problem in tasks.heldout_split(cfg.task_config()):
        by_skill.setdefault(problem.source, []).append(problem)
    out: dict[str, list[Any]] = {}
    for source, problems in by_skill.items():
        for index, split in enumerate(SPLITS):
            name = f"{source}/{split}"
            out[name] = [dataclasses.replace(p, source=name) for p in problems[index::2]]
    return out


def skills(cfg: learning_study.StudyConfig) -> list[str]:
    """The benchmark prefixes of :func:`eval_records` (one per skill)."""
    return sorted({name.rsplit("/", 1)[0] for name in eval_records(cfg)})


def trainer_config(cfg: learning_study.StudyConfig, method: str, seed: int, out: Path, lr_scale: float) -> Any:
    from real_runs.config import config_from_dict, config_to_dict
    values = config_to_dict(learning_study.trainer_config(cfg, "grpo", seed, out, lr_scale))
    values["method"].update(METHODS[method][1])
    values["rollout"].update(METHOD_SETTINGS.get(method, {}))  # DUET's early stopping
    values["train"]["run_name"] = run_name(method, lr_scale, seed)
    values["eval"]["benchmarks"] = sorted(eval_records(cfg))
    return config_from_dict(values)


def run_name(method: str, lr_scale: float, seed: int) -> str:
    return f"{method}-lr{lr_scale:g}-s{seed}"


def run_one(cfg: learning_study.StudyConfig, method: str, seed: int, lr_scale: float, out: Path, warm_path: Path) -> str:
    """One run in this (worker) process; a finished run with the same config is reused."""
    learning_study._worker_setup(cfg)
    from real_runs.lmstudy.warmstart import load_warm_start
    from real_runs.rewards.math import MathReward
    from real_runs.train import main as train_main

    config = trainer_config(cfg, method, seed, out, lr_scale)
    target = out / run_name(method, lr_scale, seed)
    if finished_run(cfg, method, seed, lr_scale, out) is not None:
        return str(target)
    if target.exists():
        raise learning_study.unfinished_run(target, "arena")
    model, tokenizer, _ = load_warm_start(warm_path)
    with MathReward(num_workers=1) as reward:
        run_dir = train_main(config, model=model, tokenizer=tokenizer, train_records=tasks.train_split(cfg.task_config()),
                             eval_records=eval_records(cfg), reward=reward)
    return str(run_dir)


def finished_run(cfg: learning_study.StudyConfig, method: str, seed: int, lr_scale: float, out: Path) -> Path | None:
    """The finished run directory of this (method, seed, lr scale) under ``out``, None when there is none;
    FileExistsError when a finished run there has another config."""
    from real_runs.config import config_to_dict
    target = out / run_name(method, lr_scale, seed)
    if not learning_study.finished(target):
        return None
    wanted = json.loads(json.dumps(config_to_dict(trainer_config(cfg, method, seed, out, lr_scale))))
    if same_experiment(json.loads((target / "config.json").read_text()), wanted):
        return target
    raise FileExistsError(f"{target} holds a finished run of another config: delete it to rerun")


def same_experiment(saved: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether a finished run's config.json is this run's: every key both configs have is equal (a key
    a later version of the trainer added, or dropped, with its default behaviour does not force a rerun)."""
    for section, values in wanted.items():
        old = saved.get(section, {})
        if any(key in old and old[key] != value for key, value in values.items()):
            return False
    return True


def run_arena(cfg: learning_study.StudyConfig, out: Path, log: Callable[[str], None] = print,
              reuse_only: bool = False, lr_scales: tuple[float, ...] | None = None) -> dict[str, Any]:
    """Warm start, then every (method, lr scale, seed) in a pool of cfg.jobs single-thread processes;
    ``reuse_only``: no new run, only the finished ones (a method keeps the seeds finished at every lr scale)."""
    scales = lr_scales or LR_SCALES
    if reuse_only:
        keys = [(m, lr, s) for s in range(cfg.seeds) for m in METHODS for lr in scales]
        found = {key: finished_run(cfg, key[0], key[2], key[1], out / "runs") for key in keys}
        runs = {key: path for key, path in found.items() if path is not None
                and all(found[(key[0], lr, key[2])] is not None for lr in scales)}
        if not any(m == "grpo" for m, _, _ in runs):
            raise ValueError(f"--lm-reuse-only: no finished GRPO seed at every lr scale under {out / 'runs'}")
        log(f"lm arena: reusing {len(runs)} finished runs, running none")
        return {"runs": runs, "seconds": 0.0, "config": dataclasses.asdict(cfg)}
    import torch

    from real_runs.lmstudy.warmstart import warm_start

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    torch.set_num_threads(cfg.jobs * cfg.threads)
    from real_runs.progress import phase
    with phase("warm start (cached after the first arena)", out=log, prefix="lm arena: "):
        warm_path = warm_start(cfg.warm, log=log)
    keys = [(m, lr, s) for s in range(cfg.seeds) for m in METHODS for lr in scales]
    with ProcessPoolExecutor(max_workers=cfg.jobs, mp_context=get_context("spawn")) as pool:
        futures = {key: pool.submit(run_one, cfg, key[0], key[2], key[1], out / "runs", warm_path) for key in keys}
        runs = counted(futures, log, f"{cfg.jobs} at a time; finished runs with the same config are reused")
    log(f"lm arena: {len(runs)} runs in {(time.perf_counter() - started) / 60:.1f} min")
    return {"runs": runs, "seconds": time.perf_counter() - started, "config": dataclasses.asdict(cfg)}


def counted(futures: dict[Any, Future[str]], log: Callable[[str], None], note: str = "",
            clock: Callable[[], float] = time.perf_counter) -> dict[Any, Path]:
    """Each future's run directory, in the order of ``futures``; one line before the first finishes
    and one as each finishes: ``lm arena: 3/30 runs, 12 min so far, about 1.8 h left (grpo lr 1 seed 0)``."""
    from real_runs.progress import Counter
    counter = Counter("lm arena", len(futures), "runs", out=log, prefix="", clock=clock)
    counter.start(note)
    names = {future: key for key, future in futures.items()}
    for future in as_completed(names):
        future.result()  # a failed run stops the arena here (its error, one line, by gdro arena)
        method, lr, seed = names[future]
        counter.advance(1, f"{method} lr {lr:g} seed {seed}")
    return {key: Path(future.result()) for key, future in futures.items()}


def run_digest(run_dir: Path, cfg: learning_study.StudyConfig) -> dict[str, float]:
    """Final held-out metrics (val/test mean and worst skill of mean@8) and per-step compute and time."""
    from gdro_lab.runformat.runlog import read_run

    run = read_run(run_dir)
    final = run.evals[-1]["metrics"]
    out: dict[str, float] = {}
    for split in SPLITS:
        values = [final[f"{source}/{split}/mean@{learning_study.EVAL_K}"] for source in skills(cfg)]
        out[f"{split}/accuracy"], out[f"{split}/worst_group_accuracy"] = float(np.mean(values)), float(np.min(values))
    active = run.steps > cfg.train_size // cfg.prompts_per_step  # after the first pass over the pool
    for name in ("zero_variance_frac", "compute/rollouts_generated", "compute/rollouts_trained",
                 "compute/tokens_generated", "time/step", "time/controllers"):
        series = run.scalars.get(name)
        out[name] = float(np.nanmean(series[active])) if series is not None and active.any() else float("nan")
    return out


def summarize(cfg: learning_study.StudyConfig, runs: dict[tuple[str, float, int], Path], setting: str,
              lr_scales: tuple[float, ...] | None = None) -> dict[str, Any]:
    """Tuned-lr gains on the test half, compute and time per step: markdown and decision lines."""
    scales = lr_scales or LR_SCALES
    digests = {key: run_digest(path, cfg) for key, path in runs.items()}
    seeds = sorted({s for _, _, s in digests})
    have = {m: [s for s in seeds if all((m, lr, s) in digests for lr in scales)] for m in METHODS}
    common = {m: [s for s in have[m] if s in have["grpo"]] for m in METHODS}
    missing = [f"{label} ({len(common[m])} seed{'s' * (len(common[m]) != 1)})" for m, (label, _) in METHODS.items()
               if len(common[m]) < len(seeds)]
    if any(not common[m] for m in METHODS):
        raise ValueError("LM arena: " + ", ".join(METHODS[m][0] for m in METHODS if not common[m])
                         + " has no finished seed shared with GRPO at every lr scale")

    def series(method: str, lr: float, name: str, of: str | None = None) -> np.ndarray:
        """Per seed (the seeds ``of``'s method shares with GRPO; default ``method``'s own)."""
        return np.array([digests[(method, lr, s)][name] for s in common[of or method]])

    tuned = {metric: {m: max(sorted(scales), key=lambda lr: (np.nanmean(series(m, lr, f"val/{metric}")), -lr))
                      for m in METHODS} for metric in ("accuracy", "worst_group_accuracy")}
    fewer = f"; fewer seeds: {', '.join(missing)}" if missing else ""
    gain_rows, stat_rows, decision = [], [], [f"arena decision (LM study, {setting}: held-out test half vs tuned GRPO, "
                                              f"{len(seeds)} paired seeds{fewer}, 95% intervals, pp):"]
    gains: dict[str, Any] = {}
    decision_rows = [f"    {'method':<26} {'Δ mean acc (pp)':>16} {'Δ worst-group (pp)':>20} {'zero-var share':>15} "
                     f"{'rollouts':>9} {'tokens ÷ GRPO':>14} {'s/step':>7}   (per step, lr 1; equal rollouts, "
                     "tokens differ)"]
    for m, (label, _) in METHODS.items():
        base = {k: series("grpo", 1.0, k, of=m) for k in ("compute/tokens_generated",)}
        row = [label]
        gains[m] = {}
        for metric in ("accuracy", "worst_group_accuracy"):
            diff = (series(m, tuned[metric][m], f"test/{metric}", of=m)
                    - series("grpo", tuned[metric]["grpo"], f"test/{metric}", of=m))
            mean, half = gains[m][metric] = mean_ci(diff)
            row.append(fmt(mean, half, digits=1, scale=100))
        row.append(f"{tuned['accuracy'][m]:g} / {tuned['accuracy']['grpo']:g}")
        gain_rows.append(row)
        s = {k: mean_ci(series(m, 1.0, k)) for k in ("zero_variance_frac", "compute/rollouts_generated",
                                                     "compute/rollouts_trained", "compute/tokens_generated",
                                                     "time/step", "time/controllers")}
        tokens_ratio = mean_ci(series(m, 1.0, "compute/tokens_generated", of=m) / base["compute/tokens_generated"])
        acc, worst = gains[m]["accuracy"], gains[m]["worst_group_accuracy"]
        decision_rows.append(f"    {label:<26} {fmt(*acc, digits=1, scale=100):>16} "
                             f"{fmt(*worst, digits=1, scale=100):>20} {fmt(*s['zero_variance_frac']):>15} "
                             f"{s['compute/rollouts_generated'][0]:>9.0f} {fmt(*tokens_ratio):>14} {s['time/step'][0]:>7.2f}")
        stat_rows.append([label, fmt(*s["zero_variance_frac"]), f"{s['compute/rollouts_generated'][0]:.0f}",
                          f"{s['compute/rollouts_trained'][0]:.0f}", f"{s['compute/tokens_generated'][0]:.0f}",
                          fmt(*tokens_ratio), f"{s['time/step'][0]:.2f}", f"{1000 * s['time/controllers'][0]:.1f}"])
    decision += decision_rows
    for metric, label in (("worst_group_accuracy", "worst-group held-out acc"), ("accuracy", "mean held-out acc")):
        above = [METHODS[m][0] for m in METHODS if m != "grpo" and gains[m][metric][0] - gains[m][metric][1] > 0]
        below = [METHODS[m][0] for m in METHODS if m != "grpo" and gains[m][metric][0] + gains[m][metric][1] < 0]
        decision.append(f"  LM          {label:<25} above tuned GRPO: {', '.join(above) or 'none'}; "
                        f"below: {', '.join(below) or 'none'}")
    markdown = [f"## LM study ({setting})", "",
                f"{len(METHODS)} methods × lr scales {{{', '.join(f'{v:.3g}' for v in scales)}}} "
                + ("(steps of 2x, coarser than the sqrt(2) grids of the simulator part: reduced for CPU) "
                   if tuple(scales) == COARSE_SCALES else "(sqrt(2) steps, as the simulator part's grids start) ")
                + 
                f"× {len(seeds)} seeds{fewer} "
                f"through the real trainer (`gdro train`'s loop, the CPU LM study's warm-started 0.5 M-parameter Qwen3 "
                f"on synthetic arithmetic): {cfg.steps} steps × {cfg.prompts_per_step} prompts over a "
                f"{cfg.train_size}-prompt pool (the first {cfg.train_size // cfg.prompts_per_step} steps are a pass "
                f"over unseen prompts, where every allocator plans n̄ = {cfg.n_bar}), base lr {cfg.lr:g}, one "
                f"evaluation at the end ({learning_study.EVAL_K} samples of each held-out problem; lr chosen on the val half, "
                "reported on the test half; the halves are alternating problems of the same five skills, sibling "
                "prompts the tuning never saw but of skills it did, as the suite has too few skills to split them). "
                f"Warm start: {cfg.warm.steps} steps × {cfg.warm.batch_size} problems (the default study's is "
                "2,000 × 128), so the model starts weaker. Equal rollouts per step in every run; the tokens they "
                "hold differ (tokens/step and its ratio to GRPO's): a method below 1 would gain further at equal "
                "tokens.", "",
                *markdown_table(["method", "Δ mean held-out acc vs tuned GRPO (pp)", "Δ worst-group held-out acc vs "
                                 "tuned GRPO (pp)", "tuned lr: method / GRPO"], gain_rows).splitlines(), "",
                "Compute and time at lr scale 1 (means after the first pass; time measured on the shared machine, "
                "provisional under load):", "",
                *markdown_table(["method", "zero-var share", "rollouts generated/step", "rollouts trained/step",
                                 "tokens generated/step", "tokens ÷ GRPO's", "s/step", "controllers ms/step"],
                                stat_rows).splitlines(), ""]
    return {"markdown": markdown, "decision": decision, "gains": gains, "tuned_lr": tuned,
            "digests": {f"{m}|{lr:g}|{s}": d for (m, lr, s), d in digests.items()}}


def main_arena(out: Path, quick: bool = False, jobs: int = 2, log: Callable[[str], None] = print,
               seeds: int | None = None, reuse_only: bool = False, coarse: bool = False) -> Path:
    """Run (or reuse) the LM arena under ``out/lm`` and write ``out/lm-arena.json``; returns its path.
    ``seeds`` overrides the setting's number of seeds, ``coarse`` the grid (COARSE_SCALES): a reduced
    setting, stated."""
    base = QUICK if quick else ARENA
    cfg = dataclasses.replace(base, jobs=jobs, seeds=seeds or base.seeds)
    scales = COARSE_SCALES if coarse else LR_SCALES
    result = run_arena(cfg, out / "lm", log=log, reuse_only=reuse_only, lr_scales=scales)
    reduced = [f"{cfg.seeds} seeds instead of {base.seeds}"] * (cfg.seeds < base.seeds) + ["lr steps of 2x"] * coarse
    setting = "QUICK setting, not evidence" if quick else ("reduced setting" if reduced else "full setting")
    setting += "".join(f", {part}" for part in reduced)
    if reuse_only:
        setting += ", finished runs only"
    summary = summarize(cfg, result["runs"], setting, lr_scales=scales)
    summary["seconds"] = result["seconds"]
    summary["seeds"], summary["default_seeds"], summary["reuse_only"] = cfg.seeds, base.seeds, reuse_only
    summary["coarse"] = coarse
    summary["setting"] = setting
    path = out / "lm-arena.json"
    path.write_text(json.dumps(summary, indent=1, default=float), encoding="utf-8")
    return path
