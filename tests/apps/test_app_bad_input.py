"""Bad input in the app: a clear one-line message in the page, never a traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import PAGES, charts, open_app, run_labels, visit
from gdro_app_synthetic import tree_digest
from streamlit.testing.v1 import AppTest

BAD_RUNS = {
    # fixture name -> words the message must contain
    "not_a_run": "not a gdro run directory",
    "newer_version_run": "upgrade gdro-lab",
    "corrupt_steps_run": "line 6 is corrupt",
    "corrupt_meta_run": "meta.json is corrupt",
    "corrupt_config_run": "config.json is corrupt",
    "malformed_record_run": "malformed record",
}


def _error_text(app: AppTest) -> str:
    return " ".join(element.value for element in app.error)


@pytest.mark.parametrize("fixture_name, expected", BAD_RUNS.items())
def test_bad_run_gives_a_clear_error_on_every_view(fixture_name: str, expected: str, request: pytest.FixtureRequest,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path: Path = request.getfixturevalue(fixture_name)
    before = tree_digest(path)
    app = open_app(monkeypatch, tmp_path / "no-root", [path])
    for page in PAGES:
        visit(app, page)
        assert not app.exception, (page, [element.value for element in app.exception])
        if page == "compare":
            assert expected in _error_text(app), page
            continue
        assert len(app.error) == 1, page
        text = _error_text(app)
        assert expected in text and "\n" not in text and "Traceback" not in text, text
        assert not charts(app)
    assert tree_digest(path) == before, "the app wrote into the run directory"


def test_missing_directory_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "gone"
    app = open_app(monkeypatch, tmp_path, [missing])
    assert not app.exception
    assert f"{missing} does not exist" in _error_text(app)
    assert not missing.exists()


def test_good_run_still_shows_next_to_a_bad_one(synthetic_run: Path, not_a_run: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, synthetic_run.parent, [not_a_run])
    assert run_labels(app) == ["not-a-run", "both"]
    assert "not a gdro run directory" in _error_text(app)
    app.selectbox(key="run").select("both").run()
    assert not app.exception and not app.error
    assert charts(app)


def test_missing_runs_folder_explains_where_runs_are_looked_for(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for page in PAGES:
        app = visit(open_app(monkeypatch, tmp_path / "nowhere"), page)
        assert not app.exception and not app.error
        assert "No run directories found" in app.info[0].value and "does not exist" in app.info[0].value


def test_run_without_steps_says_it_has_just_started(empty_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page in ("traveling_wave", "rollout_budget", "config"):
        app = visit(open_app(monkeypatch, empty_run.parent), page)
        assert not app.exception and not app.error
        assert any("No steps logged yet" in element.value for element in app.info)
