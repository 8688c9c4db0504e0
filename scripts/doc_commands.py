"""Run every shell command the documentation tells a user to type (README.md and docs/*.md).

Each fenced ``bash``/``sh``/``shell``/``console`` block is a test. By default it runs as written.
An HTML comment on the line(s) just above the fence (invisible on the rendered page) says how
else::

    <!-- doc-test: sub "--steps 1000" "--steps 4" -->          fixture-sized settings: replace text
    <!-- doc-test: append "gdro simulate" "--steps 4" -->      ... or add flags to each such command
    <!-- doc-test: gpu sub "train.steps=1000" "--dry-run" -->  needs a GPU: run the dry-run form
    <!-- doc-test: cluster validated-by "tests/...py::test_x" -->  composed and validated by a test
    <!-- doc-test: server 20 -->                                a server: pass if it is up after 20 s
    <!-- doc-test: env K=V -->                                  an environment variable
    <!-- doc-test: expect "figures in" -->                      the output must show this text (repeatable)
    <!-- doc-test: runs 3 -->                                   the commands must show at least 3 runs
    <!-- doc-test: skip "why" -->                               not a command to run (say why)

A command that runs but shows nothing fails. Every block that runs ``gdro app`` or ``gdro report`` must
show at least one run (``runs N`` asks for N; ``runs 0`` allows none): each ``gdro app`` command is run
again with ``--list-runs`` (the app's own data layer lists what the app would show, ``N runs listed
under ROOT``; a server block still has to stay up), and ``gdro report`` counts its ``... figures in ...``
lines. The fewest runs any of them shows decides. After the blocks, the README's ``gdro app`` example
(the table of jobs) is run with ``--list-runs`` in the same scratch copy and must list a run.

An unlabelled fence counts as a shell block when its first line starts like a command (``gdro``,
``python``, ``bash``, ``pip``). ``pip install`` runs as ``pip install --dry-run`` (CI has installed
every extra already, and a real install would point the environment at the scratch copy).

Directives combine (``gpu sub ... sub ...``). A ``gpu`` or ``cluster`` block must be run as a
dry run (``sub``) or name the test that composes and validates it (``validated-by``).

The blocks run in document order, in bash with ``set -euo pipefail``, inside a throw-away copy of
the repository (tracked and untracked files that git does not ignore; ``.venv`` linked to this
checkout's), with ``.venv/bin`` first on PATH, ``GDRO_DATA`` pointing at the shipped fixtures and
HOME in the scratch folder: nothing is written into the checkout. ::

    python scripts/doc_commands.py list          # every block and how it is tested
    python scripts/doc_commands.py check         # parse only: every directive valid (fast; a test runs it)
    python scripts/doc_commands.py run [-k TEXT] # run them (CI); a summary line at the end
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELLS = {"bash", "sh", "shell", "console"}
DIRECTIVE = re.compile(r"<!--\s*doc-test:(.*?)-->", re.S)
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
DEFAULT_TIMEOUT_S = 600


PIP_INSTALL = re.compile(r"((?:^|[\s;&|(])(?:\S*/)?pip3?) install(?! --dry-run)")
COMMAND_START = re.compile(r"^(gdro [a-z]|python3? (-m |[\w./-]+\.py)|bash \S|pip3? install|\.venv[\w-]*/bin/|nice )")


def append_flags(text: str, prefix: str, flags: str) -> tuple[str, int]:
    """Add ``flags`` to every line that starts with ``prefix`` (before its ``#`` comment, joined lines
    included: the flags go at the end of the command)."""
    lines, hits = text.split("\n"), 0
    i = 0
    while i < len(lines):
        if re.match(r"\s*(?:nice -n \d+ |[A-Z_]+=\S* )*" + re.escape(prefix) + r"(?:\s|$)", lines[i]):
            end = i
            while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
                end += 1
            code, hash_, comment = lines[end].partition(" #")
            lines[end] = f"{code.rstrip()} {flags}" + (f"  #{comment}" if hash_ else "")
            hits += 1
            i = end
        i += 1
    return "\n".join(lines), hits


class DocTestError(ValueError):
    """A directive or block that cannot be understood (file:line and what is wrong)."""


@dataclass
class Block:
    """One shell block of a page and how it is tested."""

    path: str
    line: int
    text: str
    subs: list[tuple[str, str]] = field(default_factory=list)
    appends: list[tuple[str, str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    mode: str = "run"  # run | skip | server
    needs: str = ""  # "" | gpu | cluster
    reason: str = ""
    validated_by: str = ""
    server_s: float = 0.0
    expects: list[str] = field(default_factory=list)
    min_runs: int | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def command(self) -> str:
        """The block's text after its substitutions; each must match, or the docs changed under it."""
        text = self.text
        for old, new in self.subs:
            if old not in text:
                raise DocTestError(f"{self.where}: sub {old!r} does not occur in the block")
            text = text.replace(old, new)
        for prefix, flags in self.appends:
            text, hits = append_flags(text, prefix, flags)
            if not hits:
                raise DocTestError(f"{self.where}: append: no command starts with {prefix!r}")
        return PIP_INSTALL.sub(r"\1 install --dry-run --quiet", text)

    @property
    def kind(self) -> str:
        if self.mode == "skip":
            return "skipped"
        if self.needs and self.validated_by and not (self.subs or self.appends):
            return f"{self.needs}: validated by a test"
        if self.needs:
            return f"{self.needs}: dry run"
        return "server" if self.mode == "server" else "run"


def parse_directive(text: str, where: str) -> dict[str, object]:
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise DocTestError(f"{where}: doc-test directive does not parse ({err})") from None
    subs: list[tuple[str, str]] = []
    appends: list[tuple[str, str]] = []
    env: dict[str, str] = {}
    expects: list[str] = []
    out: dict[str, object] = {"subs": subs, "appends": appends, "env": env, "expects": expects}
    i = 0
    while i < len(words):
        word = words[i]

        def arg(n: int = 1) -> list[str]:
            got = words[i + 1:i + 1 + n]
            if len(got) != n:
                raise DocTestError(f"{where}: doc-test `{word}` needs {n} argument(s)")
            return got

        if word == "sub":
            old, new = arg(2)
            subs.append((old, new))
            i += 3
        elif word == "append":
            prefix, flags = arg(2)
            appends.append((prefix, flags))
            i += 3
        elif word == "env":
            (pair,) = arg()
            if "=" not in pair:
                raise DocTestError(f"{where}: doc-test env wants K=V, got {pair!r}")
            key, value = pair.split("=", 1)
            env[key] = value
            i += 2
        elif word in ("skip", "validated-by"):
            (value,) = arg()
            out["reason" if word == "skip" else "validated_by"] = value
            if word == "skip":
                out["mode"] = "skip"
            i += 2
        elif word in ("gpu", "cluster"):
            out["needs"] = word
            i += 1
        elif word == "server":
            (seconds,) = arg()
            out["mode"], out["server_s"] = "server", float(seconds)
            i += 2
        elif word == "expect":
            (text,) = arg()
            expects.append(text)
            i += 2
        elif word == "runs":
            (count,) = arg()
            if not count.isdigit():
                raise DocTestError(f"{where}: doc-test runs wants a number of runs (0 or more), got {count!r}")
            out["min_runs"] = int(count)
            i += 2
        else:
            raise DocTestError(f"{where}: unknown doc-test word {word!r} (sub, append, env, gpu, cluster, server, "
                               "expect, runs, validated-by, skip)")
    return out


def blocks_of(path: Path, root: Path = ROOT) -> list[Block]:
    """The shell blocks of one page with their directives."""
    rel = str(path.relative_to(root))
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, lang = match.group(2), match.group(3).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = "\n".join(lines[i + 1:end]).strip()
        if lang in SHELLS or (not lang and COMMAND_START.match(body)):
            above = "\n".join(lines[max(0, i - 6):i])
            found = DIRECTIVE.findall(above.split("```")[-1])
            settings = parse_directive(found[-1], f"{rel}:{i + 1}") if found else {}
            block = Block(rel, i + 1, "\n".join(lines[i + 1:end]), **settings)  # type: ignore[arg-type]
            validate(block)
            blocks.append(block)
        i = end + 1
    return blocks


def validate(block: Block) -> None:
    if block.needs and block.mode != "skip" and not (block.subs or block.appends or block.validated_by):
        raise DocTestError(f"{block.where}: a {block.needs} block must run as a dry run (sub ...) or name the "
                           "test that composes it (validated-by ...)")
    if block.validated_by:
        test_file = block.validated_by.split("::")[0]
        if not (ROOT / test_file).is_file():
            raise DocTestError(f"{block.where}: validated-by names {test_file}, which does not exist")
        if "::" in block.validated_by:
            name = block.validated_by.split("::")[1]
            if f"def {name}(" not in (ROOT / test_file).read_text(encoding="utf-8"):
                raise DocTestError(f"{block.where}: validated-by names {block.validated_by}, which does not exist")
    if block.mode == "skip" and not block.reason:
        raise DocTestError(f"{block.where}: skip needs a reason")
    block.command()  # every sub must match


def pages(root: Path = ROOT) -> list[Path]:
    docs = sorted(p for p in (root / "docs").rglob("*.md") if "reports" not in p.relative_to(root / "docs").parts)
    return [root / "README.md", *docs]


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [b for page in pages(root) for b in blocks_of(page, root)]


def scratch_copy(dest: Path) -> Path:
    """A copy of the checkout's files (tracked + untracked, not ignored), .venv linked."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    repo = dest / "repo"
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_symlink():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), repo / rel)
        elif src.is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / rel)
    for venv in (".venv", ".venv-verl"):
        if (ROOT / venv).exists():
            os.symlink(ROOT / venv, repo / venv)
    return repo


#: A `gdro app` / `gdro report` command at the start of a line (after `nice -n N` or `K=V`).
APP_COMMAND = re.compile(r"^\s*(?:nice -n \d+ |[A-Z_]+=\S* )*(?:\S*/)?gdro app(?:\s|$)")
REPORT_COMMAND = re.compile(r"^\s*(?:nice -n \d+ |[A-Z_]+=\S* )*(?:\S*/)?gdro report(?:\s|$)", re.M)
#: What `gdro app --list-runs` ends with, and each run `gdro report` drew.
RUN_COUNT = re.compile(r"^(\d+) runs? listed under ", re.M)
REPORT_RUN = re.compile(r": \d+ figures in ", re.M)


def listing_commands(command: str) -> list[str]:
    """Each `gdro app` command of a block (continued lines joined) with ``--list-runs`` added: what the
    app would list, from its own data layer, without starting a server."""
    out, lines, i = [], command.split("\n"), 0
    while i < len(lines):
        if APP_COMMAND.match(lines[i]):
            parts = [lines[i]]
            while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
            text = " ".join(part.rstrip().rstrip("\\").strip() for part in parts).partition(" #")[0].strip()
            out.append(text if "--list-runs" in text.split() else f"{text} --list-runs")
        i += 1
    return out


def shown_problem(block: Block, out: str) -> str | None:
    """Why a block that ran shows nothing: an ``expect`` text missing, or fewer runs than ``runs N``
    (default 1 for a block with a `gdro app` or `gdro report` command); None when it shows enough."""
    for text in block.expects:
        if text not in out:
            return f"the output does not show {text!r} (expect)"
    command = block.command()
    reports = REPORT_COMMAND.search(command) is not None
    need = block.min_runs if block.min_runs is not None else (1 if reports or listing_commands(command) else None)
    if not need:
        return None
    counts = [int(count) for count in RUN_COUNT.findall(out)] + ([len(REPORT_RUN.findall(out))] if reports else [])
    if not counts:
        return (f"the output shows no count of runs (runs {need} wants `gdro app ... --list-runs` or "
                "`gdro report` output)")
    if min(counts) < need:
        return f"the output shows {min(counts)} run(s) where at least {need} are expected: the command ran and showed nothing"
    return None


def block_env(repo: Path, home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment every block runs in (the scratch copy's .venv first on PATH, fixtures as data)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "GDRO_"))}
    env.update({"HOME": str(home), "PATH": f"{repo / '.venv' / 'bin'}:{env.get('PATH', '')}",
                "GDRO_DATA": str(repo / "tests" / "fixtures" / "data"), "PYTHONPATH": str(repo),
                "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"})
    env.update(extra)
    return env


def run_block(block: Block, repo: Path, home: Path, timeout_s: float) -> tuple[bool, str, float]:
    """Run a block: it passes when it exits 0 (a server: when it is still up after its wait) and its
    output shows what it should (:func:`shown_problem`)."""
    env = block_env(repo, home, block.env)
    script = "set -euo pipefail\n" + block.command() + "\n"
    start = time.monotonic()
    proc = subprocess.Popen(["bash", "-c", script], cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    limit = block.server_s if block.mode == "server" else timeout_s
    try:
        out, _ = proc.communicate(timeout=limit)
        ok = proc.returncode == 0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        ok = block.mode == "server"  # a server still up after its wait is the pass
        if not ok:
            out += f"\n[doc-test: timed out after {limit:.0f} s]"
    if ok:
        for listing in listing_commands(block.command()) if "--list-runs" not in block.command() else []:
            listed = subprocess.run(["bash", "-c", "set -euo pipefail\n" + listing], cwd=repo, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
            out += f"\n[doc-test: $ {listing}]\n{listed.stdout}"
            ok = ok and listed.returncode == 0
    problem = shown_problem(block, out) if ok else None
    if problem is not None:
        ok, out = False, f"{out}\n[doc-test: {problem}]"
    return ok, out, time.monotonic() - start


#: Parses a `gdro` command line with the real parsers and stops there (nothing runs): used for the
#: one-line commands in the README's table of jobs, whose placeholders (S, R*) cannot run as typed.
PARSE_ONLY = """
import argparse, sys
from gdro_cli.main import main
class Parsed(Exception):
    pass
def stop_after(method):
    def parse(self, *args, **kwargs):
        method(self, *args, **kwargs)  # exits 2 with argparse's message on a bad command line
        raise Parsed()
    return parse
for name in ("parse_args", "parse_intermixed_args"):
    setattr(argparse.ArgumentParser, name, stop_after(getattr(argparse.ArgumentParser, name)))
try:
    main(sys.argv[1:])
except Parsed:
    sys.exit(0)
sys.exit(1)
"""


def table_commands(path: Path = ROOT / "README.md") -> list[tuple[str, str]]:
    """The commands of the README's table of jobs ("## Five jobs"): (file:line, command) per code span."""
    out, in_table = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if line.startswith("## "):
            in_table = line.strip() == "## Five jobs"
        if in_table and line.startswith("|"):
            for span in re.findall(r"`([^`]+)`", line):
                if span.startswith(("gdro ", "bash ")):
                    out.append((f"{path.relative_to(ROOT)}:{number}", span))
    return out


def check_table_command(where: str, command: str, repo: Path) -> tuple[bool, str]:
    """Each `gdro ...` part parses with the real CLI (`gdro train` also resolves its config and overrides
    with --print-config); a `bash SCRIPT` exists and is valid bash."""
    for part in command.split("&&"):
        words = shlex.split(part)
        if words[0] == "gdro":
            env = {**os.environ, "PYTHONPATH": str(repo), "GDRO_DATA": str(repo / "tests" / "fixtures" / "data")}
            if words[1:2] == ["train"]:  # the config and its overrides resolve too; nothing is loaded
                argv = ["-m", "gdro_cli.main", *words[1:], "--print-config"]
            else:
                argv = ["-c", PARSE_ONLY, *words[1:]]
            proc = subprocess.run([sys.executable, *argv], cwd=repo, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                return False, f"{where}: `{part.strip()}` does not parse: {proc.stderr.strip()[-400:]}"
        elif words[0] == "bash":
            script = repo / words[1]
            if not script.is_file():
                return False, f"{where}: {words[1]} does not exist"
            proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            if proc.returncode != 0:
                return False, f"{where}: {words[1]} is not valid bash: {proc.stderr.strip()}"
    return True, ""


def check_table_app_lists_runs(where: str, command: str, repo: Path, home: Path) -> tuple[bool, str]:
    """The README's `gdro app` example, run with ``--list-runs`` in the scratch copy after the blocks
    (which wrote runs there): it must list at least one run."""
    listing = f"{command} --list-runs"
    proc = subprocess.run(["bash", "-c", listing], cwd=repo, env=block_env(repo, home, {}), capture_output=True,
                          text=True, timeout=120)
    counts = [int(count) for count in RUN_COUNT.findall(proc.stdout)]
    if proc.returncode != 0 or not counts or min(counts) < 1:
        shown = (proc.stdout + proc.stderr).strip().split("\n")[-1]
        return False, f"{where}: `{listing}` lists no run: {shown}"
    return True, ""


def cmd_list(blocks: list[Block]) -> int:
    for block in blocks:
        first = block.text.strip().split("\n")[0][:90]
        print(f"{block.where:32s} {block.kind:26s} {first}")
    return 0


def counts(blocks: list[Block]) -> dict[str, int]:
    """How many blocks run, run as GPU/cluster dry runs, are validated by a test, are skipped."""
    out = {"run": 0, "dry": 0, "validated": 0, "skipped": 0}
    for block in blocks:
        kind = block.kind
        key = ("skipped" if kind == "skipped" else "validated" if kind.endswith("validated by a test")
               else "dry" if block.needs else "run")
        out[key] += 1
    return out


def summary(blocks: list[Block], failed: int | None = None) -> str:
    c = counts(blocks)
    text = (f"doc commands: {len(blocks)} blocks: {c['run'] + c['dry']} run ({c['dry']} of them GPU/cluster "
            f"commands as dry runs), {c['validated']} GPU/cluster-only validated by tests, {c['skipped']} skipped")
    return text if failed is None else f"{text}; {failed} failed"



def cmd_run(blocks: list[Block], patterns: list[str] | None, timeout_s: float) -> int:
    chosen = [b for b in blocks if not patterns or any(p in b.where or p in b.text for p in patterns)]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="gdro-doctest-") as tmp:
        repo = scratch_copy(Path(tmp))
        home = Path(tmp) / "home"
        home.mkdir()
        table = [] if patterns else table_commands()
        for where, command in table:
            ok, message = check_table_command(where, command, repo)
            print(f"{'ok  ' if ok else 'FAIL'}   parse  {where}  {command}", flush=True)
            failed += not ok
            if not ok:
                print("    " + message)
        for block in chosen:
            if block.mode == "skip" or block.kind.endswith("validated by a test"):
                continue
            ok, out, seconds = run_block(block, repo, home, timeout_s)
            print(f"{'ok  ' if ok else 'FAIL'} {seconds:6.1f} s  {block.where}  ({block.kind})", flush=True)
            if not ok:
                failed += 1
                print("    $ " + block.command().strip().replace("\n", "\n    $ "))
                print("    " + "\n    ".join(out.strip().split("\n")[-25:]), flush=True)
        for where, command in table:  # after the blocks, which wrote the runs it opens
            if command.startswith("gdro app"):
                ok, message = check_table_app_lists_runs(where, command, repo, home)
                print(f"{'ok  ' if ok else 'FAIL'}   lists  {where}  {command}", flush=True)
                failed += not ok
                if not ok:
                    print("    " + message)
    print(summary(chosen, failed))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the shell commands of README.md and docs/*.md.")
    parser.add_argument("action", choices=["list", "check", "run"])
    parser.add_argument("-k", dest="patterns", action="append",
                        help="only blocks whose file:line or text contains this (repeat: any of them, in file "
                             "order; e.g. -k README.md:4 -k docs/app.md for the app's blocks on the README's runs)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per block")
    args = parser.parse_args(argv)
    try:
        blocks = all_blocks()
    except DocTestError as err:
        print(f"doc_commands: {err}", file=sys.stderr)
        return 2
    if args.action == "list":
        return cmd_list(blocks)
    if args.action == "check":
        print(summary(blocks))
        return 0
    return cmd_run(blocks, args.patterns, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
