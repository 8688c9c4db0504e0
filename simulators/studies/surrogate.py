"""Study `surrogate`: the entropic GDRO surrogate (Lemma 4.1) and the no-regret game (Eq. 27).

Part 1 (exact): R_eta against max_b L_b and the bound max_b L_b <= R_eta <= max_b L_b + log(B)/eta,
with d R_eta / d L = q_eta (Eq. 26). Part 2: projected SGD against exponential weights on a
convex-concave game; the duality gap of the averaged iterates against (Reg_theta + Reg_q) / T.
Detail: docs/studies-notes.md#simulators-studies-surrogate.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from gdro_lab import RunWriter, StepFeedback
from gdro_lab.functional.update_rules import entropic_weights, log_sum_exp_surrogate
from gdro_lab.runformat.record import step_record
from simulators.parallel import run_jobs
from simulators.reporting import prepare_output
from simulators.studies.common import StudySettings
from simulators.world import WorldConfig, make_world
from studykit.claims import MATH, Measurement, claim_rows, claims_markdown, claims_text
from studykit.plots import save_figure
from studykit.stats import mean_ci
from studykit.tables import fmt, markdown_table, write_json

DEFAULTS: dict[str, Any] = {"seeds": 5, "steps": 3000, "prompts": 2000, "batch": 80, "methods": ()}
GROUPS = 10
BOX = 6.0


@dataclass(frozen=True)
class GameConfig:
    """One learner-vs-adversary game on a sampled world."""

    seed: int
    steps: int
    prompts: int = 2000
    groups: int = GROUPS
    prompts_per_group: int = 8
    rollouts: int = 4
    learner_step: float = 2.0
    adversary_step: float = 2.0
    box: float = BOX
    checkpoints: int = 24


class GroupLosses:
    """L_b(theta) = mean_{i in b} -log sigmoid(s0 + s_b - d_i) and its gradient (exact)."""

    def __init__(self, group_P: np.ndarray, difficulty_P: np.ndarray, groups: int):
        self.group_P = group_P
        self.difficulty_P = difficulty_P
        self.groups = groups
        self.sizes = np.bincount(group_P, minlength=groups).astype(float)

    def losses(self, theta: np.ndarray) -> np.ndarray:
        z = theta[0] + theta[1:][self.group_P] - self.difficulty_P
        return np.bincount(self.group_P, weights=-log_expit(z), minlength=self.groups) / self.sizes

    def weighted(self, theta: np.ndarray, q: np.ndarray) -> tuple[float, np.ndarray]:
        """f(theta, q) and its gradient."""
        z = theta[0] + theta[1:][self.group_P] - self.difficulty_P
        L = np.bincount(self.group_P, weights=-log_expit(z), minlength=self.groups) / self.sizes
        dz = -(1.0 - expit(z))
        dL = np.bincount(self.group_P, weights=dz, minlength=self.groups) / self.sizes
        grad = np.concatenate([[float(q @ dL)], q * dL])
        return float(q @ L), grad

    def best_response(self, q: np.ndarray, box: float) -> float:
        """min_theta f(theta, q) over the box (convex; L-BFGS-B)."""
        x0 = np.zeros(self.groups + 1)
        result = minimize(self.weighted, x0, args=(q,), jac=True, method="L-BFGS-B",
                          bounds=[(-box, box)] * (self.groups + 1), options={"ftol": 1e-13, "gtol": 1e-10})
        return float(result.fun)


def play(config: GameConfig, out_dir: str) -> dict[str, Any]:
    """Run one game, log it as a run directory, and return its checkpoint series."""
    seeds = np.random.SeedSequence(config.seed).spawn(2)
    world = make_world(WorldConfig(num_prompts=config.prompts, num_groups=config.groups),
                       np.random.default_rng(seeds[0]))
    rng = np.random.default_rng(seeds[1])
    game = GroupLosses(world.group_P, world.difficulty_P, config.groups)
    members = [np.flatnonzero(world.group_P == b) for b in range(config.groups)]
    B, m, n = config.groups, config.prompts_per_group, config.rollouts
    theta = np.zeros(B + 1)
    q = np.full(B, 1.0 / B)
    cumulative_L = np.zeros(B)
    theta_sum, q_sum, played = np.zeros(B + 1), np.zeros(B), 0.0
    checkpoints = set(np.unique(np.geomspace(10, config.steps, config.checkpoints).astype(int)).tolist())
    series: dict[str, list[float]] = {k: [] for k in ("t", "gap", "bound", "reg_theta", "reg_q")}
    writer = RunWriter(out_dir, {"game": asdict(config), "producer": "gdro-lab simulator (surrogate game)"},
                       B, "gdro-lab simulator", [f"group_{b}" for b in range(B)])
    for t in range(1, config.steps + 1):
        L = game.losses(theta)
        theta_sum += theta
        q_sum += q
        played += float(q @ L)
        cumulative_L += L
        # Learner: sampled rollouts of m prompts per group, unbiased gradient of f(theta, q).
        index = np.concatenate([rng.choice(members[b], m) for b in range(B)])
        p = expit(theta[0] + theta[1:][world.group_P[index]] - world.difficulty_P[index])
        successes = rng.random((index.size, n)) < p[:, None]
        dz = -(1.0 - successes.mean(axis=1))
        dL = dz.reshape(B, m).mean(axis=1)
        grad = np.concatenate([[float(q @ dL)], q * dL])
        counts = np.full(index.size, n)
        feedback = StepFeedback([f"p{i:05d}" for i in index], world.group_P[index], counts,
                                2.0 * successes.ravel() - 1.0, successes.ravel())
        scalars, rows = step_record(feedback, B, n_bar=n, n_min=n, n_max=n, weights_G=q)
        scalars.update({"game/max_loss": float(L.max()), "game/weighted_loss": float(q @ L)})
        rows["signal"] = L
        writer.log_step(t, scalars, rows)
        theta = np.clip(theta - config.learner_step / np.sqrt(t) * grad, -config.box, config.box)
        q = entropic_weights(cumulative_L, config.adversary_step / np.sqrt(t), 0.0, 1e12)
        if t in checkpoints:
            theta_bar, q_bar = theta_sum / t, q_sum / t
            best = game.best_response(q_bar, config.box)
            gap = float(game.losses(theta_bar).max() - best)
            reg_q = float(cumulative_L.max() - played)
            reg_theta = float(played - t * best)
            point = {"t": t, "gap": gap, "bound": (reg_theta + reg_q) / t, "reg_theta": reg_theta / t,
                     "reg_q": reg_q / t}
            for k, v in point.items():
                series[k].append(float(v))
            writer.log_eval(t, {"duality_gap": gap, "regret_bound": point["bound"],
                                "avg_regret_theta": point["reg_theta"], "avg_regret_q": point["reg_q"],
                                "max_group_loss_avg_iterate": float(game.losses(theta_bar).max())})
        if t == config.steps:
            writer.save_snapshot(t, {"learner": {"theta": theta, "theta_sum": theta_sum},
                                     "adversary": {"q": q, "q_sum": q_sum, "cumulative_loss": cumulative_L},
                                     "rng": rng.bit_generator.state})
    writer.close()
    _tick(config.steps)
    return {"seed": config.seed, "series": series, "initial_losses": game.losses(np.zeros(B + 1)).tolist()}


def _tick(n: int) -> None:
    from simulators import parallel
    parallel._bump(n)


def sandwich(loss_sets: list[np.ndarray], etas: np.ndarray) -> dict[str, Any]:
    """R_eta - max L per loss set and eta; violations of the two bounds; Eq. 26 gradient check."""
    gaps, violations, grad_err, weight_err = [], 0, 0.0, 0.0
    for L in loss_sets:
        B = L.size
        R = np.array([log_sum_exp_surrogate(L, eta)[0] for eta in etas])
        gap = R - L.max()
        violations += int(np.sum(gap < -1e-12) + np.sum(gap > np.log(B) / etas + 1e-12))
        gaps.append(gap)
        for eta in (0.5, 5.0, 50.0):
            q = log_sum_exp_surrogate(L, eta)[1]
            weight_err = max(weight_err, float(np.abs(entropic_weights(L, eta, 0.0, 1e12) - q).max()))
            h = 1e-6
            fd = np.array([(log_sum_exp_surrogate(L + h * e, eta)[0] - log_sum_exp_surrogate(L - h * e, eta)[0])
                           / (2 * h) for e in np.eye(B)])
            grad_err = max(grad_err, float(np.abs(fd - q).max()))
    return {"gaps": np.array(gaps), "violations": violations, "gradient_error": grad_err,
            "weights_error": weight_err}


def run(settings: StudySettings) -> Path:
    settings.validate()
    out = prepare_output(settings.out)
    start = time.perf_counter()
    configs = [GameConfig(seed=s, steps=settings.steps, prompts=settings.prompts,
                          prompts_per_group=max(1, settings.batch // GROUPS)) for s in range(settings.seeds)]
    jobs = [(c, out / "runs" / "game" / f"seed{c.seed}") for c in configs]
    games = run_jobs(jobs, workers=settings.workers, progress=settings.progress, description="surrogate",
                     job=play)
    etas = np.geomspace(0.01, 1000, 61)
    losses = [np.asarray(g["initial_losses"]) for g in games]
    rng = np.random.default_rng(0)
    losses += [rng.exponential(1.0, size=b) for b in (2, 10, 32, 100) for _ in range(5)]
    check = sandwich(losses, etas)
    return write_report(out, games, check, etas, time.perf_counter() - start, configs[0])


def claims(violations: int, above: int, checkpoints: int) -> list[dict[str, str]]:
    """Lemma 4.1 (sandwich violations) and Eq. 27 (checkpoints with the gap above the bound), both counts."""
    measured = {
        "lemma41": Measurement("lemma41", float(violations), 0.0, "sandwich violations (count)", MATH,
                               f"{violations} violations over every loss vector and eta checked"),
        "eq27": Measurement("eq27", float(above), 0.0, "runs with the gap above the bound (count)", MATH,
                            f"{above} of {checkpoints} checkpoints (all seeds) above (Reg_theta + Reg_q) / T"),
    }
    from simulators.studies.paper_claims import UNTESTED
    untested = {k: v for k, v in UNTESTED.items() if k not in measured}
    others = ("pgdro_pass8", "rgdro_pass8", "pgdro_mean8", "rgdro_mean8", "toy_wg_gain", "toy_ema_vs_class",
              "toy_support", "wave", "frontier_weights", "leadlag_early", "leadlag_decays", "wse", "budget_shift",
              "economics")
    untested.update({k: "the curriculum and sqrt-law studies measure it" for k in others})
    return claim_rows(measured, untested)


def _slope(t: np.ndarray, gap: np.ndarray, t_min: float) -> float:
    keep = (t >= t_min) & (gap > 0)
    if keep.sum() < 3:
        return float("nan")
    return float(np.polyfit(np.log(t[keep]), np.log(gap[keep]), 1)[0])


def write_report(out: Path, games: list[dict[str, Any]], check: dict[str, Any], etas: np.ndarray, wall: float,
                 config: GameConfig) -> Path:
    t = np.asarray(games[0]["series"]["t"])
    gap = np.stack([g["series"]["gap"] for g in games])
    bound = np.stack([g["series"]["bound"] for g in games])
    slopes = np.array([_slope(t, row, 100) for row in gap])
    slope_mean, slope_half = (float(v) for v in mean_ci(slopes))
    holds = bool(np.all(gap <= bound + 1e-9))
    rows_claims = claims(check["violations"], int(np.sum(gap > bound + 1e-9)), gap.size)
    scaled = gap * np.sqrt(t)[None, :]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for row, L in zip(check["gaps"][:len(games)], range(len(games))):
        axes[0].loglog(etas, np.maximum(row, 1e-16), lw=1, label=f"world seed {L}" if L < 3 else None)
    axes[0].loglog(etas, np.log(config.groups) / etas, "k--", label="log(B)/η bound")
    axes[0].set_xlabel("η")
    axes[0].set_ylabel("R_η − max_b L_b")
    axes[0].set_title("entropic surrogate (Lemma 4.1)")
    axes[0].legend(fontsize=7)
    mean, half = mean_ci(gap)
    axes[1].loglog(t, mean, "o-", ms=3, label="duality gap of averaged iterates")
    axes[1].fill_between(t, np.maximum(mean - half, 1e-6), mean + half, alpha=0.2)
    axes[1].loglog(t, np.mean(bound, axis=0), "s-", ms=3, label="(Reg_θ + Reg_q)/T (Eq. 27)")
    axes[1].loglog(t, mean[-1] * np.sqrt(t[-1] / t), "k--", lw=1, label="∝ 1/√T")
    axes[1].set_xlabel("T (game iterations)")
    axes[1].set_title(f"no-regret game, {len(games)} seeds (95% CI)")
    axes[1].legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    figure = save_figure(fig, out / "fig_surrogate.png")
    rows = [[int(t[i]), fmt(*mean_ci(gap[:, i]), 4), fmt(*mean_ci(bound[:, i]), 4), fmt(*mean_ci(scaled[:, i]), 3)]
            for i in range(0, t.size, max(1, t.size // 8))] + [[int(t[-1]), fmt(*mean_ci(gap[:, -1]), 4),
                                                                 fmt(*mean_ci(bound[:, -1]), 4),
                                                                 fmt(*mean_ci(scaled[:, -1]), 3)]]
    write_json(out / "summary.json", {"study": "surrogate", "wall_s": wall, "game": asdict(config),
                                      "slope": [slope_mean, slope_half], "slopes": slopes.tolist(),
                                      "gap_below_bound_everywhere": holds,
                                      "sandwich_violations": check["violations"],
                                      "gradient_error": check["gradient_error"],
                                      "weights_error": check["weights_error"],
                                      "checkpoints": t.tolist(), "gap_mean": mean.tolist(), "claims": rows_claims})
    (out / "decision.txt").write_text("paper claims (reproduced / refuted only on the paper's own metric and scale; "
                                      "otherwise direction only):\n" + claims_text(rows_claims) + "\n", encoding="utf-8")
    verdict = ("decays like 1/√T or faster" if np.isfinite(slope_mean) and slope_mean + (slope_half if np.isfinite(slope_half) else 0) <= -0.45
               else "does not clearly decay like 1/√T")
    lines = [
        "# Study `surrogate`: the entropic surrogate and the no-regret game",
        "",
        f"Wall time {wall:.0f} s. Seed means ± 95% t-intervals over {len(games)} seeds.",
        "",
        "## Lemma 4.1: max_b L_b ≤ R_η ≤ max_b L_b + log(B)/η",
        "",
        f"Checked on {len(check['gaps'])} loss vectors (the initial per-group log-losses of {len(games)} sampled "
        f"worlds with B = {config.groups}, plus random exponential losses with B ∈ {{2, 10, 32, 100}}) at "
        f"{etas.size} values of η from {etas[0]:g} to {etas[-1]:g}: **{check['violations']} violations**. "
        f"The maximiser q_η = softmax(ηL) equals gdro_lab's `entropic_weights` (γ = 0) to "
        f"{check['weights_error']:.1e}, and the gradient dR_η/dL = q_η (Eq. 26) matches finite differences to "
        f"{check['gradient_error']:.1e}. The bound is tight for small η (R_η − max → log(B)/η when the losses are "
        "close) and R_η → max_b L_b as η grows: η trades smoothness for fidelity to the worst group.",
        "",
        "## Eq. 27: duality gap of the averaged iterates",
        "",
        f"Game on B = {config.groups} latent groups, learner = projected SGD on sampled rollouts "
        f"({config.prompts_per_group} prompts × {config.rollouts} rollouts per group per step, step "
        f"{config.learner_step}/√t), adversary = exponential weights on exact group losses (step "
        f"{config.adversary_step}/√t), θ in the box [−{config.box:g}, {config.box:g}]^{config.groups + 1}.",
        "",
        markdown_table(["T", "duality gap", "(Reg_θ + Reg_q)/T", "gap × √T"], rows),
        "",
        f"- Fitted log-log slope of the gap over T ≥ 100: **{fmt(slope_mean, slope_half, 2)}** "
        f"(1/√T is −0.5): the gap {verdict}.",
        f"- The gap stays below the regret bound (Eq. 27) at every checkpoint of every seed: **{holds}**.",
        "- This is the convex–concave case the theorem covers (log-loss of a logistic model, a box). "
        "The training runs of the other studies are not convex in this sense (GRPO's normalised "
        "advantages do not follow the gradient of any fixed loss), so there the game is a principle, "
        "as the paper says.",
        "",
        f"![surrogate]({figure})",
        "",
        "## Paper claims",
        "",
        "Every claim of the paper's §4-5. The two theorems are tested here on their own terms (any losses, any "
        "instance of the game), so they can be *reproduced*; the rest is for the other studies:",
        "",
        *claims_markdown(rows_claims),
        "",
        "Run directories: `runs/game/seed<k>/` (steps: sampled feedback and the adversary's q per group; "
        "eval.jsonl: the gap and regrets at the checkpoints).",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
