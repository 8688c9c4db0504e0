"""`gdro report`: static PNGs of the app's figures, written outside the run directories."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from typing import Any

import matplotlib.colors
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest
from gdro_app_synthetic import tree_digest

from apps.data import loading
from apps.report import cli, figures

FIGURES = {"traveling_wave.png", "lead_lag.png", "rollout_budget.png", "se_proxy.png", "outcomes.png",
           "evaluations.png", "step_time.png"}


def assert_not_blank(png: Path) -> None:
    """A drawn figure has many distinct colours and is not one flat colour."""
    pixels = matplotlib.image.imread(png)[..., :3]
    assert pixels.std() > 0.05, png
    assert len(np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)) > 50, png


def test_report_writes_every_figure_per_run_and_a_comparison(runs_root: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_digest(runs_root)
    runs = [runs_root / "study" / name for name in ("grpo", "rollout_gdro")]
    assert cli.main([str(path) for path in runs] + ["--out", str(tmp_path / "out")]) == 0
    for name in ("grpo_seed0", "rollout_gdro_seed2"):  # <method>_seed<seed>, from the configs
        written = {file.name for file in (tmp_path / "out" / name).iterdir()}
        assert written == FIGURES
    assert_not_blank(tmp_path / "out" / "rollout_gdro_seed2" / "traveling_wave.png")
    assert_not_blank(tmp_path / "out" / "compare.png")
    assert tree_digest(runs_root) == before, "nothing is written into run directories"
    assert "7 figures" in capsys.readouterr().out


def test_report_skips_bad_runs_with_one_line_and_fails(synthetic_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main([str(tmp_path / "missing"), str(synthetic_run), "--out", str(tmp_path / "out")])
    assert code == 1
    assert "skipped:" in capsys.readouterr().err
    assert {file.name for file in (tmp_path / "out" / "both_seed3").iterdir()} == FIGURES
    assert not (tmp_path / "out" / "compare.png").exists()


def test_report_refuses_to_write_inside_a_run(synthetic_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_digest(synthetic_run)
    assert cli.main([str(synthetic_run), "--out", str(synthetic_run / "figures")]) == 2
    assert "inside a run directory" in capsys.readouterr().err
    assert tree_digest(synthetic_run) == before


def _line_spans(png: Path, figure, panel_prefix: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Per line in the panels titled ``panel_prefix...``: the vertical extent of its pixels in the
    saved PNG, as a fraction of its panel's height (legend excluded)."""
    pixels = matplotlib.image.imread(png)[..., :3]
    height = pixels.shape[0]
    spans = {}
    for axis in figure.axes:
        if not axis.get_title().startswith(panel_prefix):
            continue
        box = axis.get_window_extent()
        legend = axis.get_legend().get_window_extent()
        rows = slice(int(height - box.y1), int(height - box.y0))
        cols = slice(int(box.x0), int(box.x1))
        lines = axis.get_lines()
        for position, line in enumerate(lines):
            if any(np.array_equal(line.get_ydata(), later.get_ydata()) for later in lines[position + 1:]):
                continue  # drawn under an identical later line (worst benchmark = that benchmark)
            colour = np.array(matplotlib.colors.to_rgb(line.get_color()))
            match = (np.abs(pixels[rows, cols] - colour) < 0.03).all(axis=-1)
            y_index, x_index = np.nonzero(match)
            y_pixel, x_pixel = y_index + rows.start, x_index + cols.start
            outside = ~((x_pixel >= legend.x0) & (x_pixel <= legend.x1) &
                        (height - y_pixel >= legend.y0) & (height - y_pixel <= legend.y1))
            found = y_pixel[outside]
            spans[f"{axis.get_title()}: {line.get_label()}"] = (
                (found.max() - found.min()) / (box.y1 - box.y0) if found.size else 0.0)
    return spans


def test_report_eval_panels_keep_every_metric_readable(real_run: Path, tmp_path: Path) -> None:
    """Read back outcomes.png: a count (rollouts_total ~1e6) gets its own panel, and no rate is
    squashed flat by another metric's scale; colours do not repeat within a panel."""
    run = loading.load_run(real_run)
    figure = figures.outcomes_figure(run)
    png = tmp_path / "outcomes.png"
    figure.savefig(png, dpi=100)
    titles = [axis.get_title() for axis in figure.axes if axis.get_title().startswith("Evaluation")]
    assert titles == ["Evaluation: rates", "Evaluation: pass@k", "Evaluation: reward/errors",
                      "Evaluation: reward/timeouts", "Evaluation: rollouts_total"], "counts alone, even when in [0, 1]"
    for axis in figure.axes:
        colours = [line.get_color() for line in axis.get_lines()]
        assert len(colours) == len(set(colours)), f"{axis.get_title()}: colours repeat"
    spans = _line_spans(png, figure, "Evaluation")
    plt.close(figure)
    # rates: 3 benchmarks + pooled + worst group + 2 groups (worst benchmark = aime24, drawn over it);
    # pass@k: 3 benchmarks + pooled; and the counts alone. Squashed by 1e6, a rate spans < 1e-6.
    assert len(spans) == 14, spans
    flat = {name: span for name, span in spans.items() if span < 0.05 and "reward/errors" not in name}  # errors: 0
    assert not flat, f"metrics squashed flat by another's scale: {flat}"


def test_report_folders_are_named_by_method_and_seed_and_never_overwritten(seeds_root: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(seeds_root / "grpo" / "seed0"), str(seeds_root / "prompt_gdro" / "seed0")]
    out = tmp_path / "out"
    assert cli.main([*runs, "--out", str(out)]) == 0
    assert sorted(path.name for path in out.iterdir()) == [".gdro-output", "compare.png", "grpo_seed0",
                                                           "prompt_gdro_seed0"]  # the write policy's marker
    before = tree_digest(out)
    capsys.readouterr()
    assert cli.main([*runs, "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "already holds a report" in error and "--overwrite" in error and error.count("\n") == 1
    assert tree_digest(out) == before, "nothing replaced without --overwrite"
    assert cli.main([*runs, "--out", str(out), "--overwrite"]) == 0
    figure = figures.traveling_wave_figure(loading.load_run(seeds_root / "grpo" / "seed1"))
    assert figure.get_suptitle() == "Traveling wave: grpo_seed1", "titled by method and seed, not 'seed1'"
    plt.close(figure)


def _overlaps(first, second) -> bool:  # type: ignore[no-untyped-def]
    return not (first.x1 <= second.x0 or second.x1 <= first.x0 or first.y1 <= second.y0 or second.y1 <= first.y0)


def test_report_legends_never_cover_ticks(real_run: Path) -> None:
    run = loading.load_run(real_run)
    for make in (figures.outcomes_figure, figures.evaluations_figure):
        figure = make(run)
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
        checked = 0
        for axis in figure.axes:
            legend = axis.get_legend()
            if legend is None or not axis.get_title().startswith(("Evaluation", "mean@", "pass@")):
                continue
            box = legend.get_window_extent(renderer)
            labels = [label.get_window_extent(renderer) for label in [*axis.get_xticklabels(), *axis.get_yticklabels()]
                      if label.get_text()]
            assert labels and not any(_overlaps(box, label) for label in labels), axis.get_title()
            assert not _overlaps(box, axis.get_window_extent(renderer)), f"{axis.get_title()}: legend over the data"
            checked += 1
        assert checked >= 2, make.__name__
        plt.close(figure)


def test_report_has_evaluation_interval_and_step_time_figures(real_run: Path) -> None:
    run = loading.load_run(real_run)
    figure = figures.evaluations_figure(run)
    titles = [axis.get_title() for axis in figure.axes]
    assert titles[:2] == ["mean@8 per benchmark (95% interval)", "pass@8 per benchmark (95% interval)"]
    assert titles[2].startswith("Latest evaluation"), titles
    first = figure.axes[0]
    assert len(first.collections) >= 6, "a band per benchmark and summary"
    low, high = first.get_ylim()
    assert 0.0 <= low and high <= 1.0
    plt.close(figure)
    figure = figures.step_time_figure(run)
    stacked = figure.axes[0]
    labels = [text.get_text() for text in stacked.get_legend().get_texts()]
    assert labels[:2] == ["plan", "generate"] and not any("share" in label for label in labels), labels
    shares = figure.axes[2]
    widths = sorted(patch.get_width() for patch in shares.patches)
    assert sum(widths) == pytest.approx(100.0), "each phase's share of the summed step time"
    plt.close(figure)


def test_trainer_runs_get_method_and_seed_folders(trainer_root: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def folder_only(run: object, out_dir: Path, step: object = None) -> list[Path]:
        out_dir.mkdir(parents=True)  # the figures themselves are tested above
        return []

    monkeypatch.setattr(cli, "write_report", folder_only)
    monkeypatch.setattr(cli, "compare_figure", lambda runs: plt.figure())
    runs = [str(trainer_root / "grpo-tiny-s1"), str(trainer_root / "prompt_gdro-tiny-s0")]
    assert cli.main([*runs, "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0  # the stand-ins live here
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [".gdro-output", "compare.png",
                                                                            "grpo_seed1", "prompt_gdro_seed0"]


def test_report_heatmaps_use_the_apps_default_colour_scales(synthetic_run: Path) -> None:
    """The report's heatmaps have the scale the app opens with (auto: one function for both), and a
    constant field (GRPO's uniform weights) a scale centred on its value."""
    from apps.views import uicharts

    run = loading.load_run(synthetic_run)
    figure = figures.traveling_wave_figure(run)
    limits = {axis.get_title(): axis.collections[0].get_clim() for axis in figure.axes[:3]}
    plt.close(figure)
    fields = {"Prompt share [share]": "share", "Prompt-GDRO weight [weight]": "weight",
              "Realized reward [reward]": "reward"}
    assert limits == {title: pytest.approx(tuple(uicharts.colour_domain(field, [run]))) for title, field in fields.items()}
    assert limits["Prompt share [share]"] != (0.0, 1.0), "the values' range, not the natural one"
    uniform = dataclasses.replace(run, bins={**run.bins, "weight": np.full_like(run.bins["weight"], 0.1)})
    figure = figures.traveling_wave_figure(uniform)
    assert figure.axes[1].collections[0].get_clim() == pytest.approx((0.05, 0.15))
    plt.close(figure)


def test_a_study_report_has_bands_over_seeds_the_apps_names_and_nothing_cut(root100: Any, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from matplotlib.collections import PolyCollection

    picks = [root100.root / label for label in root100.study if "/lr1/" in label]  # 3 methods x 5 seeds

    def folder_only(run: object, out_dir: Path, step: object = None) -> list[Path]:
        out_dir.mkdir(parents=True)  # the per-run figures are tested above
        return []

    drawn = []

    def keep(*args: Any, **kwargs: Any) -> Any:
        drawn.append(original(*args, **kwargs))
        return drawn[-1]

    original = figures.compare_figure
    monkeypatch.setattr(cli, "write_report", folder_only)
    monkeypatch.setattr(cli, "compare_figure", keep)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. matplotlib's "constrained layout not applied"
        assert cli.main([*map(str, picks), "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0  # stand-ins here
    folders = sorted(path.name for path in (tmp_path / "out").iterdir() if path.is_dir())
    assert folders == sorted(f"{method}_seed{seed}" for method in ("grpo", "prompt_gdro", "rollout_gdro")
                             for seed in range(5)), "the app's names of these runs: method and seed"
    figure = drawn[0]
    figure.canvas.draw()
    panels = [axis for axis in figure.axes if axis.axison]
    bands = {axis.get_title(): sum(isinstance(item, PolyCollection) for item in axis.collections) for axis in panels}
    assert bands["mean_success"] == 3 and bands["lead_lag_gap"] == 3, f"a band over 5 seeds per group: {bands}"
    assert bands["mu"] == 1, "only Rollout-GDRO logs the shadow price"
    _assert_legend_apart(figure, panels)
    title = figure._suptitle.get_window_extent()
    assert 0 <= title.x0 and title.x1 <= figure.bbox.x1, "the title is not cut"
    assert figure._suptitle.get_text().startswith("Study: 3 groups of 5 seeds")
    plt.close(figure)


def test_report_workers_write_the_same_figures_as_one_process(seeds_root: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(seeds_root / method / "seed0") for method in ("grpo", "prompt_gdro")]
    assert cli.main([*runs, "--out", str(tmp_path / "one"), "--jobs", "1"]) == 0
    assert cli.main([*runs, "--out", str(tmp_path / "two"), "--jobs", "2"]) == 0
    one, two = tree_digest(tmp_path / "one"), tree_digest(tmp_path / "two")
    assert one == two and len(list((tmp_path / "two").rglob("*.png"))) == 2 * 7 + 1, "same bytes, every figure"
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed[-3:-1]] == runs, "runs reported in the order given"
    assert cli.main([*runs, "--out", str(tmp_path / "none"), "--jobs", "0"]) == 2
    error = capsys.readouterr().err
    assert "--jobs 0" in error and error.count("\n") == 1 and not (tmp_path / "none").exists()


def test_a_folder_of_runs_draws_every_run_under_it(runs_root: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`gdro report gdro-runs/` draws the runs under the folder (it used to refuse the folder as a run)."""
    assert cli.main([str(runs_root), "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0
    assert {path.name for path in (tmp_path / "out").iterdir()} == {
        "grpo_seed0", "prompt_gdro_seed1", "rollout_gdro_seed2", "compare.png", ".gdro-output"}
    assert capsys.readouterr().err == ""


def test_an_empty_folder_stops_the_report_on_one_line(runs_root: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main([str(runs_root / "study" / "grpo"), str(empty), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"gdro report: {empty} holds no run directory (no meta.json under it): "
                                       "give run folders or the folder they are written under\n")
    assert not (tmp_path / "out").exists(), "nothing is written"


def _assert_legend_apart(figure: Any, panels: list[Any]) -> None:
    """The figure's legend overlaps neither the title nor any panel (its axes, tick labels and title:
    matplotlib's window extents on the drawn figure), and lies below the panels."""
    figure.draw_without_rendering()  # the constrained layout, on any canvas (a saved figure's is a bare one)
    renderer = figure._get_renderer()
    legend = figure.legends[0].get_window_extent(renderer)
    assert not _overlaps(legend, figure._suptitle.get_window_extent(renderer)), "the legend covers the title"
    for axis in panels:
        assert not _overlaps(legend, axis.get_tightbbox(renderer)), f"the legend covers panel {axis.get_title()}"
        assert not _overlaps(legend, axis.title.get_window_extent(renderer))
    assert legend.y1 <= min(axis.get_tightbbox(renderer).y0 for axis in panels), "below the panels"


def test_report_keeps_15_groups_apart_and_its_legend_off_the_title_and_panels(root100: Any) -> None:
    """15 groups of 5 seeds: 15 distinct (colour, dash) styles in every panel, the legend below the
    panels (never over the title or a panel, never narrowing one); with k = 5 the top 5 by the first
    metric's final value and one grey "others"."""
    from apps.data import identity, study

    labels = [label for label in root100.study if "matched" not in label and "/lr0.353553/" not in label]
    runs = {label: loading.load_run(root100.root / label) for label in labels}
    grouping = identity.group_runs({label: run.config for label, run in runs.items()})
    groups = study.group_runs(runs, grouping)
    assert len(groups) == 15
    figure = figures.compare_figure(runs, groups)
    figure.canvas.draw()
    panels = [axis for axis in figure.axes if axis.axison]
    for axis in panels:
        drawn = [line for line in axis.get_lines() if len(line.get_xdata()) and not str(line.get_label()).startswith("_")]
        styles = {(line.get_color(), str(line.get_linestyle()), str(line._dash_pattern)) for line in drawn}
        assert len(styles) == len(drawn), f"{axis.get_title()}: {len(styles)} styles for {len(drawn)} groups"
        assert len(drawn) == (5 if axis.get_title() == "mu" else 15), "mu: only Rollout-GDRO logs it"
    _assert_legend_apart(figure, panels)
    width = figure.bbox.width / 3
    assert all(axis.get_window_extent().width > 0.6 * width for axis in panels), "no panel squeezed by the legend"
    assert len(figure.legends[0].get_texts()) == 15
    plt.close(figure)
    figure = figures.compare_figure(runs, groups, top_k=5)
    texts = [text.get_text() for text in figure.legends[0].get_texts()]
    assert len(texts) == 6 and texts[-1] == "others (10 more)"
    finals = {group.label: np.mean([study.final_value(run, "mean_success") for _, run in group.runs]) for group in groups}
    assert texts[:5] == sorted(finals, key=lambda label: -finals[label])[:5], "the top 5 by final mean_success"
    plt.close(figure)
