"""The data fixtures of a clone alone (tests/fixtures/data): every loader works on them, the real
rows are the first rows of the shared files, the layouts (columns, types, parquet schema) are the
shared files', and no GPQA row is copied."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from real_runs.data import BENCHMARKS, load_dataset_records, load_with_skips

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
#: file -> rows kept from the top of the shared file (tests/fixtures/make_data_fixtures.py)
REAL = {"dapo_math_17k/dapo_math_17k.parquet": 64, "math/train.parquet": 32, "math/test.parquet": 32,
        "math500/test.jsonl": 32, "gsm8k/train.jsonl": 32, "gsm8k/test.jsonl": 32,
        "minerva_math/test.jsonl": 32, "olympiadbench/test.jsonl": 32}
SYNTHETIC = {"aime24/test.jsonl": 24, "aime24/dapo_aime-2024.parquet": 24 * 32, "aime25/test.parquet": 24,
             "amc23/test.jsonl": 24, "hmmt25/test.parquet": 24, "gpqa_diamond/test.parquet": 24}


def _rows(path: Path) -> int:
    return pq.read_metadata(path).num_rows if path.suffix == ".parquet" else len(path.read_text().splitlines())


def test_fixture_folder_holds_every_registered_file_and_its_readme_lists_them() -> None:
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*")}
    registered = {f for spec in BENCHMARKS.values() for f in spec.files.values()}
    assert on_disk == set(REAL) | set(SYNTHETIC) and registered <= on_disk
    readme = (FIXTURES / "README.md").read_text()
    for name, rows in {**REAL, **SYNTHETIC}.items():
        assert f"`{name}`" in readme or f"`{name.split('/')[0]}/" in readme, name
        assert _rows(FIXTURES / name) == rows, name


@pytest.mark.parametrize("name,split", sorted((n, s) for n, spec in BENCHMARKS.items() for s in spec.files))
def test_every_registered_set_loads_from_the_fixtures(fixture_data: Path, name: str, split: str) -> None:
    records, skipped = load_with_skips(name, split)
    file = BENCHMARKS[name].files[split]
    assert len(records) == _rows(fixture_data / file) and skipped == []
    assert [r.id for r in records] == [f"{name}:{split}:{i}" for i in range(len(records))]
    assert all(r.problem.strip() and r.answer.strip() and r.source == name for r in records)
    assert not any("step by step" in r.problem[-120:] or "ANSWER:" in r.problem[-60:] for r in records)


def test_fixture_answers_keep_the_source_quirks(fixture_data: Path) -> None:
    aime24 = load_dataset_records("aime24")
    raw = [json.loads(line)["answer"] for line in open(fixture_data / "aime24/test.jsonl")]
    assert any(a.startswith("0") for a in raw) and [r.answer for r in aime24] == [str(int(a)) for a in raw]
    copy = load_dataset_records(str(fixture_data / "aime24/dapo_aime-2024.parquet"))
    assert [(r.problem, r.answer) for r in copy[:24]] == [(r.problem, r.answer) for r in aime24]
    assert [r.answer for r in load_dataset_records("amc23")] == [
        str(int(json.loads(line)["answer"])) for line in open(fixture_data / "amc23/test.jsonl")]
    gpqa = load_dataset_records("gpqa")
    assert {r.answer[:3] for r in gpqa} == {"A) ", "B) ", "C) ", "D) "}
    assert all(f"\n{r.answer}\n" in f"\n{r.problem}\n" for r in gpqa)       # the right option is offered
    assert {r.group for r in load_dataset_records("math500")} > {"precalculus:L1-2"}


@pytest.mark.parametrize("name,rows", sorted(REAL.items()))
def test_real_fixture_rows_are_the_first_rows_of_the_shared_file(shared_data: Path, name: str, rows: int) -> None:
    fixture, source = FIXTURES / name, shared_data / name
    if fixture.suffix == ".jsonl":
        with open(source, "rb") as handle:
            assert fixture.read_bytes() == b"".join(handle.readline() for _ in range(rows))
    else:
        assert pq.read_schema(fixture).equals(pq.read_schema(source), check_metadata=True)
        assert pq.read_table(fixture).to_pylist() == pq.read_table(source).slice(0, rows).to_pylist()


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_fixtures_have_the_shared_layout(shared_data: Path, name: str) -> None:
    fixture, source = FIXTURES / name, shared_data / name
    if fixture.suffix == ".parquet":
        assert pq.read_schema(fixture).equals(pq.read_schema(source), check_metadata=True)
        return
    want = json.loads(source.read_text().splitlines()[0])
    for line in fixture.read_text().splitlines():
        row = json.loads(line)
        assert {k: type(v) for k, v in row.items()} == {k: type(v) for k, v in want.items()}


def test_no_gpqa_question_is_copied(shared_data: Path) -> None:
    """Compared by hash of each user message and of each answer option text: nothing is printed."""
    def digests(path: Path) -> set[str]:
        rows = pq.read_table(path).to_pylist()
        texts = [r["prompt"][-1]["content"] for r in rows] + [r["reward_model"]["cleaned_ground_truth"] for r in rows]
        return {hashlib.sha256(t.encode()).hexdigest() for t in texts}

    assert not digests(FIXTURES / "gpqa_diamond/test.parquet") & digests(shared_data / "gpqa_diamond/test.parquet")


def test_the_generator_rebuilds_the_same_files(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from scriptload import load_file

    module = load_file(FIXTURES.parent / "make_data_fixtures.py")
    monkeypatch.setattr(module, "OUT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["make_data_fixtures.py", "--src", str(shared_data)])
    module.main()
    for name in {**REAL, **SYNTHETIC}:
        assert (tmp_path / name).read_bytes() == (FIXTURES / name).read_bytes(), name
