"""Pinned names and tags: kept in the app's state folder, never in a run folder; shown by the app."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import open_app
from gdro_app_synthetic import tree_digest

from apps.data import pins


def test_pins_round_trip_outside_the_run(synthetic_run: Path, tmp_path: Path) -> None:
    before = tree_digest(synthetic_run)
    path = tmp_path / "state" / pins.PINS_FILE
    saved = pins.save_pin(path, synthetic_run, pins.Pin("baseline for the talk", pins.tags_from_text("keep, ok,keep")))
    assert saved == {pins.pin_key(synthetic_run): pins.Pin("baseline for the talk", ("keep", "ok"))}
    assert pins.load_pins(path) == saved
    assert tree_digest(synthetic_run) == before, "nothing is written into the run folder"
    assert pins.save_pin(path, synthetic_run, pins.Pin()) == {}, "an empty pin removes it"


def test_pins_refuse_a_state_folder_inside_a_run_and_keep_an_unreadable_file(synthetic_run: Path,
                                                                          tmp_path: Path) -> None:
    with pytest.raises(pins.PinError, match="inside the run folder"):
        pins.save_pin(synthetic_run / "state" / pins.PINS_FILE, synthetic_run, pins.Pin("x"))
    assert not (synthetic_run / "state").exists()
    broken = tmp_path / pins.PINS_FILE
    broken.write_text("{not json")
    assert pins.load_pins(broken) == {}
    with pytest.raises(pins.PinError, match="cannot be read as JSON"):
        pins.save_pin(broken, synthetic_run, pins.Pin("x"))
    assert broken.read_text() == "{not json", "a file that cannot be read is left as it is"


def test_state_folder_from_the_environment(tmp_path: Path) -> None:
    assert pins.state_dir({pins.STATE_ENV: str(tmp_path)}) == tmp_path
    assert pins.state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "gdro-lab"
    assert pins.state_dir({}) == Path.home() / ".local" / "state" / "gdro-lab"


def test_the_app_shows_a_pinned_name(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = seeds_root / "prompt_gdro" / "seed1"
    pins.save_pin(pins.pins_path(), run, pins.Pin("my favourite", ("keep",)))
    try:
        app = open_app(monkeypatch, seeds_root, view="lead_lag", query={"run": "prompt_gdro/seed1"})
        chosen = app.session_state["_gdro_selection"]
        assert chosen.name("prompt_gdro/seed1") == "my favourite" and chosen.tags["prompt_gdro/seed1"] == ("keep",)
        assert any("Run: my favourite" in element.value for element in app.subheader)
    finally:
        pins.save_pin(pins.pins_path(), run, pins.Pin())
