"""The recovery studies write the provenance of their report themselves (studykit.provenance): the code
digest taken as the command starts, a command anyone can rerun, the settings; a folder they append to keeps
the digest of the code that made its earlier rows. The fits are stubbed (fixed rows): only the bookkeeping runs.
gdro calibrate's and lmcompare's blocks: tests/simulators/calibrate/test_sim_calibrate_cli.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simulators.calibrate import gain_recovery, recovery
from studykit import provenance
from studykit.provenance import code_digest

OLD = "0" * 64  # the digest of "the code before it changed"


def _difficulty_rows(name: str, seed: int, **_: Any) -> list[dict[str, Any]]:
    return [{"world": name, "seed": seed, "stage": "difficulty", "parameter": p, "truth": 1.0, "estimate": 1.1,
             "lo": 0.5, "hi": 1.5, "covered": True, "identification": ""} for p in ("difficulty_offset", "unsolvable_frac")]


def _gain_rows(name: str, seed: int, _work: Path, **_: Any) -> list[dict[str, Any]]:
    return [{"world": name, "seed": seed, "method": "prompt_gdro", "metric": metric, "baseline": "vs_grpo",
             "truth": 0.01, "truth_se": 0.005, "median": 0.0, "lo": -0.02, "hi": 0.02, "covered": True, "width": 0.04,
             "verdict_sign": 0, "clear": False, "sign_right": False, "sign_wrong": False, "per_world": [-0.01, 0.0, 0.01]}
            for metric in ("test/accuracy", "test/pass@8")]


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recovery, "recover_difficulty", _difficulty_rows)
    monkeypatch.setattr(gain_recovery, "recover_gains", _gain_rows)


def _old_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code as it was before a change: every digest is OLD."""
    monkeypatch.setattr(provenance, "code_digest", lambda entries, root=provenance.ROOT:
                        {"entry": list(entries), "code_digest": OLD, "files": 1})


def _block(results: Path) -> dict[str, Any]:
    return json.loads(results.read_text())["provenance"]


TOOLS = [  # (module, results file, first argv after --out, appended argv after --out)
    (recovery, "coverage.json", ["--stage1-only", "--worlds", "middle", "--reps", "1"],
     ["--stage1-only", "--worlds", "middle", "--reps", "1", "--first-seed", "1"]),
    (gain_recovery, "summary.json", ["--worlds", "cheap", "--seeds", "0", "--workers", "1"],
     ["--worlds", "cheap", "--seeds", "1", "--workers", "1"]),
]


@pytest.mark.parametrize("module, results, argv, _more", TOOLS, ids=["recovery", "gain_recovery"])
def test_the_report_records_its_code_command_and_settings(module: Any, results: str, argv: list[str], _more: list[str],
                                                         stubbed: None, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert module.main(["--out", str(out), *argv]) == 0
    block = _block(out / results)
    assert block["entry"] == module.ENTRY == [module.__name__]
    assert block["code_digest"] == code_digest(module.ENTRY)["code_digest"]
    assert block["command"] == " ".join([f"python -m {module.__name__}", "--out", "OUT", *argv])  # rerunnable
    assert block["settings"]["worlds"] == argv[argv.index("--worlds") + 1] and "out" not in block["settings"]
    assert str(tmp_path) not in json.dumps(block)


@pytest.mark.parametrize("module, results, argv, _more", TOOLS, ids=["recovery", "gain_recovery"])
def test_the_digest_is_the_code_that_started(module: Any, results: str, argv: list[str], _more: list[str],
                                             stubbed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The code edited while the fits run: the report records the code that ran."""
    current = provenance.code_digest
    _old_code(monkeypatch)
    fit_name = "recover_difficulty" if module is recovery else "recover_gains"
    fit = getattr(module, fit_name)

    def fit_then_edit(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        monkeypatch.setattr(provenance, "code_digest", current)  # the code changes while the fit runs
        return fit(*args, **kwargs)

    monkeypatch.setattr(module, fit_name, fit_then_edit)
    assert module.main(["--out", str(tmp_path), *argv]) == 0
    assert _block(tmp_path / results)["code_digest"] == OLD


def _made_by_old_code(module: Any, out: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``module.main`` into ``out`` as the old code (digest ``OLD``) would have made it."""
    with monkeypatch.context() as before:
        _old_code(before)
        assert module.main(["--out", str(out), *argv]) == 0


@pytest.mark.parametrize("module, results, argv, more", TOOLS, ids=["recovery", "gain_recovery"])
def test_appending_after_the_code_changed_keeps_the_earlier_digest(module: Any, results: str, argv: list[str],
                                                                   more: list[str], stubbed: None, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture) -> None:
    _made_by_old_code(module, tmp_path, argv, monkeypatch)
    capsys.readouterr()
    assert module.main(["--out", str(tmp_path), *more]) == 0  # more seeds, by the current code
    block = _block(tmp_path / results)
    assert block["code_digest"] == OLD and block["command"].endswith(" ".join(more))
    notes = [line for line in capsys.readouterr().err.splitlines() if "note" in line]
    assert len(notes) == 1 and OLD[:12] in notes[0] and "stale" in notes[0]
    assert module.main(["--out", str(tmp_path), "--summarize-only"]) == 0  # the earlier rows still there
    assert _block(tmp_path / results)["code_digest"] == OLD
    assert provenance.freshness(tmp_path / results) is not None  # stale until rerun whole


@pytest.mark.parametrize("module, results, argv, more", TOOLS, ids=["recovery", "gain_recovery"])
def test_appending_with_the_same_code_keeps_its_digest(module: Any, results: str, argv: list[str], more: list[str],
                                                       stubbed: None, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    assert module.main(["--out", str(tmp_path), *argv]) == 0
    assert module.main(["--out", str(tmp_path), *more]) == 0
    assert _block(tmp_path / results)["code_digest"] == code_digest(module.ENTRY)["code_digest"]
    assert "note" not in capsys.readouterr().err


@pytest.mark.parametrize("module, results, argv, _more", TOOLS, ids=["recovery", "gain_recovery"])
def test_rerun_whole_over_old_rows_records_the_current_code(module: Any, results: str, argv: list[str],
                                                            _more: list[str], stubbed: None, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    """Every earlier row remade (the same worlds and seeds) in the same folder: nothing of the old code is left."""
    _made_by_old_code(module, tmp_path, argv, monkeypatch)
    assert module.main(["--out", str(tmp_path), *argv]) == 0
    assert _block(tmp_path / results)["code_digest"] == code_digest(module.ENTRY)["code_digest"]
    assert "note" not in capsys.readouterr().err


def test_gain_recovery_regenerated_in_steps_over_old_rows_ends_current(stubbed: None, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """A folder of two seeds made by older code, remade seed by seed (the docs' "more fits append"): stale
    while an old row is left, current once each row is remade."""
    argv = ["--out", str(tmp_path), "--worlds", "cheap,noisy"]
    with monkeypatch.context() as before:
        _old_code(before)
        assert gain_recovery.main([*argv, "--seeds", "0,1"]) == 0
    assert gain_recovery.main([*argv, "--seeds", "0"]) == 0
    assert _block(tmp_path / "summary.json")["code_digest"] == OLD
    capsys.readouterr()
    assert gain_recovery.main([*argv, "--seeds", "1"]) == 0
    assert _block(tmp_path / "summary.json")["code_digest"] == code_digest(gain_recovery.ENTRY)["code_digest"]
    assert "note" not in capsys.readouterr().err
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert {r["code_digest"] for r in rows} == {code_digest(gain_recovery.ENTRY)["code_digest"]}


def test_rows_with_no_recorded_digest_leave_the_report_without_one(stubbed: None, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """A folder made before the tools recorded provenance: the report cannot say which code made it."""
    (tmp_path / "rows.json").write_text(json.dumps(_difficulty_rows("middle", 0)))
    assert recovery.main(["--out", str(tmp_path), "--summarize-only"]) == 0
    assert _block(tmp_path / "coverage.json")["code_digest"] is None
    assert "no provenance" in str(provenance.freshness(tmp_path / "coverage.json"))
    assert len([line for line in capsys.readouterr().err.splitlines() if "note" in line]) == 1
