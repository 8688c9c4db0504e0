"""studykit.claims (the verdict rule and the untested lines) and studykit.claim_measures (against naive loops)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from studykit import claim_measures as cm
from studykit.claims import BY_KEY, CLAIMS, MATH, PAPER_RUNS, Measurement, claim_rows, claims_text, verdict


def _m(key: str, mean: float, half: float, metric: str | None = None, evidence: str = PAPER_RUNS) -> Measurement:
    return Measurement(key, mean, half, metric or BY_KEY[key].metric, evidence, f"{mean} ± {half}")


@pytest.mark.parametrize("key, mean, half, metric, evidence, expected", [
    ("rgdro_pass8", 9.5, 0.5, None, PAPER_RUNS, "reproduced"),          # paper's metric and scale, inside the range
    ("rgdro_pass8", 2.0, 0.5, None, PAPER_RUNS, "refuted"),             # below the range
    ("rgdro_pass8", 5.0, 5.0, None, PAPER_RUNS, "inconclusive"),        # overlaps, does not exclude 0
    ("rgdro_pass8", 9.5, 0.5, None, "a toy world", "direction only, agrees"),
    ("rgdro_pass8", 0.7, 0.2, "pass@1 gain (pp)", PAPER_RUNS, "direction only, agrees"),  # another metric
    ("rgdro_pass8", -3.0, 1.0, None, "a toy world", "direction only, opposite"),
    ("rgdro_pass8", 0.5, 1.0, None, "a toy world", "direction only, unresolved"),
    ("leadlag_early", 0.5, 0.2, None, PAPER_RUNS, "reproduced"),        # a direction claim
    ("leadlag_early", -0.5, 0.2, None, PAPER_RUNS, "refuted"),
    ("six_bins", -1.0, 0.5, None, "a toy world", "direction only, agrees"),   # the paper's sign is negative
    ("economics", 1.1, 0.05, None, "a toy world", "direction only, agrees"),  # null 1, not 0
    ("economics", 0.9, 0.05, None, "a toy world", "direction only, opposite"),
    ("lemma41", 0.0, 0.0, None, "any", "reproduced"),                   # a theorem: any instance tests it
    ("lemma41", 3.0, 0.0, None, "any", "refuted"),
    ("rgdro_pass8", 9.5, float("nan"), None, PAPER_RUNS, "inconclusive"),
])
def test_verdict(key: str, mean: float, half: float, metric: str | None, evidence: str, expected: str) -> None:
    assert verdict(BY_KEY[key], _m(key, mean, half, metric, evidence)) == expected


def test_every_claim_gets_a_line_untested_ones_say_why() -> None:
    rows = claim_rows({"wse": _m("wse", 1.0, 0.1, evidence="a toy world")}, {"overhead": "no GPU here"})
    assert [r["key"] for r in rows] == [c.key for c in CLAIMS]
    by_key = {r["key"]: r for r in rows}
    assert by_key["wse"]["verdict"] == "direction only, agrees" and "22.6%" in by_key["wse"]["paper"]
    assert by_key["overhead"]["verdict"] == "untested" and by_key["overhead"]["number"] == "no GPU here"
    assert by_key["eq27"]["number"] == "not measured by this study"
    text = claims_text(rows)
    assert len(text.splitlines()) == len(CLAIMS) and "| paper: " in text
    assert all(c.evidence in (PAPER_RUNS, MATH) or "toy" in c.evidence for c in CLAIMS)


@dataclass
class _Run:
    scalars: dict = field(default_factory=dict)
    bins: dict = field(default_factory=dict)


def test_mechanism_statistics_by_hand() -> None:
    steps = 40
    mu_data = np.r_[np.full(4, np.nan), np.linspace(2.0, 5.0, steps - 4)]  # 4 unbinned steps first
    mu_weight = np.r_[np.full(4, np.nan), np.linspace(6.0, 4.0, steps - 4)]
    run = _Run({"mu_data": mu_data, "mu_weight": mu_weight, "se_reduction_pct": np.r_[np.nan, np.full(39, 3.0)]})
    binned_d, binned_w = mu_data[4:], mu_weight[4:]  # 36 binned steps
    assert cm.wave([run])[0] == pytest.approx(binned_d[-4:].mean() - binned_d[:4].mean())
    gap = binned_w - binned_d
    early, decay = cm.lead_lag([run])
    assert early[0] == pytest.approx(gap[:9].mean()) and decay[0] == pytest.approx(gap[:9].mean() - gap[-9:].mean())
    assert cm.frontier([run], 10)[0] == pytest.approx(binned_w[21:].mean() - 4.5)
    assert cm.wse([run])[0] == pytest.approx(3.0)


def test_budget_statistics_by_hand() -> None:
    G = 10
    share = np.zeros((8, G))
    rollouts = np.full((8, G), np.nan)
    share[0] = 0.0  # step 0: nothing binned, skipped
    for t in range(1, 8):
        share[t, 2], share[t, 8] = 0.75, 0.25
        rollouts[t, 2], rollouts[t, 8] = 3.0, 4.0 + t / 7 * 3.0  # mean 3*0.75 + n_high*0.25, not exactly 4: fine
    run = _Run(bins={"share": share, "rollouts": rollouts})
    n_high = rollouts[1:, 8]
    assert cm.economics([run], 4.0)[0] == pytest.approx(np.mean(n_high / 4.0))
    frac = 0.25 * n_high / (0.75 * 3.0 + 0.25 * n_high)  # budget share of bin 8 (>= 7) per binned step
    expected = 100 * (frac[5:].mean() - frac[:2].mean())  # 7 binned steps: first quarter = 2, last = 2
    assert cm.budget_shift([run])[0] == pytest.approx(expected)
    measured = cm.mechanism_measurements([], [], [run, run], G, 4.0, "a toy world")
    assert set(measured) == {"economics", "budget_shift"}  # no se_reduction_pct logged: wse left untested
    assert measured["economics"].metric == BY_KEY["economics"].metric


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.key)
def test_no_claim_is_decided_off_the_papers_metric_or_scale(claim) -> None:
    """Whatever the size, a measurement on another metric, or on the paper's metric in another setting
    (a toy world), is only ever "direction only"; on the paper's metric and scale it is decided."""
    inside = claim.null + claim.sign * 10.0 if claim.low is None else (claim.low + claim.high) / 2
    for metric, evidence in (("held-out pass@1 gain (pp)", claim.evidence), (claim.metric, "a toy world")):
        if claim.evidence == MATH and metric == claim.metric:
            continue  # a theorem: any instance is the paper's setting, only the metric can differ
        for mean in (inside, claim.null - claim.sign * 10.0):
            got = verdict(claim, Measurement(claim.key, mean, 0.01, metric, evidence, "x"))
            assert got.startswith("direction only, "), (metric, evidence, mean, got)
    assert verdict(claim, Measurement(claim.key, inside, 0.01, claim.metric, claim.evidence, "x")) == "reproduced"
