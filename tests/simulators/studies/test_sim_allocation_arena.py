"""The arena study: a reduced run writes the fair table and the decision, and a rerun reads every
unchanged run from its digest instead of running it again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulators import cli
from simulators.studies import allocation_arena

ARGS = ["arena", "--seeds", "2", "--steps", "20", "--prompts", "400", "--batch", "32", "--lr-grid", "0.707107,1", "--lr-extend", "1",
        "--methods", "grpo,gdro_prompt,greso,prompt_oracle", "--workers", "1", "--no-progress"]


@pytest.fixture
def one_world(monkeypatch):
    monkeypatch.setattr(allocation_arena, "WORLDS", {"bimodal": dict(allocation_arena.WORLDS["bimodal"])})


def test_arena_writes_the_table_and_reuses_unchanged_runs(tmp_path: Path, one_world, capsys):
    out = tmp_path / "arena"
    assert cli.main(ARGS + ["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "arena decision" in printed and "per-prompt Rollout-GDRO, bimodal world" in printed
    text = (out / "report.md").read_text()
    for label in ("per-prompt oracle", "per-prompt Bayes reference", "GRESO", "÷ oracle", "Δ mean held-out acc vs tuned GRPO"):
        assert label in text, label
    summary = json.loads((out / "summary.json").read_text())
    stats = summary["worlds"]["bimodal"]["stats"]
    assert stats["prompt_oracle"]["var_fraction_of_oracle"][0] == pytest.approx(1.0)
    for entry in stats.values():  # equal compute: every method generated batch x n_bar per step
        assert entry["rollouts_generated_per_step"][0] == 32 * 4
        assert entry["tokens_generated_per_step"][0] > 32 * 4  # the arena's worlds draw lengths
    decision = summary["worlds"]["bimodal"]["decision"]
    for gains in decision["gains"].values():  # each gain at equal rollouts and at equal tokens
        assert all(len(g["vs_tuned_tokens"]) == 2 and np.isfinite(g["vs_tuned_tokens"][0]) for g in gains.values())
    assert "above tuned GRPO at equal tokens" in printed and "equal tokens (pp)" in text
    for m, grid in decision["lr_grid"].items():  # sqrt(2) steps, extended (once at most) while a best is at an edge
        assert all(b / a == pytest.approx(2 ** 0.5) for a, b in zip(grid, grid[1:])), (m, grid)
        assert {0.707107, 1.0} <= {round(v, 6) for v in grid} and 0.5 - 1e-9 <= min(grid) and max(grid) <= 1.4143
        for metric, by_method in decision["tuned_lr"].items():
            best = by_method[m]
            if best == min(grid):
                assert min(grid) == pytest.approx(0.5), (m, metric, grid)
            if best == max(grid):
                assert max(grid) == pytest.approx(2 ** 0.5), (m, metric, grid)
    matched = json.loads((out / "runs" / "bimodal" / "grpo_stepmatched_greso" / "seed0" / "config.json").read_text())
    assert (matched["method"], matched["matched_to"], matched["match"]) == ("grpo", "greso", "selector_step")
    digests = sorted((out / "digests").rglob("*.json"))
    stamps = {p: p.stat().st_mtime_ns for p in digests}
    assert cli.main(ARGS + ["--out", str(out)]) == 0
    assert {p: p.stat().st_mtime_ns for p in digests} == stamps  # nothing ran again
    assert json.loads((out / "summary.json").read_text())["worlds"] == summary["worlds"]


def test_a_changed_config_reruns_only_its_runs(tmp_path: Path, one_world):
    out = tmp_path / "arena"
    assert cli.main(ARGS + ["--out", str(out)]) == 0
    stamps = {p: p.stat().st_mtime_ns for p in (out / "digests").rglob("*.json")}
    assert cli.main(ARGS + ["--out", str(out), "--set", "gdro_prompt.kappa_max=3"]) == 0
    changed = {p for p in stamps if p.stat().st_mtime_ns != stamps[p]}
    assert changed and all("gdro_prompt" in str(p) for p in changed)

