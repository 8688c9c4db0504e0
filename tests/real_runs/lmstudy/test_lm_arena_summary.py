"""The LM arena's summary against a hand computation on synthetic run digests: the lr chosen on the
val half, the gain on the test half paired by seed with GRPO at its own tuned lr, and a method with
fewer finished seeds compared on the seeds it shares with GRPO (and said so)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from real_runs.lmstudy import learning_study, lm_arena


def digest(val: float, test: float, tokens: float = 100.0) -> dict[str, float]:
    return {"val/accuracy": val, "val/worst_group_accuracy": val / 2, "test/accuracy": test,
            "test/worst_group_accuracy": test / 2, "zero_variance_frac": 0.5, "compute/rollouts_generated": 64.0,
            "compute/rollouts_trained": 64.0, "compute/tokens_generated": tokens, "time/step": 1.0,
            "time/controllers": 0.001}


def test_gains_are_paired_over_the_seeds_a_method_shares_with_grpo(monkeypatch) -> None:
    monkeypatch.setattr(lm_arena, "LR_SCALES", (0.5, 1.0))
    monkeypatch.setattr(lm_arena, "METHODS", {"grpo": ("GRPO", {}), "knapsack": ("Knapsack-RL", {"allocator": "knapsack"})})
    table = {}
    for s, (g_test, k_test) in enumerate([(0.30, 0.36), (0.40, 0.41), (0.20, 0.0)]):
        table[("grpo", 0.5, s)] = digest(0.1, 0.0)          # GRPO's val is best at lr 1
        table[("grpo", 1.0, s)] = digest(0.5, g_test)
        if s < 2:                                            # knapsack: seeds 0 and 1 only
            table[("knapsack", 0.5, s)] = digest(0.6, k_test, tokens=90.0)   # best on val at lr 0.5
            table[("knapsack", 1.0, s)] = digest(0.2, 0.0, tokens=90.0)
    monkeypatch.setattr(lm_arena, "run_digest", lambda path, cfg: table[path])
    runs = {key: key for key in table}
    out = lm_arena.summarize(learning_study.QUICK, runs, "test")  # type: ignore[arg-type]
    assert out["tuned_lr"]["accuracy"] == {"grpo": 1.0, "knapsack": 0.5}
    diff = np.array([0.36 - 0.30, 0.41 - 0.40])              # seeds 0, 1 only (seed 2 has no knapsack run)
    half = stats.t.ppf(0.975, 1) * diff.std(ddof=1) / np.sqrt(2)
    assert out["gains"]["knapsack"]["accuracy"] == pytest.approx((diff.mean(), half))
    assert "fewer seeds: Knapsack-RL (2 seeds)" in out["decision"][0]
    assert any("Knapsack-RL" in line and "0.900" in line for line in out["decision"])  # tokens ÷ GRPO's at lr 1


def test_reuse_only_needs_a_finished_grpo(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no finished GRPO"):
        lm_arena.run_arena(learning_study.QUICK, tmp_path, log=lambda _: None, reuse_only=True)


@pytest.mark.parametrize("coarse,seeds,setting,scales", [
    (False, None, "full setting", lm_arena.LR_SCALES),
    (True, None, "reduced setting, lr steps of 2x", lm_arena.COARSE_SCALES),
    (False, 2, "reduced setting, 2 seeds instead of 3", lm_arena.LR_SCALES)])
def test_the_full_setting_is_the_sqrt2_grid_and_three_seeds(tmp_path: Path, monkeypatch, coarse, seeds, setting,
                                                            scales) -> None:
    """The default grid is the simulator's sqrt(2) steps over [0.5, 2]; `--lm-grid coarse` or fewer seeds is a
    reduced setting, named in the report, and every run and the summary use the chosen grid."""
    seen: dict[str, object] = {}
    monkeypatch.setattr(lm_arena, "run_arena", lambda cfg, out, log, reuse_only, lr_scales: seen.update(
        run=lr_scales, seeds=cfg.seeds) or {"runs": {}, "seconds": 0.0})
    monkeypatch.setattr(lm_arena, "summarize", lambda cfg, runs, text, lr_scales: seen.update(
        summary=lr_scales, setting=text) or {})
    lm_arena.main_arena(tmp_path, seeds=seeds, coarse=coarse, log=lambda _: None)
    assert seen == {"run": scales, "summary": scales, "seeds": seeds or 3, "setting": setting}
    assert lm_arena.LR_SCALES == pytest.approx([2.0 ** (k / 2) for k in range(-2, 3)])
