"""Loaders: every data set of ../shared/data, stable ids, MATH groups, skipped rows, the template."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from real_runs.data import (BENCHMARKS, DataError, INSTRUCTION, data_root, format_prompt,
                            load_dataset_records, load_with_skips, math_group, resolve_data_root, strip_wrapper,
                            user_data_folder)
from real_runs.types import Problem

#: Rows per (data set, split) in ../shared/data/README.md, and how many lack a usable answer.
EXPECTED = {
    ("math500", "test"): (500, 0), ("aime24", "test"): (30, 0), ("aime25", "test"): (30, 0),
    ("amc23", "test"): (40, 0), ("minerva", "test"): (272, 0), ("olympiadbench", "test"): (675, 0),
    ("gpqa", "test"): (198, 0), ("hmmt25", "test"): (30, 0), ("gsm8k", "train"): (7473, 0),
    ("gsm8k", "test"): (1319, 0), ("math", "test"): (5000, 0), ("dapo", "train"): (17917, 0),
    # 4 train rows have an empty target: 2 are recovered from the solution's \boxed{}, 2 have none.
    ("math", "train"): (7500, 2),
}


def test_registry_covers_every_file(data_dir: Path) -> None:
    shared_data = data_dir  # the fixtures keep every file
    listed = {spec_file for spec in BENCHMARKS.values() for spec_file in spec.files.values()}
    on_disk = {str(p.relative_to(shared_data)) for p in shared_data.glob("*/*")
               if p.suffix in (".jsonl", ".parquet")}
    # The DAPO copy of AIME24 (30 problems x 32 copies) loads as a path, not a benchmark name.
    assert on_disk - listed == {"aime24/dapo_aime-2024.parquet"}
    assert len(EXPECTED) == sum(len(spec.files) for spec in BENCHMARKS.values())


@pytest.mark.parametrize("name,split", sorted(EXPECTED))
def test_every_dataset_loads_with_counted_skips(shared_data: Path, name: str, split: str) -> None:
    rows, skips = EXPECTED[(name, split)]
    records, skipped = load_with_skips(name, split)
    assert len(records) + len(skipped) == rows
    assert len(skipped) == skips
    assert all(r.problem.strip() and r.answer.strip() for r in records)
    assert all(r.source == name for r in records)
    # Ids are source:split:row and unique; the row numbers skip exactly the skipped rows.
    rows_used = [int(r.id.rsplit(":", 1)[1]) for r in records]
    assert sorted(rows_used + skipped) == list(range(rows))
    assert all(r.id == f"{name}:{split}:{n}" for r, n in zip(records, rows_used))
    # Instruction wrappers are gone: our template adds the only instruction.
    assert not any("step by step" in r.problem[-120:] for r in records)
    assert not any("ANSWER:" in r.problem[-60:] for r in records)


def test_ids_equal_across_two_loads(data_dir: Path) -> None:
    first = load_dataset_records("dapo")
    second = load_dataset_records("dapo")
    assert [r.id for r in first] == [r.id for r in second]
    assert first == second


def test_answers_match_the_readme_rules(data_dir: Path) -> None:
    shared_data = data_dir  # the full data or the fixtures (same layout and quirks)
    aime24 = load_dataset_records("aime24")
    raw = [json.loads(line)["answer"] for line in open(shared_data / "aime24/test.jsonl")]
    assert [r.answer for r in aime24] == [str(int(a)) for a in raw]  # "023" -> "23"
    # The DAPO copy of AIME24 has the same 30 answers without zero padding.
    dapo_copy = load_dataset_records(str(shared_data / "aime24/dapo_aime-2024.parquet"))
    assert len(dapo_copy) == 32 * len(aime24) and {r.answer for r in dapo_copy} == {r.answer for r in aime24}
    assert dapo_copy[0].problem == aime24[0].problem or "Answer:" not in dapo_copy[0].problem
    amc = load_dataset_records("amc23")
    raw_amc = [json.loads(line)["answer"] for line in open(shared_data / "amc23/test.jsonl")]
    assert isinstance(raw_amc[0], float) and [r.answer for r in amc] == [str(int(a)) for a in raw_amc]  # 27.0 -> "27"
    assert all("." not in r.answer for r in amc)
    gsm = load_dataset_records("gsm8k", "test")
    assert all(r.answer.lstrip("-").replace(".", "").isdigit() for r in gsm)
    minerva = load_dataset_records("minerva")
    first = json.loads(open(shared_data / "minerva_math/test.jsonl").readline())
    assert minerva[0].answer == "1.6" and first["solution"].count("\\boxed{1.6}") == 1
    olympiad = load_dataset_records("olympiadbench")
    assert all("$" not in r.answer for r in olympiad)
    gpqa = load_dataset_records("gpqa")
    assert {r.answer[0] for r in gpqa} == set("ABCD") and all(r.answer[1] == ")" for r in gpqa)


def test_math_groups_are_subject_by_level(shared_data: Path) -> None:
    math500 = load_dataset_records("math500")
    raw = [json.loads(line) for line in open(shared_data / "math500/test.jsonl")]
    for record, row in zip(math500, raw):
        assert record.group == math_group(row["subject"], row["level"])
    groups = {r.group for r in math500}
    assert len(groups) == 7 * 4  # 7 subjects x (L1-2, L3, L4, L5)
    assert {"precalculus:L1-2", "prealgebra:L1-2", "counting_and_probability:L5"} <= groups
    assert {r.group for r in load_dataset_records("math", "test")} == groups
    assert {r.group for r in load_dataset_records("aime24")} == {"aime24"}


def test_math_group_labels() -> None:
    assert math_group("Intermediate Algebra", "Level 1") == "intermediate_algebra:L1-2"
    assert math_group("Counting & Probability", 2) == "counting_and_probability:L1-2"
    assert math_group("Number Theory", "Level 5") == "number_theory:L5"
    assert math_group("Geometry", "Level ?") == "geometry:L?"


def test_strip_wrapper_removes_every_known_instruction() -> None:
    assert strip_wrapper("Find x. Let's think step by step and output the final answer within "
                         "\\boxed{}.") == "Find x."
    dapo = ("Solve the following math problem step by step. The last line of your response should "
            "be of the form Answer: $Answer (without quotes) where $Answer is the answer to the "
            "problem.\n\nFind y.\n\nRemember to put your answer on its own line after \"Answer:\".")
    assert strip_wrapper(dapo) == "Find y."
    assert strip_wrapper("Untouched question?") == "Untouched question?"


def _write_jsonl(path: Path, rows: list) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_bad_rows_are_skipped_and_summarised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mine" / "test.jsonl"
    path.parent.mkdir()
    _write_jsonl(path, [
        {"problem": "1+1?", "answer": "2"},
        {"problem": "no answer", "answer": ""},
        "{not json",
        {"problem": "", "answer": "3"},
        {"question": "GSM style", "answer": "work\n#### 1,234"},
        {"problem": "boxed only", "solution": "so \\boxed{\\frac{1}{2}}."},
        {"problem": "null answer", "answer": None},
        [1, 2, 3],
        {"problem": "two roots", "reward_model": {"ground_truth": ["1", "-2"]}},
        {"question": "olympiad", "final_answer": ["$3$", "$5$"]},
    ])
    with caplog.at_level(logging.WARNING, logger="real_runs.data"):
        records, skipped = load_with_skips(str(path))
    assert [r.answer for r in records] == ["2", "1234", "\\frac{1}{2}", "1, -2", "3, 5"]
    assert [r.id for r in records] == ["mine:test:0", "mine:test:4", "mine:test:5", "mine:test:8",
                                       "mine:test:9"]
    assert skipped == [1, 2, 3, 6, 7]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["mine:test: skipped 5 rows without a usable answer (rows 1, 2, 3, 6, 7)"]


def test_limit_keeps_the_first_usable_rows(data_dir: Path) -> None:
    records = load_dataset_records("math500", limit=16)
    assert [r.id for r in records] == [f"math500:test:{i}" for i in range(16)]


def _verl_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows)


def test_verl_parquet_with_string_and_dict_ground_truth(tmp_path: Path) -> None:
    suffix = " Let's think step by step and output the final answer within \\boxed{}."
    rows = [
        {"prompt": [{"role": "user", "content": "Q0" + suffix}],
         "reward_model": {"ground_truth": {"target": "5", "solution": "\\boxed{5}"}, "style": "rule"},
         "level": "Level 4", "type": "Geometry"},
        {"prompt": [{"role": "user", "content": "Q1" + suffix}],
         "reward_model": {"ground_truth": {"target": "", "solution": "thus \\boxed{7}"}, "style": "rule"},
         "level": "Level 1", "type": "Prealgebra"},
        {"prompt": [{"role": "user", "content": "Q2"}],
         "reward_model": {"ground_truth": {"target": "", "solution": "none"}, "style": "rule"},
         "level": "Level 1", "type": "Prealgebra"},
    ]
    path = tmp_path / "verl" / "train.parquet"
    path.parent.mkdir()
    pq.write_table(_verl_table(rows), path)
    records, skipped = load_with_skips(str(path))
    assert [(r.problem, r.answer, r.group) for r in records] == [
        ("Q0", "5", "geometry:L4"), ("Q1", "7", "prealgebra:L1-2")]
    assert skipped == [2]


@pytest.mark.parametrize("builder,ext", [("parquet", "parquet"), ("json", "jsonl")])
def test_hugging_face_loader_on_local_files(tmp_path: Path, builder: str, ext: str) -> None:
    rows = [{"prompt": [{"role": "user", "content": f"Problem {i}"}],
             "reward_model": {"ground_truth": str(i * 3), "style": "rule"}} for i in range(5)]
    rows[2]["reward_model"]["ground_truth"] = ""
    path = tmp_path / "hubcopy" / f"train.{ext}"
    path.parent.mkdir()
    if ext == "parquet":
        pq.write_table(_verl_table(rows), path)
    else:
        _write_jsonl(path, rows)
    records, skipped = load_with_skips(builder, "train", data_files=str(path))
    assert [r.answer for r in records] == ["0", "3", "9", "12"]
    assert [r.id for r in records] == ["hubcopy:train:0", "hubcopy:train:1", "hubcopy:train:3",
                                       "hubcopy:train:4"]
    assert skipped == [2]


def test_bad_names_and_missing_files_are_one_line_errors(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(DataError, match="unknown data set 'math501'"):
        load_dataset_records("math501")
    with pytest.raises(DataError, match="has no split 'train'"):
        load_dataset_records("math500", "train")
    monkeypatch.setenv("GDRO_DATA", str(tmp_path))
    assert data_root() == tmp_path
    with pytest.raises(DataError, match="data file .*math500/test.jsonl is missing: download .* `gdro data fetch` or set GDRO_DATA") as err:
        load_dataset_records("math500")
    assert "\n" not in str(err.value)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n")
    with pytest.raises(DataError, match="unsupported file type"):
        load_dataset_records(str(bad))
    # a missing file is said to be missing (it used to be an "unknown data set")
    for name in (str(tmp_path / "nope.parquet"), "relative/rows.jsonl", "./rows"):
        with pytest.raises(DataError, match="data file .* does not exist: check the path"):
            load_dataset_records(name)
    with pytest.raises(DataError, match="is a folder"):
        load_dataset_records(str(tmp_path))


def test_english_only_drops_rows_with_cjk_text_before_the_limit(tmp_path: Path) -> None:
    rows = [{"problem": "What is 1+1?", "answer": "2"}, {"problem": "求 1+1 的值。", "answer": "2"},
            {"problem": "Prove $x=＄3$ (fullwidth dollar: still English).", "answer": "3"},
            {"problem": "次の値を求めよ: 2+2", "answer": "4"}, {"problem": "1+1은?", "answer": "2"},
            {"problem": "What is 2+3?", "answer": "5"}]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    dropped: list[int] = []
    records, skipped = load_with_skips(str(path), english_only=True, dropped=dropped, limit=2)
    assert [r.id.split(":")[-1] for r in records] == ["0", "2"]     # ids keep the file's row numbers
    assert dropped == [1] and skipped == []
    dropped = []
    records, _ = load_with_skips(str(path), english_only=True, dropped=dropped)
    assert [r.id.split(":")[-1] for r in records] == ["0", "2", "5"] and dropped == [1, 3, 4]
    assert len(load_dataset_records(str(path))) == 6


def test_dapo_english_subset_counts(shared_data: Path) -> None:
    """The shared DAPO-Math-17k: 3,432 rows with Han characters (its README), 14,485 English rows."""
    dropped: list[int] = []
    records, skipped = load_with_skips("dapo", english_only=True, dropped=dropped)
    assert (len(records), len(dropped), len(skipped)) == (14485, 3432, 0)
    assert len({r.problem for r in records}) == 14042     # distinct question texts (the paper: 14.1k)


def test_data_root_is_gdro_data_then_shared_data_beside_a_clone_then_the_user_cache(tmp_path: Path) -> None:
    clone = tmp_path / "work" / "gdro-lab"
    (clone / "real_runs").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\n")
    home = {"HOME": str(tmp_path / "home")}
    assert resolve_data_root(home, clone / "real_runs") == tmp_path / "home" / ".cache" / "gdro-lab" / "data"
    xdg = {**home, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert resolve_data_root(xdg, clone / "real_runs") == tmp_path / "xdg" / "gdro-lab" / "data"
    (tmp_path / "work" / "shared" / "data").mkdir(parents=True)
    assert resolve_data_root(xdg, clone / "real_runs") == tmp_path / "work" / "shared" / "data"
    assert resolve_data_root({**xdg, "GDRO_DATA": str(tmp_path / "mine")}, clone / "real_runs") == tmp_path / "mine"


def test_an_installed_package_never_looks_for_data_inside_its_virtualenv(tmp_path: Path) -> None:
    """A wheel's real_runs/ sits in site-packages; ``../shared/data`` next to it is inside the venv."""
    lib = tmp_path / "venv" / "lib" / "python3.11"
    (lib / "site-packages" / "real_runs").mkdir(parents=True)
    (lib / "shared" / "data").mkdir(parents=True)
    (lib / "site-packages" / "pyproject.toml").write_text("")   # even with a stray file there
    (tmp_path / "venv" / "lib" / "shared" / "data").mkdir(parents=True)
    found = resolve_data_root({"HOME": str(tmp_path / "home")}, lib / "site-packages" / "real_runs")
    assert found == tmp_path / "home" / ".cache" / "gdro-lab" / "data"


def test_data_root_of_this_checkout(monkeypatch) -> None:
    monkeypatch.delenv("GDRO_DATA", raising=False)
    repo = Path(__file__).resolve().parents[2]
    shared = repo.parent / "shared" / "data"
    assert data_root() == (shared if shared.is_dir() else user_data_folder())


class _ChatTokenizer:
    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt is True and tokenize is False
        return "<|user|>" + messages[0]["content"] + "<|assistant|>"


def test_format_prompt_uses_the_chat_template_when_present() -> None:
    problem = Problem("x:test:0", "  What is 1+1?  ", "2", "x", "x")
    plain = format_prompt(problem, None)
    assert plain == f"What is 1+1? {INSTRUCTION}"
    assert INSTRUCTION.endswith("within \\boxed{}.") and INSTRUCTION.startswith("Let's think")
    assert format_prompt(problem, _ChatTokenizer()) == f"<|user|>{plain}<|assistant|>"

    class NoTemplate:
        chat_template = None

    assert format_prompt(problem, NoTemplate()) == plain


def test_format_prompt_with_a_real_qwen_chat_template() -> None:
    transformers = pytest.importorskip("transformers")
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    from tokenizers import Tokenizer, models

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, "[UNK]")))
    tok.chat_template = template
    text = format_prompt(Problem("x:test:0", "Q?", "1", "x", "x"), tok)
    assert text == f"<|im_start|>user\nQ? {INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n"


def test_hugging_face_ids_pass_config_and_split(monkeypatch) -> None:
    """A hub id goes to datasets.load_dataset(id, config, split=...) (faked: no network in tests)."""
    import datasets

    seen = {}

    def fake_load(name, config, split, data_files):
        seen.update(name=name, config=config, split=split, data_files=data_files)
        return [{"prompt": "What is 2+2?", "solution": "4", "reward_model": {"ground_truth": "4"}}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    records = load_dataset_records("open-r1/DAPO-Math-17k-Processed", "train", hf_config="en")
    assert seen == {"name": "open-r1/DAPO-Math-17k-Processed", "config": "en", "split": "train",
                    "data_files": None}
    assert records == [Problem("open-r1/DAPO-Math-17k-Processed:train:0", "What is 2+2?", "4",
                               "open-r1/DAPO-Math-17k-Processed", "open-r1/DAPO-Math-17k-Processed")]


def test_hugging_face_failures_are_one_line_errors(monkeypatch) -> None:
    import datasets

    def failing(*args, **kwargs):
        raise ConnectionError("offline\nlong traceback text")

    monkeypatch.setattr(datasets, "load_dataset", failing)
    with pytest.raises(DataError, match="cannot load Hugging Face dataset 'org/none'") as err:
        load_dataset_records("org/none")
    assert "\n" not in str(err.value)


def test_math_12k_split_is_train_plus_test_minus_math500(shared_data: Path) -> None:
    records, skipped = load_with_skips("math", "train12k")
    assert len(records) + len(skipped) == 12_000 and len(skipped) == 2
    train = {r.problem for r in records if r.id.startswith("math:train:")}
    # One test problem (math:test:4656, an equilateral-triangle problem) repeats a train problem's
    # text; the split is defined by rows, so it stays (12,000 rows as in prm800k).
    assert len(train & {r.problem for r in records if r.id.startswith("math:test:")}) == 1
    math500 = {r.problem for r in load_dataset_records("math500")}
    assert not math500 & {r.problem for r in records}
    test_ids = [r.id for r in records if r.id.startswith("math:test:")]
    assert len(test_ids) == 4_500
    assert len(load_dataset_records("math", "train12k", limit=10)) == 10
