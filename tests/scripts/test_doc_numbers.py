"""scripts/doc_numbers.py: the marked numbers of the docs equal the JSON files the commands wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scriptload import load_script

ROOT = Path(__file__).resolve().parents[2]


dn = load_script("doc_numbers")


def _page(root: Path, body: str, data: dict) -> Path:
    (root / "reports").mkdir(exist_ok=True)
    (root / "reports" / "s.json").write_text(json.dumps(data), encoding="utf-8")
    (root / "docs").mkdir(exist_ok=True)
    page = root / "docs" / "page.md"
    page.write_text(body, encoding="utf-8")
    return page


def test_every_marked_number_of_the_docs_equals_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    rc = dn.main(["--check"])
    out = capsys.readouterr().out
    assert rc == 0, out
    # the pages this was written for carry markers (a page that lost them would pass silently)
    for page in ("docs/simulator-studies.md", "docs/simulator-findings.md", "docs/calibration.md",
                 "docs/benchmarks-controllers.md", "docs/arena.md"):
        assert dn.count_markers([ROOT / page]) >= 3, page


def test_marked_numbers_against_the_reports_read_directly() -> None:
    """Independent of the script: a few markers' numbers recomputed from the JSON by hand."""
    arena = json.loads((ROOT / "reports/arena/summary.json").read_text(encoding="utf-8"))
    mean, half = arena["worlds"]["bimodal"]["stats"]["gdro_prompt"]["var_fraction_of_oracle"]
    simulator = (ROOT / "docs/simulator-studies.md").read_text(encoding="utf-8")
    assert f"-->{100 * mean:.1f} ± {100 * half:.1f}<!-- /num -->" in simulator
    rows = json.loads((ROOT / "reports/calibration/lm-study/comparison.json").read_text(encoding="utf-8"))["rows"]
    consistent = sum(1 for r in rows if r["consistent"])
    calibration = (ROOT / "docs/calibration.md").read_text(encoding="utf-8")
    assert f"-->{consistent}<!-- /num --> of <!-- num: reports/calibration/lm-study/comparison.json#rows" \
           in calibration.replace("\n", " ")


def test_fill_writes_the_source_and_check_finds_a_stale_number(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    data: dict[str, Any] = {"a": {"gain": [0.01234, 0.0041], "lr": {"0.707107": 0.52}}, "xs": [3, -7.5, 1]}
    page = _page(tmp_path, "gain <!-- num: reports/s.json#a.gain scale=100 fmt=+.1f pm -->OLD<!-- /num --> pp;\n"
                           "acc <!-- num: reports/s.json#a.lr.[0.707107] fmt=.0% -->52%<!-- /num -->;\n"
                           "low <!-- num: reports/s.json#xs.* agg=min fmt=.1f minus=u -->x<!-- /num -->\n", data)
    assert dn.main(["--check"], root=tmp_path) == 1
    assert "page says 'OLD', source gives '+1.2 ± 0.4'" in capsys.readouterr().out
    assert dn.main([], root=tmp_path) == 0
    text = page.read_text(encoding="utf-8")
    assert "-->+1.2 ± 0.4<!-- /num --> pp" in text  # the half-width takes no forced sign
    assert "-->52%<!-- /num -->" in text
    assert "-->\u22127.5<!-- /num -->" in text
    assert dn.main(["--check"], root=tmp_path) == 0
    data["a"]["gain"] = [0.02, 0.004]  # the source moves: the page is stale again
    (tmp_path / "reports" / "s.json").write_text(json.dumps(data), encoding="utf-8")
    assert dn.main(["--check"], root=tmp_path) == 1
    assert page.read_text(encoding="utf-8") == text  # --check writes nothing


@pytest.mark.parametrize(("marker", "message"), [
    ("reports/missing.json#a", "source reports/missing.json not found"),
    ("reports/s.json#a.nope", "no key 'nope'"),
    ("reports/s.json#a fmt=.1q", "is not a Python format spec"),
    ("reports/s.json#a bogus=1", "unknown option 'bogus=1'"),
    ("reports/s.json#xs.*", "needs agg="),
    ("reports/s.json#a pm", "pm needs a [mean, half-width] pair"),
    ("reports/s.json", "expected 'FILE.json#key.path"),
])
def test_a_bad_marker_is_one_line_and_rc_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           marker: str, message: str) -> None:
    page = _page(tmp_path, f"x <!-- num: {marker} -->1<!-- /num -->\n", {"a": 1.5, "xs": [1, 2]})
    assert dn.main([], root=tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.count("\n") == 0 and "docs/page.md:1" in err
    assert page.read_text(encoding="utf-8") == f"x <!-- num: {marker} -->1<!-- /num -->\n"  # nothing written


def test_the_command_line_checks_the_repository() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "doc_numbers.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stale" in done.stdout and " 0 stale" in done.stdout


def test_a_setting_is_read_from_the_code_without_importing_it(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A ``.py`` source: module-level literals, a class's field defaults, a function's parameter defaults."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "settings.py").write_text(
        "import sys\nraise SystemExit('imported')\n"            # reading must not run the module
        "STOP: dict = {'horizon': 11, 'keep': 0.05}\nSEEDS = 3\nDERIVED = len(sys.argv)\n"
        "class Config:\n    n_max: int = 12\n    name = 'x'\n"
        "def mean_ci(values, axis=0, level=0.95, *, floor=None, tries=4):\n    pass\n", encoding="utf-8")
    _page(tmp_path, "h <!-- num: pkg/settings.py#STOP.horizon -->11<!-- /num -->, "
                    "p <!-- num: pkg/settings.py#STOP.keep fmt=.0% -->5%<!-- /num -->, "
                    "s <!-- num: pkg/settings.py#SEEDS -->3<!-- /num -->, "
                    "n <!-- num: pkg/settings.py#Config.n_max -->12<!-- /num -->, "
                    "ci <!-- num: pkg/settings.py#mean_ci.level scale=100 fmt=.0f -->95<!-- /num -->, "
                    "t <!-- num: pkg/settings.py#mean_ci.tries -->4<!-- /num -->\n", {})
    assert dn.main(["--check"], root=tmp_path) == 0, capsys.readouterr()
    (tmp_path / "pkg" / "settings.py").write_text(
        (tmp_path / "pkg" / "settings.py").read_text(encoding="utf-8").replace("'horizon': 11", "'horizon': 12"),
        encoding="utf-8")
    assert dn.main(["--check"], root=tmp_path) == 1
    assert "page says '11', source gives '12'" in capsys.readouterr().out
    page = _page(tmp_path, "d <!-- num: pkg/settings.py#DERIVED -->1<!-- /num -->\n", {})
    assert dn.main(["--check", str(page)], root=tmp_path) == 2   # not a literal: not a setting it can quote
    assert "no key 'DERIVED'" in capsys.readouterr().err



def test_a_preset_is_read_from_its_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "p.toml").write_text("[optim]\nlr = 1e-6\n[eval]\nk = 8\n", encoding="utf-8")
    _page(tmp_path, "lr <!-- num: presets/p.toml#optim.lr fmt=g -->1e-06<!-- /num -->, "
                    "k <!-- num: presets/p.toml#eval.k -->8<!-- /num -->\n", {})
    assert dn.main(["--check"], root=tmp_path) == 0, capsys.readouterr()
    (tmp_path / "presets" / "p.toml").write_text("[optim]\nlr = 2e-6\n[eval]\nk = 8\n", encoding="utf-8")
    assert dn.main(["--check"], root=tmp_path) == 1
    assert "source gives '2e-06'" in capsys.readouterr().out


def test_a_dict_call_and_a_spread_are_read_as_literals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "worlds.py").write_text(
        "from elsewhere import OTHER\nBASE = {'a': dict(curvature=0.2, noise=-1.0)}\n"
        "MORE = {**BASE, **OTHER, 'b': dict(curvature=0.05)}\nBAD = dict(make())\n", encoding="utf-8")
    _page(tmp_path, "a <!-- num: pkg/worlds.py#MORE.a.curvature -->0.2<!-- /num -->, "
                    "b <!-- num: pkg/worlds.py#MORE.b.curvature -->0.05<!-- /num -->, "
                    "n <!-- num: pkg/worlds.py#BASE.a.noise -->-1<!-- /num -->\n", {})
    assert dn.main(["--check"], root=tmp_path) == 0, capsys.readouterr()
    page = _page(tmp_path, "x <!-- num: pkg/worlds.py#BAD -->1<!-- /num -->\n", {})
    assert dn.main(["--check", str(page)], root=tmp_path) == 2  # a call that is not dict(key=literal)
