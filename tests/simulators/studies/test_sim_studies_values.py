"""The studies' reports by value, from numbers worked out by hand: the mean@8 claims are absolute gains in
percentage points (the pass@8 ones relative), the sqrt-law report prints held-out accuracies as percentages
of the summary's fractions and matches the paper's 22.6-37.1% range inclusively, and the surrogate game plays
exactly ``--steps`` steps. Each was a sampled mutant no test read (the study modules are loaded by name, so
the sample's import graph found no test for them)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gdro_lab import read_run
from simulators.studies import paper_claims, sqrt_law_study, surrogate


def _runs(accuracy: list[float], pass8: list[float]) -> list[Any]:
    return [SimpleNamespace(evals={"test/accuracy": np.array([0.1, a]), "test/pass@8": np.array([0.2, p])},
                            config={"num_bins": 4, "n_bar": 4}, scalars={})
            for a, p in zip(accuracy, pass8)]


def test_the_mean8_claims_are_absolute_gains_in_points_and_the_pass8_claims_relative(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paper_claims, "mechanism_measurements", lambda *args: {})
    grid = {("grpo", 1.0): _runs([0.5, 0.5], [0.8, 0.8]), ("grpo", 2.0): _runs([0.5, 0.52], [0.8, 0.9]),
            ("rollout_gdro", 1.0): _runs([0.6, 0.62], [0.88, 0.99])}
    tuned = {"grpo": 2.0, "rollout_gdro": 1.0}
    # rollout_gdro at its tuned lr minus tuned GRPO, paired by seed: accuracy +0.10, +0.10; pass@8 +0.08, +0.09
    entry = {"vs_tuned": [0.10, 0.0], "vs_grpo": [0.11, 0.01], "vs_matched_first": [0.1, 0.0],
             "vs_matched_second": [0.1, 0.0]}
    result = {"tuned_lr": {"test/accuracy": tuned, "test/pass@8": tuned},
              "gains": {"rollout_gdro": {"test/accuracy": entry, "test/pass@8": entry}}}
    out = paper_claims.measurements(grid, result, ["grpo", "rollout_gdro"])
    mean8, pass8 = out["rgdro_mean8"], out["rgdro_pass8"]
    assert mean8.mean == pytest.approx(100 * 0.10) and mean8.metric == "pass@1 gain (pp)"
    by_hand = np.mean([100 * (0.88 / 0.8 - 1), 100 * (0.99 / 0.9 - 1)])   # +10% on both seeds
    assert pass8.mean == pytest.approx(by_hand) and pass8.metric == "relative pass@8 gain (%)"


def _stats(reduction_true_pct: float) -> dict[str, dict[str, list[float]]]:
    return {"rollout_gdro": {"reduction_estimated_pct": [20.0, 1.0], "reduction_true_pct": [reduction_true_pct, 1.0],
                             "optimum_reduction_pct": [40.0, 0.0], "gap_to_optimum_pp": [5.0, 1.0]}}


@pytest.mark.parametrize("reduction, matched", [(22.5, False), (22.6, True), (23.0, True), (30.0, True),
                                                (37.1, True), (37.2, False)])
def test_the_papers_22_6_to_37_1_percent_range_is_matched_inclusively(reduction: float, matched: bool) -> None:
    [line] = [x for x in sqrt_law_study._discussion(_stats(reduction), {"gains": {}}) if "22.6–37.1%" in x]
    assert ("range is matched" in line) is matched and ("not matched" in line) is not matched


def test_the_sqrt_law_table_prints_held_out_accuracies_as_percentages(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    held_out = {"test/accuracy": [0.5, 0.02], "test/worst_group_accuracy": [0.25, 0.04]}
    stats = {"reduction_estimated_pct": [20.0, 1.0], "reduction_true_pct": [25.0, 1.0],
             "optimum_reduction_pct": [40.0, 0.0], "gap_to_optimum_pp": [5.0, 1.0],
             "variance_proxy_reduction_pct": [10.0, 1.0], "rollouts_total": [1000.0, 0.0], **held_out}
    for name, value in {"_wse_stats": lambda *args: stats, "lr_table": lambda *args: ({}, ""),
                        "figures": lambda *args: {"wse": "a.png", "staircase": "b.png"},
                        "economics": lambda *args: {}, "decision_markdown": lambda *args: "",
                        "decision_text": lambda *args: "", "claims_markdown": lambda *args: [],
                        "_discussion": lambda *args: [], "_warmup": lambda *args: 2}.items():
        monkeypatch.setattr(sqrt_law_study, name, value)
    runs = [SimpleNamespace(config={"steps": 10, "n_bar": 4}, evals={"accuracy": np.array([0.3, 0.4])})]
    world = SimpleNamespace(name="base", grouped={"grpo": runs}, grid={}, methods=["grpo"], overrides={},
                            result={}, claims=[], factors={})
    lines, summary = sqrt_law_study._section(world, tmp_path)
    text = "\n".join(lines).splitlines()
    [row] = [line for line in text if line.startswith("| GRPO")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    header = next(line for line in text if line.startswith("| method") and "held-out acc (%)" in line)
    names = [cell.strip() for cell in header.strip("|").split("|")]
    for metric, column in (("test/accuracy", "held-out acc (%)"), ("test/worst_group_accuracy",
                                                                  "held-out worst-group (%)")):
        printed = float(re.match(r"[-+]?[\d.]+", cells[names.index(column)]).group())
        assert printed == pytest.approx(100 * summary["metrics"]["grpo"][metric][0])


def test_the_surrogate_game_plays_exactly_its_steps(tmp_path: Path) -> None:
    config = surrogate.GameConfig(seed=0, steps=30, prompts=60, groups=3, prompts_per_group=2, rollouts=4,
                                  checkpoints=3)
    series = surrogate.play(config, str(tmp_path / "game"))["series"]
    run = read_run(tmp_path / "game")
    assert run.steps.tolist() == list(range(1, 31))
    assert max(series["t"]) == 30
