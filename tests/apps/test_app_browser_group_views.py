"""Groups of seeds on the Traveling wave page in headless Chromium, at the generated root of 117 run
candidates (``root100``): two groups drawn side by side on one colour scale per field, and a group's
heatmap CSV equal to the mean of its seeds' logged values, recomputed here from their steps.jsonl.

Skipped without Debian's chromium or the playwright package, like the other browser tests.
"""

from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import quote

import numpy as np
import pytest
from browser100 import assert_close, bins, column, download, logged_steps, new_page, open_view, rows_of, serve, steps
from browser100 import svg_texts
from root100 import SIM_SEEDS, Root100

import browser

pytestmark = browser.pytest_marks()

RUN, BASELINE = "study/runs/prompt_gdro/lr1/seed1", "study/runs/grpo/lr1/seed1"


@pytest.fixture(scope="module")
def app_url(root100: Root100, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(root100.root, tmp_path_factory.mktemp("app-group-views") / "app.log") as url:
        yield url


@pytest.fixture
def page() -> Iterator[Any]:
    with new_page() as opened:
        yield opened


def _box(page: Any, text: str) -> dict[str, float]:
    return dict(page.get_by_test_id("stMain").locator("h3").filter(has_text=text).first.bounding_box())


def test_two_groups_side_by_side_and_a_groups_wave_is_its_seed_mean(app_url: str, root100: Root100,
                                                                     page: Any) -> None:
    url = (f"{app_url}/traveling-wave?run={quote(RUN, safe='')}&baseline={quote(BASELINE, safe='')}"
           f"&traveling-wave-show={quote('groups of seeds')}")
    open_view(page, url, "Traveling wave", charts=3)  # the heatmaps of both groups, and each group's bars
    first, beside = _box(page, "Group: "), _box(page, "Beside it: ")
    assert abs(first["y"] - beside["y"]) < 5 and beside["x"] >= first["x"] + first["width"] - 5, (first, beside)
    titles = svg_texts(page)
    assert titles.count("Prompt share q̂(b) [share]") == 2, titles
    legends = [text for text in svg_texts(page, "legend-title") if text.startswith("share")]
    assert len(legends) == 2 and legends[0] == legends[1], f"one colour scale for both groups: {legends}"
    rows = download(page, 0)  # the heatmaps' CSV
    seeds = [steps(root100.root, f"study/runs/prompt_gdro/lr1/seed{seed}") for seed in range(SIM_SEEDS)]
    assert len({tuple(logged_steps(records)) for records in seeds}) == 1, "the seeds log the same steps"
    for field in ("share", "weight"):
        charts = sorted({row["chart"] for row in rows if row["chart"].endswith(f": {field}")})
        assert len(charts) == 2, charts
        chart = next(name for name in charts if "prompt_gdro" in name)  # the sidebar run's group, by default
        values_STG = np.stack([_shown(records, field) for records in seeds])
        finite_STG = np.isfinite(values_STG)  # the mean of the finite values; NaN where no seed has one
        expected_TG = np.where(finite_STG.any(axis=0),
                               np.nansum(values_STG, axis=0) / np.maximum(finite_STG.sum(axis=0), 1), np.nan)
        chosen = sorted(rows_of(rows, chart), key=lambda row: (float(row["step"]), int(row["bin"])))
        assert_close(column(chosen, "value"), expected_TG.reshape(-1), f"the group's {field}: the mean of its seeds")
        assert set(column(chosen, "n")) == {SIM_SEEDS}


def _shown(records: list[dict[str, Any]], field: str) -> np.ndarray:
    """A seed's per-bin values as every view shows them: a share is null (not 0) on a step where no
    prompt is in any bin yet (the classifier's warm-up, docs/app.md)."""
    values_TG = bins(records, field)
    if field == "share":
        values_TG[np.nansum(bins(records, "count"), axis=1) == 0] = np.nan
    return values_TG
