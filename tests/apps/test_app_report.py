"""`gdro report`: static PNGs of the app's figures, written outside the run directories."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from gdro_app_synthetic import tree_digest

from apps import report

FIGURES = {"traveling_wave.png", "lead_lag.png", "rollout_budget.png", "se_proxy.png", "outcomes.png"}


def assert_not_blank(png: Path) -> None:
    """A drawn figure has many distinct colours and is not one flat colour."""
    pixels = matplotlib.image.imread(png)[..., :3]
    assert pixels.std() > 0.05, png
    assert len(np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)) > 50, png


def test_report_writes_every_figure_per_run_and_a_comparison(runs_root: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_digest(runs_root)
    runs = [runs_root / "study" / name for name in ("grpo", "rollout_gdro")]
    assert report.main([str(path) for path in runs] + ["--out", str(tmp_path / "out")]) == 0
    for name in ("grpo", "rollout_gdro"):
        written = {file.name for file in (tmp_path / "out" / name).iterdir()}
        assert written == FIGURES
    assert_not_blank(tmp_path / "out" / "rollout_gdro" / "traveling_wave.png")
    assert_not_blank(tmp_path / "out" / "compare.png")
    assert tree_digest(runs_root) == before, "nothing is written into run directories"
    assert "5 figures" in capsys.readouterr().out


def test_report_skips_bad_runs_with_one_line_and_fails(synthetic_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = report.main([str(tmp_path / "missing"), str(synthetic_run), "--out", str(tmp_path / "out")])
    assert code == 1
    assert "skipped:" in capsys.readouterr().err
    assert {file.name for file in (tmp_path / "out" / "both").iterdir()} == FIGURES
    assert not (tmp_path / "out" / "compare.png").exists()


def test_report_refuses_to_write_inside_a_run(synthetic_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_digest(synthetic_run)
    assert report.main([str(synthetic_run), "--out", str(synthetic_run / "figures")]) == 2
    assert "inside a run directory" in capsys.readouterr().err
    assert tree_digest(synthetic_run) == before
