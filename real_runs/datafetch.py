"""`gdro data fetch`: the data sets every real run reads, pinned, checked and written in the data layout.

Each file is downloaded from the public repository that published it, at a pinned commit, and kept
only if its sha256 equals the pinned one: the bytes every number in the docs was computed on. The
layout is :data:`real_runs.data.BENCHMARKS`' (one folder per data set). DAPO-Math-17k is the
deduplicated copy (one row per problem, DAPO's instruction wrapper stripped); its English filter is
applied when a run loads it (``data.english_only``), so ids stay row numbers. ``--mirror DIR`` reads
the same files from a local folder instead of the network (docs/data.md#offline-a-local-mirror).

Written: the files, ``SHA256SUMS`` (``sha256sum -c`` format, every file in the folder) and
``SOURCES.md`` (where each file came from, its licence). Nothing is overwritten: a file that is there
with other content stops the command before anything is written.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Mapping, Sequence

from studykit.args import OneLineParser, did_you_mean

RAW_URL = "https://raw.githubusercontent.com"
#: GitHub serves a file stored with Git LFS from here (the raw URL gives its pointer).
LFS_URL = "https://media.githubusercontent.com/media"
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
_TIMEOUT_S = 60


class FetchError(RuntimeError):
    """The fetch cannot go on; the message is one line naming the problem and the fix."""


@dataclass(frozen=True)
class SourceFile:
    """One file of the data layout and where it comes from.

    name: the data set (a :data:`real_runs.data.BENCHMARKS` key); dest: path under the data folder;
    repo/commit/path: the GitHub repository, the pinned commit and the file's path there;
    sha256/size/rows: the pinned file; license: of the file and its content;
    hub: the same data on the Hugging Face hub, for reference only ("" when none is known).
    """

    name: str
    dest: str
    repo: str
    commit: str
    path: str
    sha256: str
    size: int
    rows: int
    license: str
    hub: str = ""

    @property
    def url(self) -> str:
        return f"{RAW_URL}/{self.repo}/{self.commit}/{self.path}"


_QWEN = ("QwenLM/Qwen2.5-Math", "a45202bd16f1ec06f433442dc1152d0074773465")
_DECS = ("pixas/DECS", "0d12e5362fa658fb3cfce8a646dfe9bf9c22e5ec")
_RL = ("TianHongZXY/rl-reasoning", "c90ce5c4ba10fd948d64ee956d3b561f883de166")
_GSM = ("openai/grade-school-math", "3101c7d5072418e28b9008a6636bde82a006892c")
_MAA = "problems (c) MAA, used for research evaluation"
_NO_LICENSE = "no licence file in the repository"

#: Every file of the layout, pinned. The training set first, then the evaluation sets.
SOURCES: tuple[SourceFile, ...] = (
    SourceFile("dapo", "dapo_math_17k/dapo_math_17k.parquet", "MasterVito/SvS",
               "9fd8f35375b31b8632b52e715296c264a3ad4176", "data/dapo_math_17k.parquet",
               "246ae23df97c9eae8126cb4da780e9a0a31d10110e16eed144bcecbf2132d535", 2773999, 17917,
               "Apache-2.0 (the repository; the hub card says apache-2.0)",
               "BytedTsinghua-SIA/DAPO-Math-17k (each problem 100 times, with DAPO's wrapper)"),
    SourceFile("math500", "math500/test.jsonl", "hkust-nlp/simpleRL-reason",
               "cf1c7858bfc145a27aa733e75d930d34f0d318a6", "examples/simplelr_math_eval/data/math500/test.jsonl",
               "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132", 446564, 500,
               "MIT (the folder; prm800k and MATH are MIT too)", "HuggingFaceH4/MATH-500"),
    SourceFile("aime24", "aime24/test.jsonl", *_QWEN, "evaluation/data/aime24/test.jsonl",
               "af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac", 156944, 30,
               f"MIT (the folder); {_MAA}", "HuggingFaceH4/aime_2024"),
    SourceFile("aime24", "aime24/dapo_aime-2024.parquet", "BytedTsinghua-SIA/DAPO",
               "33fe3176f0bb212588e84fc8ccf50dd554975144", "eval/aime-2024.parquet",
               "12154e38a716d12db5731f9a022ae69a610c4f7d0e0dcc04e902887a686877e7", 29619, 960,
               f"{_NO_LICENSE} (the hub card says apache-2.0); {_MAA}", "BytedTsinghua-SIA/AIME-2024"),
    SourceFile("aime25", "aime25/test.parquet", *_DECS, "data/aime2025/test.parquet",
               "ecb1bec89fe252b5f1bdad10e56193b8d0262126f6e1c2aa979d88beee6b8678", 13324, 30,
               f"{_NO_LICENSE}; {_MAA}", "opencompass/AIME2025"),
    SourceFile("amc23", "amc23/test.jsonl", *_QWEN, "evaluation/data/amc23/test.jsonl",
               "43707e1ca784602d8479de24ee8ce36609dbebc46dd152b0b12a46611aa898a4", 27631, 40,
               f"MIT (the folder); {_MAA}"),
    SourceFile("minerva", "minerva_math/test.jsonl", *_QWEN, "evaluation/data/minerva_math/test.jsonl",
               "0e656b430d3a0a1dab6aa853f453ba3805e28e2cabe4fc72486a897cc09d8ba2", 247267, 272,
               "MIT (the folder); problems from MIT OpenCourseWare"),
    SourceFile("olympiadbench", "olympiadbench/test.jsonl", *_QWEN, "evaluation/data/olympiadbench/test.jsonl",
               "bb8c1e38a16ea9eacb77530315a674d883f267fbff79183effc53681b4fcc416", 1493870, 675,
               "MIT (the folder)"),
    SourceFile("gpqa", "gpqa_diamond/test.parquet", *_DECS, "data/gpqa_diamond/test.parquet",
               "3c22b17932d50752db7895ceea2daf0ca08debb2ce5b1bcd9ecea0a2c3604f64", 93126, 198,
               f"GPQA is CC-BY-4.0 and its authors ask that it never appear as plain text; {_NO_LICENSE}",
               "Idavidrein/gpqa (gated; config gpqa_diamond)"),
    SourceFile("hmmt25", "hmmt25/test.parquet", *_DECS, "data/hmmt25/test.parquet",
               "62f571b945cf5e4f45a5424d733b6db5ecdf7f02e2046f6a14d46e8750bcbdde", 13216, 30,
               f"{_NO_LICENSE}; problems (c) HMMT", "MathArena/hmmt_feb_2025"),
    SourceFile("gsm8k", "gsm8k/train.jsonl", *_GSM, "grade_school_math/data/train.jsonl",
               "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465", 4166206, 7473,
               "MIT (c) 2021 OpenAI", "openai/gsm8k (config main)"),
    SourceFile("gsm8k", "gsm8k/test.jsonl", *_GSM, "grade_school_math/data/test.jsonl",
               "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14", 749738, 1319,
               "MIT (c) 2021 OpenAI", "openai/gsm8k (config main)"),
    SourceFile("math", "math/train.parquet", *_RL, "data/math/train.parquet",
               "193e73f43ed976b4ceec8015a92c7f55170bb061615437bd31ca6c2a28233c09", 4050196, 7500,
               "Apache-2.0 (the repository); MATH is MIT"),
    SourceFile("math", "math/test.parquet", *_RL, "data/math/test.parquet",
               "f6d8e5a1722faa042fbcbd74a4a56000aa01fc56e1ec2cdfd0d14d7fd4bac8f6", 2510918, 5000,
               "Apache-2.0 (the repository); MATH is MIT"),
)

#: Other spellings of the names (the folder names).
ALIASES = {"dapo_math_17k": "dapo", "minerva_math": "minerva", "gpqa_diamond": "gpqa"}
PAPER_PRESET = "paper-qwen3-1.7b"


def paper_names() -> list[str]:
    """The paper preset's training set and its evaluation sets (``data.train``, ``eval.benchmarks``)."""
    from real_runs.config import load_config

    cfg = load_config(PAPER_PRESET)
    return [ALIASES.get(n, n) for n in [cfg.data.train, *cfg.eval.benchmarks]]


def select(names: Sequence[str], sources: Sequence[SourceFile] | None = None) -> list[SourceFile]:
    """The files of ``names`` (``paper`` = :func:`paper_names`; none = every file), in table order."""
    sources = SOURCES if sources is None else sources
    known = list(dict.fromkeys(s.name for s in sources))
    wanted: set[str] = set()
    for name in names:
        if name == "paper":
            wanted.update(paper_names())
            continue
        canonical = ALIASES.get(name, name)
        if canonical not in known:
            hint = did_you_mean(name, known + list(ALIASES) + ["paper"])
            raise FetchError(f"unknown data set {name!r}{': ' + hint if hint else ''}: "
                             f"choose from paper, {', '.join(known)}")
        wanted.add(canonical)
    return [s for s in sources if not wanted or s.name in wanted]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def offline_setting(environ: Mapping[str, str]) -> str | None:
    """The variable that asks for no network (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` = 1/true/yes)."""
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if environ.get(key, "").strip().lower() in ("1", "true", "yes", "on"):
            return key
    return None


def mirror_file(mirror: Path, source: SourceFile) -> Path:
    """``MIRROR/owner/repo/commit/path`` (the raw URL's layout) or ``MIRROR/owner/repo/path`` (a clone)."""
    for candidate in (mirror / source.repo / source.commit / source.path, mirror / source.repo / source.path):
        if candidate.is_file():
            return candidate
    raise FetchError(f"{source.dest}: not in the mirror (looked for {mirror / source.repo / source.path}, "
                     f"also under the commit folder {source.commit}): put the repository's file there")


def _download(url: str, handle: BinaryIO) -> None:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
        shutil.copyfileobj(response, handle)


def _fetch_one(source: SourceFile, target: Path, mirror: Path | None) -> None:
    """Write ``source`` to ``target`` through a temporary file; keep it only if its sha256 is the pinned one."""
    tmp = target.with_name(target.name + ".part")
    made = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if mirror is not None:
            shutil.copyfile(mirror_file(mirror, source), tmp)
        else:
            with open(tmp, "wb") as handle:
                _download(source.url, handle)
            if tmp.stat().st_size < 1024 and tmp.read_bytes().startswith(_LFS_POINTER):
                with open(tmp, "wb") as handle:
                    _download(f"{LFS_URL}/{source.repo}/{source.commit}/{source.path}", handle)
        found = sha256_of(tmp)
        if found != source.sha256:
            where = f"the mirror's {mirror_file(mirror, source)}" if mirror is not None else source.url
            raise FetchError(f"{source.dest}: {where} has sha256 {found}, not the pinned {source.sha256} "
                             f"(not the file of commit {source.commit}): nothing was written for it")
        tmp.replace(target)
    except urllib.error.HTTPError as err:
        raise FetchError(f"{source.dest}: {source.url} answered HTTP {err.code} {err.reason}: "
                         "download it by hand into a mirror and pass --mirror DIR (docs/data.md)") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        reason = getattr(err, "reason", err)
        raise FetchError(f"cannot reach {RAW_URL.split('//')[1]} ({reason}): run where it is reachable, "
                         "or pass --mirror DIR with the files (docs/data.md#offline-a-local-mirror)") from None
    except OSError as err:
        raise FetchError(f"{source.dest}: {err.strerror or err} ({err.filename}): choose a writable --out "
                         "and a readable --mirror") from None
    finally:
        tmp.unlink(missing_ok=True)
        for folder in made:         # the folders this call made, when nothing was kept in them
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def existing_conflicts(out: Path, sources: Iterable[SourceFile]) -> list[str]:
    """Files already in ``out`` with other content than the pinned file (they are never overwritten)."""
    return [s.dest for s in sources if (out / s.dest).exists()
            and ((out / s.dest).is_dir() or sha256_of(out / s.dest) != s.sha256)]


def write_index(out: Path, sources: Sequence[SourceFile] | None = None) -> None:
    """``SHA256SUMS`` (hashed from the files) and ``SOURCES.md`` for every file of the table present in
    ``out``, each rewritten whole."""
    present = [s for s in (SOURCES if sources is None else sources) if (out / s.dest).is_file()]
    if not present:
        return
    sums = "".join(f"{sha256_of(out / s.dest)}  {s.dest}\n" for s in present)
    rows = "".join(f"| `{s.dest}` | {s.rows} | github.com/{s.repo} `{s.path}` at {s.commit} | {s.license} |\n"
                   for s in present)
    (out / "SHA256SUMS").write_text(sums, encoding="utf-8")
    (out / "SOURCES.md").write_text("# Data sets written by `gdro data fetch`\n\n"
                                    "| file | rows | source | licence |\n|---|---:|---|---|\n" + rows,
                                    encoding="utf-8")


def fetch(out: Path, sources: Sequence[SourceFile], mirror: Path | None = None,
          log: Callable[[str], None] = print) -> list[str]:
    """Every file of ``sources`` into ``out``, checked; returns the lines printed (one per file)."""
    if out.exists() and not out.is_dir():
        raise FetchError(f"--out {out} is a file, not a folder: choose a folder")
    if mirror is not None and not mirror.is_dir():
        raise FetchError(f"--mirror {mirror} is not a folder: pass the folder holding owner/repo/... files")
    conflicts = existing_conflicts(out, sources)
    if conflicts:
        raise FetchError(f"{out / conflicts[0]} exists with other content ({len(conflicts)} such file(s)): "
                         "move it away or choose another --out (nothing was written)")
    if mirror is not None:
        for source in sources:
            mirror_file(mirror, source)     # every file there before anything is written
    lines: list[str] = []
    try:
        for source in sources:
            target = out / source.dest
            state = "already there"
            if not target.exists():
                _fetch_one(source, target, mirror)
                state = "fetched"
            lines.append(f"{source.dest}: {source.rows} rows, sha256 {source.sha256[:16]}..., {state}")
            log(f"gdro data fetch: {lines[-1]}")
    finally:
        if out.is_dir():
            write_index(out)    # the files checked so far, also when a later one fails
    return lines


def describe(out: Path, sources: Sequence[SourceFile], mirror: Path | None) -> list[str]:
    """The dry run: each file, where it would come from, its pin and licence."""
    lines = [f"would write {len(sources)} files into {out} (and SHA256SUMS, SOURCES.md):"]
    for s in sources:
        origin = str(mirror / s.repo / s.path) if mirror is not None else s.url
        lines.append(f"  {s.dest}  <- {origin}  sha256 {s.sha256}  {s.size} bytes, {s.rows} rows; {s.license}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    from real_runs.data import user_data_folder

    parser = OneLineParser(prog="gdro data fetch", description=(
        "Download DAPO-Math-17k and the evaluation sets at pinned commits, check each file's sha256, and "
        "write them in the layout every command reads (docs/data.md)."))
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"data folder to write (default: $GDRO_DATA, else {user_data_folder()})")
    parser.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                        help="read the files from this folder (OWNER/REPO/PATH as in a clone, or "
                             "OWNER/REPO/COMMIT/PATH) instead of the network")
    parser.add_argument("--only", action="append", default=[], metavar="NAMES",
                        help="comma-separated data sets (paper = the paper preset's sets; default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be fetched; write nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: gdro data fetch [--out DIR] [--mirror DIR] [--only NAMES] [--dry-run]\n\n"
              "Run `gdro data fetch --help` for the options.")
        return 0
    if args[0] != "fetch":
        print(f"gdro data: unknown subcommand {args[0]!r}: use gdro data fetch", file=sys.stderr)
        return 2
    parsed = build_parser().parse_args(args[1:])
    from real_runs.data import user_data_folder

    out = parsed.out.expanduser() if parsed.out else Path(os.environ.get("GDRO_DATA") or user_data_folder())
    mirror = parsed.mirror.expanduser() if parsed.mirror else None
    try:
        sources = select([n for item in parsed.only for n in item.split(",") if n.strip()])
        if parsed.dry_run:
            print("\n".join(describe(out, sources, mirror)))
            return 0
        setting = offline_setting(os.environ)
        if mirror is None and setting:
            raise FetchError(f"{setting} is set (no network): pass --mirror DIR with the files "
                             "(docs/data.md#offline-a-local-mirror)")
        print(f"gdro data fetch: writing to {out}", flush=True)
        fetch(out, sources, mirror)
    except FetchError as err:
        print(f"gdro data fetch: {err}", file=sys.stderr)
        return 2
    from real_runs.data import data_root

    where = "" if data_root().resolve() == out.resolve() else f"; set GDRO_DATA={out} for the commands to read it"
    print(f"gdro data fetch: {len(sources)} files in {out} (checksums in SHA256SUMS){where}")
    return 0
