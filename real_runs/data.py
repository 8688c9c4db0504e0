"""Math prompts with stable ids and worst-group labels, and our one prompt template.

Loaders return :class:`real_runs.types.Problem` records ``{id, problem, answer, source, group}``:
``id = "{source}:{split}:{row}"`` (the paper's UID); ``problem`` the bare question (source wrappers
removed, :func:`format_prompt` applies our one template); ``group`` MATH subject x level, else the
benchmark. Rows without a usable answer are skipped and counted. Departures from the released code:
- MATH levels 1 and 2 are merged but Precalculus and Prealgebra kept apart, as unrelated subjects;
- ``english_only=True`` (CJK rows dropped) keeps duplicate question texts, so ids stay row numbers.
Why, and the counts: docs/data.md#real_runs-data.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from real_runs.rewards.math import extract_last_boxed
from real_runs.types import Problem

if TYPE_CHECKING:
    from real_runs.config import TrainConfig

LOG = logging.getLogger("real_runs.data")

#: Appended to every question (paper.md section 6, the released training prompt).
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."

#: Instruction wrappers found in the source files, removed to recover the bare question.
_SUFFIXES = (
    " Let's think step by step and output the final answer within \\boxed{}.",
    " Please reason step by step, and put your final answer within \\boxed{}.",
    " Please reason step by step and output the final answer within \\boxed{}.",
    "Please reason step by step and put the answer index after ANSWER: ",
    '\n\nRemember to put your answer on its own line after "Answer:".',
)
_PREFIXES = (
    "Solve the following math problem step by step. The last line of your response should be of "
    "the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n",
)


#: CJK characters: Hiragana/Katakana, CJK extension A, unified ideographs, compatibility
#: ideographs, Hangul syllables. Fullwidth forms (DAPO writes "＄" in some English rows) are not text.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def has_cjk(text: str) -> bool:
    """True when ``text`` contains a CJK character (the row is not in the English subset)."""
    return _CJK.search(text) is not None


class DataError(ValueError):
    """A data set cannot be loaded; the message names the problem and the fix."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where a known data set lives under the data root.

    files: split name -> file path relative to the data root.
    default_split: the split loaded when none is asked for.
    """

    files: dict[str, str]
    default_split: str


#: Known data sets (the layout `gdro data fetch` writes). Evaluation sets use their "test" split.
BENCHMARKS: dict[str, BenchmarkSpec] = {
    "math500": BenchmarkSpec({"test": "math500/test.jsonl"}, "test"),
    "aime24": BenchmarkSpec({"test": "aime24/test.jsonl"}, "test"),
    "aime25": BenchmarkSpec({"test": "aime25/test.parquet"}, "test"),
    "amc23": BenchmarkSpec({"test": "amc23/test.jsonl"}, "test"),
    "minerva": BenchmarkSpec({"test": "minerva_math/test.jsonl"}, "test"),
    "olympiadbench": BenchmarkSpec({"test": "olympiadbench/test.jsonl"}, "test"),
    "gpqa": BenchmarkSpec({"test": "gpqa_diamond/test.parquet"}, "test"),
    "hmmt25": BenchmarkSpec({"test": "hmmt25/test.parquet"}, "test"),
    "gsm8k": BenchmarkSpec({"train": "gsm8k/train.jsonl", "test": "gsm8k/test.jsonl"}, "test"),
    "math": BenchmarkSpec({"train": "math/train.parquet", "test": "math/test.parquet"}, "train"),
    "dapo": BenchmarkSpec({"train": "dapo_math_17k/dapo_math_17k.parquet"}, "train"),
}


def user_data_folder(environ: Mapping[str, str] | None = None) -> Path:
    """The user's cache folder for data: ``$XDG_CACHE_HOME/gdro-lab/data``, else
    ``~/.cache/gdro-lab/data`` (where ``gdro data fetch`` writes by default)."""
    environ = os.environ if environ is None else environ
    cache = environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path(environ.get("HOME") or Path.home()).expanduser() / ".cache"
    return base / "gdro-lab" / "data"


def resolve_data_root(environ: Mapping[str, str], package_dir: Path) -> Path:
    """The data folder, in this order: ``$GDRO_DATA``; ``../shared/data`` beside a clone (the folder
    holding ``package_dir`` has a ``pyproject.toml`` and is no site-packages) when that folder
    exists; else :func:`user_data_folder`. An installed wheel never resolves inside its virtualenv."""
    env = environ.get("GDRO_DATA")
    if env:
        return Path(env).expanduser()
    clone = package_dir.parent
    shared = clone.parent / "shared" / "data"
    is_clone = (clone / "pyproject.toml").is_file() and clone.name not in ("site-packages", "dist-packages")
    if is_clone and shared.is_dir():
        return shared
    return user_data_folder(environ)


def data_root() -> Path:
    """The data folder every command reads (:func:`resolve_data_root` of this process)."""
    return resolve_data_root(os.environ, Path(__file__).resolve().parent)


# ----------------------------------------------------------------------------- template

def format_prompt(problem: Problem, tokenizer: Any = None) -> str:
    """Our one prompt: question + :data:`INSTRUCTION`, as a user turn of the chat template.

    Uses ``tokenizer.apply_chat_template(..., add_generation_prompt=True, tokenize=False)`` when
    the tokenizer has a chat template; plain text otherwise (or with no tokenizer).
    """
    text = f"{problem.problem.strip()} {INSTRUCTION}"
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                             add_generation_prompt=True, tokenize=False)
    return text


# ----------------------------------------------------------------------------- fields

def strip_wrapper(text: str) -> str:
    """Remove a known instruction prefix/suffix from a source prompt (see :data:`_SUFFIXES`)."""
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    for suffix in _SUFFIXES:
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return text.strip()


def math_group(subject: str, level: Any) -> str:
    """MATH subject x level label, levels 1 and 2 merged: ``"counting_and_probability:L1-2"``."""
    slug = re.sub(r"[^a-z0-9]+", "_", subject.lower().replace("&", "and")).strip("_")
    match = re.search(r"\d", str(level))
    if match is None:
        return f"{slug}:L?"
    number = int(match.group())
    return f"{slug}:L1-2" if number <= 2 else f"{slug}:L{number}"


def _clean_answer(value: Any) -> str:
    """Gold answer as a string: floats that are integers lose their ".0", AIME's "023" -> "23"."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):  # several accepted values: one comma-separated answer
        return ", ".join(_clean_answer(v) for v in value if _clean_answer(v))
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    text = str(value).strip()
    if re.fullmatch(r"0+\d+", text):
        text = text.lstrip("0")
    return text


def _get(row: dict[str, Any], *path: str) -> Any:
    value: Any = row
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def row_fields(row: dict[str, Any], source: str) -> tuple[str, str, str] | None:
    """(problem, answer, group) of one row in any supported layout, or None if unusable.

    Layouts: verl parquet (chat ``prompt`` list, ``reward_model.ground_truth`` a string or a dict
    with ``target``/``solution``), flat jsonl with ``problem``/``question`` and ``answer``,
    ``final_answer`` (OlympiadBench), GSM8K's ``#### answer`` or a ``solution`` with ``\\boxed{}``.
    """
    problem = _get(row, "extra_info", "raw_problem")
    if not problem:
        prompt = row.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
            problem = prompt[-1].get("content")
        elif isinstance(prompt, str):
            problem = prompt
    problem = problem or row.get("problem") or row.get("question")
    if not isinstance(problem, str) or not problem.strip():
        return None
    answer = _answer_of(row)
    if not answer:
        return None
    subject = row.get("subject") or row.get("type")
    level = row.get("level")
    group = source
    if level is not None and isinstance(subject, str) and _is_math_subject(subject):
        group = math_group(subject, level)
    return strip_wrapper(problem), answer, group


_MATH_SUBJECTS = {"algebra", "counting_and_probability", "geometry", "intermediate_algebra",
                  "number_theory", "prealgebra", "precalculus"}


def _is_math_subject(subject: Any) -> bool:
    return isinstance(subject, str) and math_group(subject, 3).split(":")[0] in _MATH_SUBJECTS


def _answer_of(row: dict[str, Any]) -> str:
    truth = _get(row, "reward_model", "ground_truth")
    if isinstance(truth, dict):
        return _clean_answer(truth.get("target")) or _boxed_answer(truth.get("solution"))
    if truth is not None:
        return _clean_answer(truth)
    if "final_answer" in row:
        final = row["final_answer"]
        finals = final if isinstance(final, list) else [final]
        return _clean_answer([str(f).replace("$", "") for f in finals if f])
    raw = row.get("answer")
    if isinstance(raw, str) and "####" in raw:
        return _clean_answer(raw.rsplit("####", 1)[1].replace(",", ""))
    if raw is not None and raw != "":
        return _clean_answer(raw)
    return _boxed_answer(row.get("solution"))


def _boxed_answer(solution: Any) -> str:
    """The last ``\\boxed{}`` of a worked solution, cleaned ("" when there is no solution text)."""
    return _clean_answer(extract_last_boxed(solution, 10_000)) if isinstance(solution, str) else ""


def records_from_rows(rows: Iterable[dict[str, Any] | None], source: str, split: str,
                      limit: int | None = None, english_only: bool = False,
                      dropped: list[int] | None = None) -> tuple[list[Problem], list[int]]:
    """Problems of ``rows`` (ids ``source:split:row``) and the row numbers skipped.

    ``limit`` keeps the first ``limit`` usable problems. ``english_only`` drops rows whose question
    has CJK characters; their row numbers are appended to ``dropped`` (not to the skipped ones).
    """
    records: list[Problem] = []
    skipped: list[int] = []
    for number, row in enumerate(rows):
        if limit is not None and len(records) >= limit:
            break
        fields = row_fields(row, source) if isinstance(row, dict) else None
        if fields is None:
            skipped.append(number)
            continue
        problem, answer, group = fields
        if english_only and has_cjk(problem):
            if dropped is not None:
                dropped.append(number)
            continue
        records.append(Problem(f"{source}:{split}:{number}", problem, answer, source, group))
    return records, skipped


# ----------------------------------------------------------------------------- files

def _iter_jsonl(path: Path) -> Iterator[dict[str, Any] | None]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                yield None  # a corrupt line is a skipped row, not a crash


def read_rows(path: Path) -> Iterable[dict[str, Any] | None]:
    """Rows of a .jsonl, .json (a list) or .parquet file."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _iter_jsonl(path)
    if suffix == ".json":
        payload = json.loads(path.read_text(encoding="utf-8"))
        return payload if isinstance(payload, list) else payload.get("data", [])
    if suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    raise DataError(f"{path}: unsupported file type {suffix!r}: use .jsonl, .json or .parquet")


def _summarise(source: str, split: str, skipped: list[int]) -> None:
    if skipped:
        shown = ", ".join(str(r) for r in skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        LOG.warning("%s:%s: skipped %d rows without a usable answer (rows %s)",
                    source, split, len(skipped), shown)


def load_with_skips(name_or_path: str, split: str | None = None, limit: int | None = None,
                    data_files: str | list[str] | None = None,
                    hf_config: str | None = None, english_only: bool = False,
                    dropped: list[int] | None = None) -> tuple[list[Problem], list[int]]:
    """Like :func:`load_dataset_records`, also returning the skipped row numbers.

    ``english_only`` drops rows with CJK characters before ``limit`` applies; their row numbers
    go to ``dropped`` when a list is given."""
    if data_files is None and name_or_path == "math" and split == MATH_12K:
        return _load_math_12k(limit)
    if data_files is None and name_or_path in BENCHMARKS:
        spec = BENCHMARKS[name_or_path]
        split = split or spec.default_split
        if split not in spec.files:
            choices = sorted(spec.files) + ([MATH_12K] if name_or_path == "math" else [])
            raise DataError(f"{name_or_path} has no split {split!r}: choose one of {choices}")
        return _load_file(_registered_path(spec.files[split]), name_or_path, split, limit, english_only, dropped)
    path = Path(name_or_path).expanduser()
    if data_files is None and path.is_file():
        return _load_file(path, path.parent.name or path.stem, split or path.stem, limit, english_only, dropped)
    if data_files is None and path.exists():
        raise DataError(f"data path {path} is a folder: pass a .jsonl/.parquet file inside it")
    if data_files is None and (name_or_path.startswith((".", "/", "~"))
                               or path.suffix.lower() in (".jsonl", ".json", ".parquet")):
        raise DataError(f"data file {path} does not exist: check the path")
    if data_files is None and "/" not in name_or_path:
        known = ", ".join(BENCHMARKS)
        raise DataError(f"unknown data set {name_or_path!r}: use one of {known}, a .jsonl/.parquet "
                        "file, or a Hugging Face dataset id (org/name)")
    return _load_hf(name_or_path, split or "train", limit, data_files, hf_config, english_only, dropped)


def _registered_path(relative: str) -> Path:
    path = data_root() / relative
    if not path.exists():
        raise DataError(f"data file {path} is missing: download the data sets with `gdro data fetch` "
                        f"or set GDRO_DATA to the folder that holds {relative} (docs/data.md)")
    return path


#: MATH's 12k train split (prm800k / Lightman et al.): all of train + the test rows not in MATH-500.
MATH_12K = "train12k"


def _load_math_12k(limit: int | None) -> tuple[list[Problem], list[int]]:
    """MATH train (7,500) + MATH test minus MATH-500 (4,500); ids keep their own split."""
    held_out = {p.problem for p in _load_file(_registered_path(BENCHMARKS["math500"].files["test"]),
                                              "math500", "test", None)[0]}
    train, skipped = _load_file(_registered_path(BENCHMARKS["math"].files["train"]), "math", "train", None)
    test, _ = _load_file(_registered_path(BENCHMARKS["math"].files["test"]), "math", "test", None)
    records = train + [p for p in test if p.problem not in held_out]
    return records[:limit] if limit is not None else records, skipped


def _load_file(path: Path, source: str, split: str, limit: int | None, english_only: bool = False,
               dropped: list[int] | None = None) -> tuple[list[Problem], list[int]]:
    try:
        records, skipped = records_from_rows(read_rows(path), source, split, limit, english_only, dropped)
    except (OSError, ValueError) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f"cannot read {path} ({err.__class__.__name__}: {err}): "
                        "check the file is complete .jsonl/.parquet") from None
    _summarise(source, split, skipped)
    return records, skipped


def _load_hf(name: str, split: str, limit: int | None, data_files: str | list[str] | None,
             hf_config: str | None, english_only: bool = False,
             dropped: list[int] | None = None) -> tuple[list[Problem], list[int]]:
    import datasets

    try:
        dataset = datasets.load_dataset(name, hf_config, split=split, data_files=data_files)
    except Exception as err:  # datasets raises many types (hub, file, split errors)
        raise DataError(f"cannot load Hugging Face dataset {name!r} split {split!r} "
                        f"({err.__class__.__name__}): check the id, split and network/cache") from None
    source = name if data_files is None else Path(str(
        data_files if isinstance(data_files, str) else data_files[0])).parent.name or name
    records, skipped = records_from_rows(iter(dataset), source, split, limit, english_only, dropped)
    _summarise(source, split, skipped)
    return records, skipped


def load_dataset_records(name_or_path: str, split: str | None = None, limit: int | None = None,
                         data_files: str | list[str] | None = None,
                         hf_config: str | None = None) -> list[Problem]:
    """Problems of a known data set (:data:`BENCHMARKS`), a local file, or a Hugging Face id.

    ``hf_config`` and ``data_files`` pass through to ``datasets.load_dataset(name_or_path,
    hf_config, split=split, data_files=...)`` (e.g. ``"open-r1/DAPO-Math-17k-Processed"`` with
    ``hf_config="en"``, or ``name_or_path="parquet"`` with local files). Skipped rows are counted
    in one warning line.
    """
    return load_with_skips(name_or_path, split, limit, data_files, hf_config)[0]


# ----------------------------------------------------------------------------- gdro train's data

def resolve_data_path(name: str) -> str:
    """Relative data paths are tried from the working directory, then from the repository root."""
    root = Path(__file__).resolve().parent.parent
    path = Path(name)
    if path.is_absolute() or path.exists() or not (root / path).exists():
        return name
    return str(root / path)


def load_train_records(cfg: TrainConfig) -> tuple[list[Problem], dict[str, int]]:
    """The training problems of ``cfg.data`` and counts: rows skipped (no answer), rows dropped by
    the English filter, problems kept (after ``data.limit``)."""
    dropped: list[int] = []
    records, skipped = load_with_skips(resolve_data_path(cfg.data.train), split=cfg.data.split or None,
                                       limit=cfg.data.limit or None, english_only=cfg.data.english_only,
                                       dropped=dropped)
    summary = {"skipped_without_answer": len(skipped), "dropped_cjk": len(dropped), "problems": len(records)}
    if not records:
        cjk = f" ({len(dropped)} rows dropped by data.english_only: set it to false)" if dropped else ""
        raise DataError(f"data.train={cfg.data.train!r} has no usable records (every row lacked a problem or "
                        f"an answer{cjk}): pass a data set with answers")
    return records, summary


def prompt_texts(records: list[Problem], tokenizer: Any, limit: int) -> tuple[list[Problem], list[str], int]:
    """(kept problems, their formatted prompts, how many were dropped as longer than ``limit`` tokens)."""
    kept, texts = [], []
    for problem in records:
        text = format_prompt(problem, tokenizer)
        if len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= limit:
            kept.append(problem)
            texts.append(text)
    if not kept:
        raise DataError(f"every training prompt is longer than rollout.max_prompt_tokens={limit}: raise it")
    return kept, texts, len(records) - len(kept)
