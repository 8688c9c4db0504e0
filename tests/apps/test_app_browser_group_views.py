"""Groups of seeds on the Traveling wave page in headless Chromium, at the generated roots of 117 run
candidates (``root100``) and of one ``gdro arena`` output (``root1000``, 1,170 runs): two groups drawn
side by side on one colour scale per field, and a group's heatmap CSV equal to the mean of its seeds'
logged values, recomputed here from their steps.jsonl.

Skipped without Debian's chromium or the playwright package, like the other browser tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import numpy as np
import pytest
from browser100 import assert_close, bins, column, download, logged_steps, new_page, open_view, rows_of, steps
from browser100 import main_text, svg_texts
from root100 import SIM_SEEDS, Root100
from root1000 import SEEDS, Root1000

import browser

pytestmark = browser.pytest_marks()


@pytest.fixture(scope="module")
def app_url(app100_url: str) -> str:
    """The session's one server on ``root100`` (``app100_url``, tests/apps/conftest.py)."""
    return app100_url


@pytest.fixture(scope="module")
def app_url1000(app1000_url: str) -> str:
    """The session's one server on ``root1000`` (``app1000_url``, tests/apps/conftest.py)."""
    return app1000_url


@pytest.fixture
def page() -> Iterator[Any]:
    with new_page() as opened:
        yield opened


def _header(page: Any, text: str) -> str:
    """The text of the main area's first subheader that holds ``text``."""
    return str(page.get_by_test_id("stMain").locator("h3").filter(has_text=text).first.inner_text()).strip()


def _box(page: Any, text: str) -> dict[str, float]:
    return dict(page.get_by_test_id("stMain").locator("h3").filter(has_text=text).first.bounding_box())


def test_two_groups_side_by_side_and_a_groups_wave_is_its_seed_mean(app_url: str, root100: Root100,
                                                                     page: Any) -> None:
    _check_groups(page, app_url, root100.root, "study/runs/prompt_gdro/lr1", "study/runs/grpo/lr1", SIM_SEEDS)
    first, second = _header(page, "Group: ")[len("Group: "):], _header(page, "Beside it: ")[len("Beside it: "):]
    # The link alone (no run, no baseline) reopens the same groups, with the median chosen.
    link = (f"{app_url}/traveling-wave?traveling-wave-show={quote('groups of seeds')}&traveling-wave-group="
            f"{quote(second, safe='')}&traveling-wave-beside={quote(first, safe='')}&traveling-wave-statistic=median")
    open_view(page, link, "Traveling wave", charts=3)
    assert (_header(page, "Group: "), _header(page, "Beside it: ")) == (f"Group: {second}", f"Beside it: {first}")
    assert f"median over {SIM_SEEDS} seeds" in main_text(page)


@pytest.mark.slow
def test_the_same_at_the_1000_run_root(app_url1000: str, root1000: Root1000, page: Any) -> None:
    _check_groups(page, app_url1000, root1000.root, "runs/default/gdro_prompt/lr1", "runs/default/grpo/lr1", SEEDS)


def _check_groups(page: Any, app_url: str, root: Path, group: str, beside: str, seeds: int) -> None:
    """A link naming a run of ``group`` (seed folders ``seed<k>``), a baseline of ``beside`` and "groups
    of seeds" draws both groups side by side (by default, as the sidebar's run and baseline); each
    group's heatmap CSV is the mean of its seeds' logged values, with n = ``seeds``. (The heatmaps are
    drawn on a canvas: the shared colour scale is checked by the AppTest tests.)"""
    url = (f"{app_url}/traveling-wave?run={quote(f'{group}/seed1', safe='')}"
           f"&baseline={quote(f'{beside}/seed1', safe='')}&traveling-wave-show={quote('groups of seeds')}")
    open_view(page, url, "Traveling wave", charts=3)  # the heatmaps of both groups, and each group's bars
    first, second = _box(page, "Group: "), _box(page, "Beside it: ")
    assert abs(first["y"] - second["y"]) < 5 and second["x"] >= first["x"] + first["width"] - 5, (first, second)
    assert svg_texts(page).count("Prompt share q̂(b): snapshots and tail average") == 2, "each group's bars"
    rows = download(page, 0)  # the heatmaps' CSV
    for folder, header in ((group, "Group: "), (beside, "Beside it: ")):
        label = _header(page, header)[len(header):]
        assert folder.split("/")[-2] in label, (folder, label)
        records = [steps(root, f"{folder}/seed{seed}") for seed in range(seeds)]
        assert len({tuple(logged_steps(logged)) for logged in records}) == 1, "the seeds log the same steps"
        for field in ("share", "weight"):
            chart = f"{label}: {field}"
            values_STG = np.stack([_shown(logged, field) for logged in records])
            finite_STG = np.isfinite(values_STG)  # the mean of the finite values; NaN where no seed has one
            expected_TG = np.where(finite_STG.any(axis=0),
                                   np.nansum(values_STG, axis=0) / np.maximum(finite_STG.sum(axis=0), 1), np.nan)
            chosen = sorted(rows_of(rows, chart), key=lambda row: (float(row["step"]), int(row["bin"])))
            assert_close(column(chosen, "value"), expected_TG.reshape(-1), f"{chart}: the mean of its seeds")
            assert set(column(chosen, "n")) == {seeds}


def _shown(records: list[dict[str, Any]], field: str) -> np.ndarray:
    """A seed's per-bin values as every view shows them: a share is null (not 0) on a step where no
    prompt is in any bin yet (the classifier's warm-up, docs/app.md)."""
    values_TG = bins(records, field)
    if field == "share":
        values_TG[np.nansum(bins(records, "count"), axis=1) == 0] = np.nan
    return values_TG
