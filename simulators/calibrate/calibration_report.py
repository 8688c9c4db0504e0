"""The calibration's report: every fitted parameter with its 95% interval and how well the data pin it,
the fit's quality, and two figures (pass-rate histogram and learning curves, fitted vs observed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from simulators.calibrate import initial_difficulty as stage1
from simulators.calibrate import dynamics as stage2
from simulators.calibrate import lengths as lengths_fit
from studykit.plots import save_figure
from studykit.tables import markdown_table

MEANING = {
    "difficulty_offset": "d0: logit difficulty of the easiest prompts",
    "group_difficulty_scale": "c_g: scale of the group hardness",
    "group_difficulty_tail": "alpha_g: Lomax tail of the group hardness",
    "prompt_difficulty_scale": "c_p: scale of the prompt hardness",
    "prompt_difficulty_tail": "alpha_p: Lomax tail of the prompt hardness",
    "unsolvable_frac": "never-solved mass",
    "always_solved_frac": "always-solved mass",
    "size_exponent": "Zipf exponent of the group sizes",
    "size_difficulty_corr": "rank correlation of rarity and hardness",
    "lr_group": "step size of the group skills (at the reference lr)",
    "lr_prompt": "step size of the prompt skills: memorisation",
    "curvature": "price of a step: forgetting per unit dz^2",
    "score_noise": "tau: correctness-unrelated score noise",
    "transfer": "positive cross-group transfer",
    "update_noise": "update noise per unit step",
}


def _num(value: float) -> str:
    return f"{value:.3g}"


def parameter_rows(record: dict[str, Any]) -> list[list[str]]:
    """Per parameter: meaning, posterior median (world.toml's value), 95% interval, best fit, identification."""
    rows = []
    notes = record["identification"]
    for stage in ("difficulty", "dynamics"):
        fit = record[stage] or {"values": {}}
        for name, best in fit["values"].items():
            if name not in fit["intervals"] or name == "lr_shared":
                continue
            lo, hi = fit["intervals"][name]
            median = fit.get("medians", {}).get(name)
            rows.append([f"`{name}`", MEANING.get(name, ""), "-" if median is None else _num(median),
                         f"[{_num(lo)}, {_num(hi)}]", _num(best), notes.get(name, "")])
    if record["dynamics"]:
        rows.append(["`lr_shared`", "step size of the shared skill", f"= {stage2.SHARED_RATIO} lr_group", "", "",
                     "fixed ratio (not identifiable apart from transfer)"])
    return rows


def passrate_figure(record: dict[str, Any], out: Path) -> str:
    """Observed histogram of c/n per group and pooled, with the fitted mixture's probabilities."""
    fit = record["_objects"]["difficulty"]
    names = list(fit.group_names)
    panels = names + ["all groups"] if len(names) > 1 else names
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.9 * rows), squeeze=False)
    n = max(fit.table)
    observed = fit.table[n]
    expected = stage1.count_pmf(fit.values, fit.ranks_K, n) * observed.sum(axis=1, keepdims=True)
    for ax, name in zip(axes.flat, panels):
        rows_k = slice(None) if name == "all groups" else names.index(name)
        obs = np.atleast_2d(observed[rows_k]).sum(axis=0)
        exp = np.atleast_2d(expected[rows_k]).sum(axis=0)
        x = np.arange(n + 1) / n
        ax.bar(x, obs / obs.sum(), width=0.8 / n, color="0.7", label="observed")
        ax.plot(x, exp / exp.sum(), "o-", color="C3", ms=3, label="fitted")
        ax.set_title(f"{name} ({int(obs.sum())} prompts)", fontsize=9)
        ax.set_xlabel(f"successes / {n}", fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    axes.flat[0].set_ylabel("share of prompts")
    fig.suptitle("Pass rates on the sample: observed vs the fitted world (stage 1)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out / "fig_passrate.png")


def curves_figure(record: dict[str, Any], out: Path) -> str:
    """Per lr: training-batch success (blocks) and held-out accuracy, observed vs fitted world."""
    dyn_obj = record["_objects"]["dynamics"]
    dyn = record["dynamics"]
    lrs, block = np.array(dyn["lrs"]), dyn["block"]
    obs, sim = dyn_obj.observed, dyn_obj.simulated
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.6))
    centres = (np.arange(obs.success_LB.shape[1]) + 0.5) * block
    level = dyn["offsets"][-1]
    held_steps = np.array(dyn["eval_steps"])
    held_obs = np.nanmean(obs.heldout_LEK, axis=2)
    held_sim = (sim.delta[0] + np.array(dyn["offsets"][:-1])).mean(axis=2)
    for j, lr in enumerate(lrs):
        color = f"C{j}"
        axes[0].plot(centres, obs.success_LB[j], "o", color=color, ms=3)
        axes[0].plot(centres, sim.success[0, j] + level, "-", color=color, label=f"lr {lr:g}")
        axes[1].plot(held_steps, held_obs[j], "o", color=color, ms=4)
        axes[1].plot(held_steps, held_sim[j], "-", color=color, label=f"lr {lr:g}")
    axes[0].set(xlabel="step", ylabel="training-batch success", title=f"training batches ({block}-step blocks)")
    axes[1].set(xlabel="step", ylabel="held-out accuracy (mean over groups)", title="held-out")
    axes[0].legend(fontsize=8)
    fig.suptitle("Learning curves per lr: dots observed, lines the fitted world (mean of the fit's seeds)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out / "fig_curves.png")


def write_report(record: dict[str, Any], out: Path, command: str) -> Path:
    plan = record["plan"]
    diff = record["difficulty"]
    lines = ["# Calibration report", "", f"Command: `{command}`", "",
             f"Sample: {int(np.sum(diff['sizes']))} prompts in {len(diff['groups'])} groups "
             f"({', '.join(diff['groups'])}). Planned run: {plan['pool_size']} prompts, {plan['batch']} per step, "
             f"{plan['steps']} steps, n̄ = {plan['n_bar']} ({plan['n_min']}..{plan['n_max']}), reference lr "
             f"{plan['lr']:g}, optimizer {plan['optimizer']}.", "",
             "The fitted world is `world.toml` (`gdro simulate --config world.toml`); `gdro predict world.toml` runs the "
             "methods in it, drawing its parameters from the intervals below. Intervals: 95%, posterior draws under a "
             "flat prior (stage 1: the exact pass-count likelihood; stage 2: a Gaussian synthetic likelihood of the "
             "learning curves). docs/calibration.md says how well they cover the truth on known worlds.", "",
             "## Parameters", "",
             markdown_table(["parameter", "meaning", "posterior median (world.toml)", "95% interval", "best fit",
                             "identified by these data?"],
                            parameter_rows(record)), ""]
    weak = [n for n, note in record["identification"].items() if note.startswith("weak")]
    lines += [f"**Weakly identified by these data**: {', '.join(f'`{n}`' for n in weak) or 'none'}. A prediction that "
              "depends on them is only as good as the range the posterior draws cover (`gdro predict` moves each "
              "parameter across its interval and says which ones decide its verdict). The world file holds the "
              "posterior medians; the best fit (highest likelihood) can sit outside its own interval when it lies in "
              "a corner of a ridge that the posterior mass avoids.", "",
              "## Stage 1: pass rates", "", f"![pass rates]({passrate_figure(record, out)})", ""]
    if record["dynamics"]:
        dyn = record["dynamics"]
        lines += ["## Stage 2: learning curves", "",
                  f"Reduced chi² of the curve fit: {dyn['chi2_red']:.2f} on {dyn['dof']} degrees of freedom (1 = the "
                  "world explains the curves up to their noise; larger = systematic misfit, which the intervals "
                  "absorb as extra noise).", "", f"![curves]({curves_figure(record, out)})", "",
                  "ScaleRL's sigmoid (arXiv 2510.13786) of each sweep run's batch success against the rollouts "
                  "consumed, R0 + (A - R0) / (1 + (C_mid / C)^B) (a second opinion beside the world's):", "",
                  markdown_table(["lr", "R0", "asymptote A", "exponent B", "C_mid (rollouts)", "rmse"],
                                 [[f"{f['lr']:g}", f"{f['R0']:.3f}", f"{f['A']:.3f}", f"{f['B']:.2f}",
                                   f"{f['C_mid']:,.0f}", f"{f['rmse']:.3f}"] for f in record.get("scaling", [])]), ""]
    else:
        lines += ["## Stage 2: not fitted", "", "No learning-rate sweep was given (`--sweep`): the learning speed, the "
                  "price of a step, the score noise and the transfer are the simulator's defaults, not measured.", ""]
    lines += length_lines(record)
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def length_lines(record: dict[str, Any]) -> list[str]:
    """The length model's section: the fitted fields with the OLS check, or why the defaults stay."""
    fit = record.get("lengths")
    if not fit:
        return ["## Response lengths: not fitted", "", "The samples carry no token counts (`tokens`, written by "
                "`gdro eval --save-samples` since the length model): the world keeps the simulator's default length "
                "model, with `lengths` off as by default.", ""]
    v, o = fit["values"], fit["ols"]
    rows = [[f"`{n}`", _num(v[n]), _num(o[n])] for n in lengths_fit.FIELDS]
    return ["## Response lengths", "", f"Fitted by maximum likelihood to {fit['responses']:,} responses' token counts "
            f"(log L = a + b (1 - p) + c (1 - y) + s N(0, 1), rounded, cut at max_new_tokens = {v['max_new_tokens']}: "
            f"{100 * fit['at_cap']:.1f}% of the responses sit there; docs/calibration.md); world.toml turns `lengths` "
            "on with them. OLS on log tokens ignores the rounding and the cap: a check, close when few are cut.", "",
            markdown_table(["parameter", "maximum likelihood (world.toml)", "OLS on log tokens"], rows), ""]


ROOT = Path(__file__).resolve().parents[2]


def update_between(path: Path, name: str, text: str) -> None:
    """Replace what lies between ``<!-- calibration:NAME -->`` and ``<!-- /calibration:NAME -->`` in ``path``.

    The generated tables live in the docs between these markers, so the docs cannot drift from the
    reports (tests/simulators/calibrate/test_sim_calibrate_docs.py). A file without the markers is a ConfigError.
    """
    from gdro_lab import ConfigError

    start, end = f"<!-- calibration:{name} -->", f"<!-- /calibration:{name} -->"
    content = path.read_text(encoding="utf-8")
    if content.count(start) != 1 or content.count(end) != 1 or content.index(start) > content.index(end):
        raise ConfigError(f"{path}: needs one '{start}' ... '{end}' pair to update (restore it from git)")
    head, rest = content.split(start)
    _, tail = rest.split(end)
    path.write_text(f"{head}{start}\n{text.strip()}\n{end}{tail}", encoding="utf-8")
