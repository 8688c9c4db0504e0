"""Every claim of the paper's results (docs/paper.md §4-5) and how a study's number is judged against it.

A study prints one line per claim of :data:`CLAIMS`: **reproduced / refuted / inconclusive** only on the
paper's own metric and scale; **direction only, agrees / opposite / unresolved** otherwise; **untested**
when not measured. No study here runs the paper's models on its benchmarks, so benchmark gains are
"direction only" at best. The rules: docs/studies-notes.md#studykit-claims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

PAPER_RUNS = "Qwen3-1.7B/4B/8B-Base on DAPO-Math, scored on the math benchmarks"
PAPER_TOY = "the paper's toy study on MATH groups"
MATH = "mathematics (holds for any losses)"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: what it says, its number, and on what it was measured."""

    key: str
    text: str
    paper: str
    """The paper's number and where it is (quoted next to every measurement)."""
    metric: str
    """The quantity and unit the paper's number is in."""
    evidence: str
    """What it was measured on (PAPER_RUNS, PAPER_TOY, MATH)."""
    sign: int = 1
    """+1: the paper says the quantity is above ``null``; -1: below."""
    null: float = 0.0
    low: float | None = None
    high: float | None = None
    """The paper's range on its metric, when it claims a size."""


CLAIMS: tuple[Claim, ...] = (
    Claim("pgdro_pass8", "Prompt-GDRO raises pass@8 over GRPO",
          "+8.96 to +13.13% relative pass@8 (mean +10.6%), Table 1", "relative pass@8 gain (%)", PAPER_RUNS,
          low=8.96, high=13.13),
    Claim("rgdro_pass8", "Rollout-GDRO raises pass@8 over GRPO at equal rollouts",
          "+9.20 to +10.64% relative pass@8 (mean +10.1%), Table 1", "relative pass@8 gain (%)", PAPER_RUNS,
          low=9.20, high=10.64),
    Claim("pgdro_mean8", "Prompt-GDRO raises mean accuracy (mean@8, pass@1) over GRPO",
          "+3.3 to +5.6 pp mean@8 averaged over the six benchmarks (derived from Table 1)", "mean@8 gain (pp)",
          PAPER_RUNS, low=3.3, high=5.6),
    Claim("rgdro_mean8", "Rollout-GDRO raises mean accuracy (mean@8, pass@1) over GRPO",
          "+2.5 to +5.5 pp mean@8 averaged over the six benchmarks (derived from Table 1)", "mean@8 gain (pp)",
          PAPER_RUNS, low=2.5, high=5.5),
    Claim("toy_wg_gain", "EMA-debiased Prompt-GDRO raises worst-group pass@1 over GRPO (toy study)",
          "33.92% -> 39.6%: +5.7 pp", "worst-group pass@1 gain (pp)", PAPER_TOY, low=5.7, high=5.7),
    Claim("toy_ema_vs_class", "EMA-debiased Prompt-GDRO beats class-based GDRO in the worst group (toy study)",
          "37.7% -> 39.6%: +1.9 pp", "worst-group pass@1 gain (pp)", PAPER_TOY, low=1.9, high=1.9),
    Claim("toy_support", "class-based GDRO collapses to a narrow support, EMA-debiased keeps a broad one (toy study)",
          "~12 vs ~24 groups (no formula given)", "effective support difference (groups)", PAPER_TOY,
          low=12.0, high=12.0),
    Claim("wave", "the prompt mass travels from the hard to the solvable bins; the mean bin index climbs (Fig. 3-4)",
          "1.7B mean index climbs past 2.0 (plots only)", "rise of the data's mean bin index (bins)", PAPER_RUNS),
    Claim("wave_profiles", "per-model end profiles of the wave (Fig. 3, 5)",
          "1.7B ~45% in accbin_0 at step 605; 4B >50% in accbin_5-7 by step 366; 8B accbin_0 nearly empty",
          "bin-mass shares (%)", PAPER_RUNS),
    Claim("weight_entropy", "Prompt-GDRO's weight entropy stabilises (Fig. 4)", "4B: by step 366 (plots only)",
          "weight entropy over steps", PAPER_RUNS),
    Claim("frontier_weights", "the adversary's weight sits on the solvable 'learnable frontier' bins (Fig. 1)",
          "bins 6-8 of 10, tail average over steps >= 60th percentile (plots only)",
          "adversary's mean weighted bin index above the middle bin (bins)", PAPER_RUNS),
    Claim("leadlag_early", "lead-lag gap (Eq. 32) strongly positive early in training (Fig. 6a)",
          "positive early (plots only)", "lead-lag gap, first quarter of the binned steps (bins)", PAPER_RUNS),
    Claim("leadlag_decays", "the lead-lag gap decays over training (8B ends slightly negative; Fig. 6a)",
          "decays, faster at larger scale (plots only)", "lead-lag gap, first minus last quarter (bins)", PAPER_RUNS),
    Claim("wse", "Rollout-GDRO cuts the weighted SE proxy (Eq. 33) at equal compute",
          "22.6% (4B) to 37.1% (1.7B) mean reduction over the plotted horizon", "WSE reduction (%)", PAPER_RUNS,
          low=22.6, high=37.1),
    Claim("budget_shift", "Rollout-GDRO's budget moves toward the high bins (>= 7 of 10) over training (Fig. 7-8)",
          "'steadily reallocates toward bins >= 7' (plots only)",
          "budget share on the high bins, last minus first quarter (pp)", PAPER_RUNS),
    Claim("economics", "Rollout-GDRO spends far more per prompt on bins >= 5 than uniform allocation (Fig. 9)",
          "4B at step 300: >80% of the budget on <20% of the prompts (>4x; '5-10x' in the text)",
          "rollouts per prompt on bins >= 5 over n_bar (x)", PAPER_RUNS, null=1.0, low=4.0, high=10.0),
    Claim("six_bins", "about 6 bins work better than 10 (preliminary sweeps, not robust)",
          "'often peaked around ~6 bins' (no numbers)", "effect of 10 vs 6 bins (pp)", PAPER_RUNS, sign=-1),
    Claim("overhead", "the controllers' driver-side cost per step", "0.043 / 0.355 / 0.446 s per step (GRPO / "
          "Prompt-GDRO / Rollout-GDRO, 4B; ~8x and ~10x)", "advantage-stage seconds per step", PAPER_RUNS),
    Claim("lemma41", "Lemma 4.1: max_b L_b <= R_eta <= max_b L_b + log B / eta (entropic surrogate sandwich)",
          "a theorem", "sandwich violations (count)", MATH, sign=-1, null=0.5),
    Claim("eq27", "Eq. 27: the game gap of averaged iterates is at most (Reg_theta + Reg_q) / T",
          "a bound (convex-concave case)", "runs with the gap above the bound (count)", MATH, sign=-1, null=0.5),
    Claim("thm42", "Thm 4.2: the square-root (Neyman) law minimises Eq. 28 at a fixed mean budget",
          "a theorem", "gap to the optimum", MATH),
)
BY_KEY = {c.key: c for c in CLAIMS}


@dataclass(frozen=True)
class Measurement:
    """What a study measured for one claim: mean ± half (95%), in ``metric`` on ``evidence``."""

    key: str
    mean: float
    half: float
    metric: str
    evidence: str
    number: str
    """The measurement in words, e.g. '+0.7 ± 0.2 pp held-out pass@1 vs tuned GRPO'."""


def verdict(claim: Claim, measured: Measurement) -> str:
    """reproduced / refuted / inconclusive on the paper's own metric and scale, else direction only."""
    mean, half = float(measured.mean), float(measured.half)
    lo, hi = mean - half, mean + half
    defined = math.isfinite(lo) and math.isfinite(hi)
    agrees = defined and claim.sign * (lo - claim.null) > 0 and claim.sign * (hi - claim.null) > 0
    opposite = defined and claim.sign * (lo - claim.null) < 0 and claim.sign * (hi - claim.null) < 0
    same_scale = measured.metric == claim.metric and claim.evidence in (measured.evidence, MATH)
    if not same_scale:
        return "direction only, " + ("agrees" if agrees else "opposite" if opposite else "unresolved")
    if not defined:
        return "inconclusive"
    if claim.low is not None and claim.high is not None:
        if hi < claim.low or lo > claim.high:
            return "refuted"
        return "reproduced" if agrees else "inconclusive"
    return "reproduced" if agrees else "refuted" if opposite else "inconclusive"


def claim_rows(measured: Mapping[str, Measurement], untested: Mapping[str, str] | None = None
               ) -> list[dict[str, str]]:
    """One row per claim of :data:`CLAIMS` (catalogue order): key, claim, verdict, number, paper."""
    rows = []
    for claim in CLAIMS:
        if claim.key in measured:
            m = measured[claim.key]
            rows.append({"key": claim.key, "claim": claim.text, "verdict": verdict(claim, m), "number": m.number,
                         "paper": claim.paper})
        else:
            reason = (untested or {}).get(claim.key, "not measured by this study")
            rows.append({"key": claim.key, "claim": claim.text, "verdict": "untested", "number": reason,
                         "paper": claim.paper})
    return rows


def claims_text(rows: Sequence[Mapping[str, str]], indent: str = "  ") -> str:
    """The plain-text claim lines of a decision: ``verdict  claim: number | paper: ...``."""
    width = max((len(r["verdict"]) for r in rows), default=0)
    return "\n".join(f"{indent}{r['verdict']:<{width}}  {r['claim']}: {r['number']} | paper: {r['paper']}"
                     for r in rows)


def claims_markdown(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The claim lines as markdown bullets (tested claims first, then the untested ones)."""
    tested = [r for r in rows if r["verdict"] != "untested"]
    rest = [r for r in rows if r["verdict"] == "untested"]
    return ([f"- **{r['verdict']}**: {r['claim']}: {r['number']} (paper: {r['paper']})." for r in tested]
            + [f"- **untested**: {r['claim']} ({r['number']}; paper: {r['paper']})." for r in rest])
