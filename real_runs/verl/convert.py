"""Our data sets as verl parquet files, every set of a run in one command.

``python -m real_runs.verl.convert --data-dir DATA --out OUT paper`` writes the paper preset's sets
under OUT; ``python -m real_runs.verl.convert DATASET OUT.parquet`` converts one. Nothing is
overwritten. The files and fields: docs/verl-notes.md#real_runs-verl-convert.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from real_runs.data import BENCHMARKS, INSTRUCTION, DataError, load_with_skips
from real_runs.types import Problem
from real_runs.verl import VerlPluginError

#: The preset whose training and evaluation sets ``paper`` converts.
PAPER_PRESET = "paper-qwen3-1.7b"
#: Other names of registered data sets (the data folders' names) -> the registered name.
ALIASES = {"dapo_math_17k": "dapo", "minerva_math": "minerva", "gpqa_diamond": "gpqa"}
#: File name of the training set under --out (the launch scripts read it).
TRAIN_FILE = "dapo_train.parquet"


def verl_row(problem: Problem) -> dict:
    """One verl row for a Problem."""
    return {
        "data_source": problem.source,
        "prompt": [{"role": "user", "content": f"{problem.problem.strip()} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": problem.answer},
        "extra_info": {"index": problem.id, "group": problem.group},
    }


def write_parquet(problems: Iterable[Problem], path: str | Path) -> int:
    """Write the rows to ``path`` (refusing to overwrite an existing file); returns the row count."""
    target = Path(path)
    if target.exists():
        raise VerlPluginError(f"{target} already exists: choose another output file (nothing was overwritten)")
    check_folder(target.parent, "the output file's folder")
    rows = [verl_row(p) for p in problems]
    if not rows:
        raise VerlPluginError("no problems to write: check the data set name, split and --limit")
    ids = [r["extra_info"]["index"] for r in rows]
    if len(set(ids)) != len(ids):
        raise VerlPluginError("duplicate prompt ids: each Problem.id must be unique (source:split:row)")
    tmp = target.with_name(target.name + ".tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        tmp.replace(target)
    except OSError as err:  # a read-only or full disk: one line, no partial file left
        tmp.unlink(missing_ok=True)
        raise VerlPluginError(f"cannot write {target} ({err.strerror or err}): choose a writable output path") from err
    return len(rows)


def check_folder(folder: Path, what: str) -> None:
    """Refuse, in one line, a folder that cannot be made: it, or a folder above it, is a regular file."""
    for path in (folder, *folder.parents):
        if path.exists():
            if not path.is_dir():
                raise VerlPluginError(f"{what} {folder} cannot be created: {path} is a file, not a folder "
                                      "(choose another path; nothing was written)")
            return


@dataclass(frozen=True)
class Job:
    """One output file: a registered data set, its split, the English filter, the file name."""

    name: str
    split: str | None
    english_only: bool
    filename: str


def paper_jobs() -> list[Job]:
    """The paper preset's training set (its ``data.*``) and evaluation sets (its ``eval.benchmarks``)."""
    from real_runs.config import load_config

    cfg = load_config(PAPER_PRESET)
    train = ALIASES.get(cfg.data.train, cfg.data.train)
    jobs = [Job(train, cfg.data.split or None, cfg.data.english_only, TRAIN_FILE)]
    return jobs + [named_job(b) for b in cfg.eval.benchmarks]


def named_job(name: str) -> Job:
    """The job of a registered name or alias: training sets keep the English filter, test splits everything."""
    canonical = ALIASES.get(name, name)
    if canonical not in BENCHMARKS:
        known = ", ".join(["paper"] + sorted(BENCHMARKS) + [f"{a} (= {c})" for a, c in sorted(ALIASES.items())])
        raise VerlPluginError(f"unknown data set {name!r}: use one of {known}")
    if canonical == "dapo":
        return Job("dapo", None, True, TRAIN_FILE)
    return Job(canonical, None, False, f"{canonical}.parquet")


def jobs_for(names: Sequence[str]) -> list[Job]:
    """``paper`` expands to the preset's sets; each file is written once."""
    jobs: list[Job] = []
    for name in names:
        for job in paper_jobs() if name == "paper" else [named_job(name)]:
            if job.filename not in {j.filename for j in jobs}:
                jobs.append(job)
    return jobs


@contextmanager
def data_folder(data_dir: str | None) -> Iterator[Path]:
    """``--data-dir`` (set as ``$GDRO_DATA`` for the loaders while converting), else ``$GDRO_DATA``."""
    from real_runs.data import data_root

    previous = os.environ.get("GDRO_DATA")
    if data_dir is not None:
        os.environ["GDRO_DATA"] = str(Path(data_dir).expanduser())
    try:
        root = data_root()
        if not root.is_dir():
            given = "--data-dir" if data_dir is not None else ("GDRO_DATA" if previous else "the default")
            raise VerlPluginError(f"data folder {root} ({given}) does not exist: pass --data-dir DIR or set "
                                  "GDRO_DATA to the folder holding dapo_math_17k/, math500/, aime24/, ...")
        yield root
    finally:
        if previous is None:
            os.environ.pop("GDRO_DATA", None)
        else:
            os.environ["GDRO_DATA"] = previous


def convert_all(jobs: Sequence[Job], root: Path, out: Path) -> list[str]:
    """Write every job's parquet under ``out``; returns one report line per file.

    Checks every input file and output name first, so a missing file or an existing output writes nothing."""
    check_folder(out, "--out")
    for job in jobs:
        spec = BENCHMARKS[job.name]
        relative = spec.files[job.split or spec.default_split]
        if not (root / relative).is_file():
            raise VerlPluginError(f"{root / relative} is missing: --data-dir / GDRO_DATA must be the folder "
                                  f"holding {relative} (nothing was written)")
        if (out / job.filename).exists():
            raise VerlPluginError(f"{out / job.filename} already exists: choose another --out or remove it "
                                  "(nothing was written)")
    lines = []
    for job in jobs:
        dropped: list[int] = []
        problems, skipped = load_with_skips(job.name, job.split, english_only=job.english_only, dropped=dropped)
        count = write_parquet(problems, out / job.filename)
        notes = [f"English only: {len(dropped)} rows with CJK text dropped"] if job.english_only else []
        notes += [f"{len(skipped)} rows without an answer skipped"] if skipped else []
        lines.append(f"wrote {count} prompts to {out / job.filename}" + (f" ({'; '.join(notes)})" if notes else ""))
    return lines


def word_level_tokenizer(words: Iterable[str], path: str | Path):
    """A word-level fast tokenizer with a chat template over ``words``, saved to ``path`` and loaded back.

    For offline checks of converted data (verl's ``RLHFDataset``, the smoke run): no download, a
    vocabulary of exactly the given words plus ``<unk> <pad> <eos> <user> <assistant>``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    specials = ["<unk>", "<pad>", "<eos>", "<user>", "<assistant>"]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(specials + list(words)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    template = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
                "{% if add_generation_prompt %}<assistant> {% endif %}")
    fast = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", chat_template=template)
    fast.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m real_runs.verl.convert", description=__doc__.splitlines()[0],
        epilog="examples: python -m real_runs.verl.convert --data-dir DATA --out OUT paper  |  "
               "python -m real_runs.verl.convert math500 math500.parquet --limit 16")
    parser.add_argument("names", nargs="+", metavar="NAME",
                        help="with --out: paper and/or data set names; without: DATASET OUT.parquet")
    parser.add_argument("--out", metavar="DIR", help="folder for the parquet files (one per set)")
    parser.add_argument("--data-dir", metavar="DIR", help="the data folder (default: $GDRO_DATA)")
    parser.add_argument("--split", default=None, help="single-file form: split of the data set")
    parser.add_argument("--limit", type=int, default=None, help="single-file form: first N rows only")
    parser.add_argument("--english-only", action="store_true",
                        help="single-file form: drop rows whose question has CJK characters")
    return parser


def run(args: argparse.Namespace) -> list[str]:
    """The report lines of one invocation (raises VerlPluginError / DataError on bad input)."""
    if args.out is not None:
        if args.split is not None or args.limit is not None or args.english_only:
            raise VerlPluginError("--split, --limit and --english-only belong to the single-file form "
                                  "(DATASET OUT.parquet); with --out each set uses its preset setting")
        jobs = jobs_for(args.names)
        with data_folder(args.data_dir) as root:
            return convert_all(jobs, root, Path(args.out).expanduser())
    if len(args.names) != 2:
        raise VerlPluginError("give --out DIR with names (e.g. --out OUT paper), or DATASET OUT.parquet")
    dataset, output = args.names
    dataset = ALIASES.get(dataset, dataset)
    if dataset not in BENCHMARKS and args.data_dir is None:  # a file or a Hugging Face id
        problems, _ = load_with_skips(dataset, args.split, args.limit, english_only=args.english_only)
    else:
        with data_folder(args.data_dir):
            problems, _ = load_with_skips(dataset, args.split, args.limit, english_only=args.english_only)
    return [f"wrote {write_parquet(problems, output)} prompts to {output}"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lines = run(args)
    except (DataError, VerlPluginError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
