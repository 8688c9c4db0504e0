"""`gdro data fetch`: the pinned files into the data layout, from a local mirror built from the fixtures.

No test touches the network: the mirror is ``tests/fixtures/make_data_mirror.py``'s copy of the shipped
fixtures, an unreachable hub is a proxy on a closed local port, and GitHub's LFS answer is a stub.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scriptload import load_file

from real_runs import datafetch
from real_runs.data import BENCHMARKS, DataError, load_dataset_records
from real_runs.datafetch import SOURCES, FetchError, fetch, select

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MIRROR_SCRIPT = FIXTURES / "make_data_mirror.py"  # builds a local mirror of the sources


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone-layout mirror of the fixtures, and the table re-pinned to them."""
    folder = tmp_path / "mirror"
    monkeypatch.setattr(datafetch, "SOURCES", tuple(load_file(MIRROR_SCRIPT).build_mirror(folder, SOURCES)))
    return folder


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_every_file_a_command_reads_is_pinned_once() -> None:
    layout = {path for spec in BENCHMARKS.values() for path in spec.files.values()}
    dests = [s.dest for s in SOURCES]
    assert len(dests) == len(set(dests))
    assert layout <= set(dests)
    assert set(dests) == _files(FIXTURES / "data") - {"README.md"}   # the fixtures mirror the same layout
    for s in SOURCES:
        assert len(s.commit) == 40 and len(s.sha256) == 64 and s.size > 0 and s.rows > 0 and s.license
        assert s.url == f"https://raw.githubusercontent.com/{s.repo}/{s.commit}/{s.path}"


def test_the_data_page_names_each_pinned_file_its_source_and_rows() -> None:
    """docs/data.md's table: one row per data set, each file with its repository, path and row count."""
    rows = [line.split(" | ") for line in (ROOT / "docs" / "data.md").read_text(encoding="utf-8").splitlines()
            if re.match(r"\| `[a-z0-9]+` \| `", line)]
    assert list(dict.fromkeys(r[0].strip("| `") for r in rows)) == list(dict.fromkeys(s.name for s in SOURCES))
    for s in SOURCES:
        (files, counts, origin), = [r[1:4] for r in rows if r[0].strip("| `") == s.name and f"`{s.dest}`" in r[1]]
        assert f"{s.rows:,}" in counts.split(" / "), s.dest
        folder = s.path.rsplit("/", 1)[0] + "/"
        assert f"`{s.repo}`" in origin and (f"`{s.path}`" in origin or f"`{folder}`" in origin), s.dest


@pytest.mark.parametrize("raw", [False, True], ids=["clone-layout", "raw-url-layout"])
def test_fetch_from_a_mirror_writes_the_layout_every_loader_reads(tmp_path: Path, raw: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "mirror"
    monkeypatch.setattr(datafetch, "SOURCES", tuple(load_file(MIRROR_SCRIPT).build_mirror(folder, SOURCES, raw=raw)))
    out = tmp_path / "data"
    lines = fetch(out, select([]), folder, log=lambda line: None)
    assert len(lines) == len(SOURCES) and all(line.endswith("fetched") for line in lines)
    assert _files(out) == {s.dest for s in SOURCES} | {"SHA256SUMS", "SOURCES.md"}
    for s in SOURCES:
        assert (out / s.dest).read_bytes() == (FIXTURES / "data" / s.dest).read_bytes()
    sums = dict(reversed(line.split("  ")) for line in (out / "SHA256SUMS").read_text().splitlines())
    assert sums == {s.dest: _sha(out / s.dest) for s in SOURCES}          # hashed independently here
    monkeypatch.setenv("GDRO_DATA", str(out))
    for name, spec in BENCHMARKS.items():
        for split in spec.files:
            fetched = load_dataset_records(name, split)
            monkeypatch.setenv("GDRO_DATA", str(FIXTURES / "data"))
            assert fetched == load_dataset_records(name, split), name
            monkeypatch.setenv("GDRO_DATA", str(out))
    # a rerun checks and keeps every file
    before = {s.dest: (out / s.dest).stat().st_mtime_ns for s in SOURCES}
    assert all(line.endswith("already there") for line in fetch(out, select([]), folder, log=lambda line: None))
    assert before == {s.dest: (out / s.dest).stat().st_mtime_ns for s in SOURCES}


def test_gdro_data_fetch_only_writes_the_named_sets(mirror: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from gdro_cli.main import main

    out = tmp_path / "data"
    assert main(["data", "fetch", "--mirror", str(mirror), "--out", str(out), "--only", "math500,gpqa_diamond"]) == 0
    stdout = capsys.readouterr().out
    assert "math500/test.jsonl: 32 rows" in stdout and f"2 files in {out}" in stdout
    assert _files(out) == {"math500/test.jsonl", "gpqa_diamond/test.parquet", "SHA256SUMS", "SOURCES.md"}
    assert main(["data", "fetch", "--mirror", str(mirror), "--out", str(out), "--only", "aime24"]) == 0
    listed = [line.split("  ")[1] for line in (out / "SHA256SUMS").read_text().splitlines()]
    assert listed == ["math500/test.jsonl", "aime24/test.jsonl", "aime24/dapo_aime-2024.parquet",
                      "gpqa_diamond/test.parquet"]


def test_paper_fetches_every_file_the_paper_conversion_reads() -> None:
    from real_runs.verl.convert import paper_jobs

    fetched = {s.dest for s in select(["paper"])}
    for job in paper_jobs():
        spec = BENCHMARKS[job.name]
        assert spec.files[job.split or spec.default_split] in fetched, job
    assert "gsm8k/train.jsonl" not in fetched


def test_a_file_that_is_not_the_pinned_one_is_refused_and_not_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from gdro_cli.main import main

    folder = tmp_path / "mirror"
    load_file(MIRROR_SCRIPT).build_mirror(folder, SOURCES)     # the fixtures, under the real pins
    out = tmp_path / "data"
    assert main(["data", "fetch", "--mirror", str(folder), "--out", str(out), "--only", "math500"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "math500/test.jsonl" in err and "not the pinned" in err
    assert not out.exists()                   # no file, no .part, no folder


def test_a_file_already_there_with_other_content_is_never_overwritten(mirror: Path, tmp_path: Path) -> None:
    out = tmp_path / "data"
    mine = out / "math500" / "test.jsonl"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own edits\n")
    with pytest.raises(FetchError, match="exists with other content.*nothing was written"):
        fetch(out, select([]), mirror, log=lambda line: None)
    assert mine.read_text() == "my own edits\n"
    assert _files(out) == {"math500/test.jsonl"}


def test_a_file_missing_from_the_mirror_stops_before_anything_is_written(mirror: Path, tmp_path: Path) -> None:
    source = datafetch.SOURCES[-1]
    (mirror / source.repo / source.path).unlink()
    out = tmp_path / "data"
    with pytest.raises(FetchError, match=f"{source.dest}: not in the mirror"):
        fetch(out, select([]), mirror, log=lambda line: None)
    assert not out.exists() or _files(out) == set()


def test_an_unreachable_hub_is_one_line_naming_the_mirror(tmp_path: Path) -> None:
    """The download goes through a proxy on a closed local port: the connection is refused at once."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "hf_hub_offline", "hf_datasets_offline")}
    env.update(https_proxy="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    out = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "gdro_cli", "data", "fetch", "--out", str(out), "--only", "amc23"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "cannot reach raw.githubusercontent.com" in done.stderr and "--mirror DIR" in done.stderr
    assert not out.exists()                   # no file, no empty folder, no index of nothing


def test_hf_offline_asks_for_a_mirror_without_touching_the_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def no_network(*args, **kwargs):
        raise AssertionError("the network was used")

    monkeypatch.setattr(datafetch.urllib.request, "urlopen", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert datafetch.main(["fetch", "--out", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HF_HUB_OFFLINE is set" in err and "--mirror DIR" in err


def test_a_git_lfs_pointer_is_followed_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    content = (FIXTURES / "data" / "amc23" / "test.jsonl").read_bytes()
    source = datafetch.SourceFile("amc23", "amc23/test.jsonl", "o/r", "c" * 40, "amc23/test.jsonl",
                                  hashlib.sha256(content).hexdigest(), len(content), 24, "MIT")
    pointer = (b"version https://git-lfs.github.com/spec/v1\noid sha256:" + source.sha256.encode()
               + b"\nsize %d\n" % len(content))
    asked = []

    def urlopen(url: str, timeout: float):
        asked.append(url)
        return io.BytesIO(content if url.startswith(datafetch.LFS_URL) else pointer)

    monkeypatch.setattr(datafetch.urllib.request, "urlopen", urlopen)
    fetch(tmp_path, [source], None, log=lambda line: None)
    assert (tmp_path / "amc23" / "test.jsonl").read_bytes() == content
    assert asked == [source.url, f"{datafetch.LFS_URL}/o/r/{'c' * 40}/amc23/test.jsonl"]


def test_dry_run_lists_every_pin_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "data"
    assert datafetch.main(["fetch", "--out", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert not out.exists()
    for s in SOURCES:
        assert f"{s.dest}  <- {s.url}  sha256 {s.sha256}" in printed


def test_bad_names_and_paths_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert datafetch.main(["fetch", "--only", "math5000", "--dry-run"]) == 2
    assert "unknown data set 'math5000': did you mean 'math500'" in capsys.readouterr().err
    assert datafetch.main(["fetsh"]) == 2
    assert "use gdro data fetch" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert datafetch.main(["fetch", "--out", str(tmp_path / "afile"), "--mirror", str(tmp_path)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert datafetch.main(["fetch", "--out", str(tmp_path / "d"), "--mirror", str(tmp_path / "none")]) == 2
    assert "--mirror" in capsys.readouterr().err and not (tmp_path / "d").exists()


def test_the_default_folder_is_gdro_data_else_the_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GDRO_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert datafetch.main(["fetch", "--dry-run", "--only", "amc23"]) == 0
    assert f"into {tmp_path / 'cache' / 'gdro-lab' / 'data'} " in capsys.readouterr().out
    monkeypatch.setenv("GDRO_DATA", str(tmp_path / "mine"))
    assert datafetch.main(["fetch", "--dry-run", "--only", "amc23"]) == 0
    assert f"into {tmp_path / 'mine'} " in capsys.readouterr().out


def test_the_missing_data_error_names_the_fetch_and_gdro_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDRO_DATA", str(tmp_path))
    with pytest.raises(DataError) as err:
        load_dataset_records("aime25")
    message = str(err.value)
    assert "\n" not in message and "gdro data fetch" in message and "GDRO_DATA" in message
    assert "shared" not in message


def _expand_braces(text: str) -> str:
    """``a/{x,y}.z`` -> ``a/x.z a/y.z`` (how a README names two files of one folder)."""
    return re.sub(r"([\w/.-]*)\{([\w,]+)\}([\w.]*)",
                  lambda m: " ".join(m.group(1) + part + m.group(3) for part in m.group(2).split(",")), text)


def test_the_pins_are_the_files_of_the_full_data_and_their_readmes(shared_data: Path) -> None:
    """Independent reference: each pinned sha256 and size is the full data's file, and its folder's
    README names the same repository, path and commit."""
    for s in SOURCES:
        path = shared_data / s.dest
        assert (path.stat().st_size, _sha(path)) == (s.size, s.sha256), s.dest
        readme = _expand_braces((path.parent / "README.md").read_text(encoding="utf-8"))
        assert s.repo in readme and s.path in readme and s.commit in readme and s.sha256 in readme, s.dest
