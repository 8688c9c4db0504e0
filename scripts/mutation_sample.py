"""A seeded sample of one-line mutants per package, each run against the tests that import its module.

mutmut (`scripts/mutation.sh`) mutates one file exhaustively; this script measures a whole package
cheaply: it lists every mutation site of the package's modules (an operator swapped, a comparison
flipped at its boundary, a constant off by one, a `not` or a minus dropped, a call, a raise or an
attribute/item assignment dropped), draws `--sample` of them with `random.Random(--seed)`, and runs
each mutant alone against the test files that import its module (directly first, then through the
modules that import it: at most `--max-test-files`), `pytest -x -m "not slow and not gpu and not
browser"`, under a timeout of four times the files' unmutated time plus 30 s. A mutant is killed when
a test fails or errors (an import error included), alive when every selected test passes, a timeout
when it runs past its limit. Test files that fail or take over `--baseline-limit` seconds unmutated
are left out (said on stdout), as are the loop replay (a hash, no named value) and the reports'
freshness check.

The package is mutated in a copy of the checkout (`--work`, a git worktree or any copy with the same
files): the file under test is rewritten there and put back after each mutant, never in the
checkout the command runs from. Results go to `--out/<package>.jsonl` (a rerun skips the mutants
already there), the summary and every survivor's changed line to stdout.

    python scripts/mutation_sample.py --work COPY gdro_lab simulators --sample 30 --seed 2026
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("gdro_lab", "simulators", "real_runs", "apps", "studykit", "gdro_cli")
LEFT_OUT_TESTS = ("tests/gdro_lab/test_loop_replay.py", "tests/studykit/test_report_freshness.py")
SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
         ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
         ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
         ast.In: ast.NotIn, ast.NotIn: ast.In, ast.And: ast.Or, ast.Or: ast.And}


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Nodes never mutated: docstrings, annotations, f-strings, `if __name__ == "__main__":` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = [node.returns] if node.returns else []
            parts += [a.annotation for a in ast.walk(node.args) if isinstance(a, ast.arg) and a.annotation]
        elif isinstance(node, ast.AnnAssign):
            parts = [node.annotation]
        elif isinstance(node, ast.JoinedStr):
            parts = [node]
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            parts = [node]
        for part in parts:
            skipped.update(id(child) for child in ast.walk(part))
    return skipped


def mutation_sites(source: str) -> list[tuple[int, int, int, int, str, str]]:
    """Every mutant of a module: (line, col, end line, end col, original text, replacement text)."""
    tree = ast.parse(source)
    skipped = _skipped_nodes(tree)
    sites = []
    for node in ast.walk(tree):
        if id(node) in skipped or not hasattr(node, "end_col_offset"):
            continue
        replacements: list[str] = []
        if isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
            replacements = [ast.unparse(ast.BinOp(node.left, SWAPS[type(node.op)](), node.right))]
        elif isinstance(node, ast.BoolOp):
            replacements = [ast.unparse(ast.BoolOp(SWAPS[type(node.op)](), node.values))]
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in SWAPS:
                    ops = list(node.ops)
                    ops[i] = SWAPS[type(op)]()
                    replacements.append(ast.unparse(ast.Compare(node.left, ops, node.comparators)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            replacements = [ast.unparse(node.operand)]
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            value = (not node.value) if isinstance(node.value, bool) else node.value + 1
            replacements = [repr(value)]
        elif isinstance(node, ast.AugAssign) and type(node.op) in SWAPS:
            replacements = [ast.unparse(ast.AugAssign(node.target, SWAPS[type(node.op)](), node.value))]
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) or isinstance(node, ast.Raise) or (
                isinstance(node, ast.Assign) and all(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets)):
            replacements = ["pass"]
        is_expression = isinstance(node, ast.expr)
        original = ast.get_source_segment(source, node) or ""
        for text in replacements:
            sites.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, original,
                          f"({text})" if is_expression else text))
    return sorted(set(sites))


def apply(source: str, site: tuple) -> str | None:
    """The module with one site replaced (byte offsets, as the AST gives them); None if that changes nothing."""
    line, col, end_line, end_col, _, text = site
    lines = source.encode().splitlines(keepends=True)
    start = sum(len(x) for x in lines[:line - 1]) + col
    end = sum(len(x) for x in lines[:end_line - 1]) + end_col
    data = source.encode()
    mutated = (data[:start] + text.encode() + data[end:]).decode()
    try:
        same = ast.dump(ast.parse(mutated)) == ast.dump(ast.parse(source))
    except SyntaxError:
        return None
    return None if same else mutated


def module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The known modules a file imports (absolute and relative imports, `from pkg import module` too)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = module_name(str(path)).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    text = path.read_text()
    found.update(m for m in known if "." in m and m in text)     # `python -m pkg.module`, patch("pkg.module.x")
    return found


def test_files_by_distance(work: Path) -> dict[str, list[str]]:
    """For every module of ours: the test files that reach it, nearest first (breadth-first over importers)."""
    sources = [p for pkg in PACKAGES for p in sorted((work / pkg).rglob("*.py"))]
    helpers = [p for p in sorted((work / "tests" / "apps").glob("*.py")) if not p.name.startswith(("test_", "conftest"))]
    known = {module_name(str(p.relative_to(work))) for p in sources} | {p.stem for p in helpers}
    importers: dict[str, set[str]] = {m: set() for m in known}
    tests = sorted(str(p.relative_to(work)) for p in (work / "tests").rglob("test_*.py"))
    for path in sources + helpers + [work / t for t in tests]:   # tests/apps' helpers are imported by their stem
        relative = str(path.relative_to(work))
        who = path.stem if path in helpers else relative if relative.startswith("tests/") else module_name(relative)
        for imported in imported_modules(path, known) - {who}:
            importers[imported].add(who)
    selection: dict[str, list[str]] = {}
    for module in known:
        seen, frontier, ordered = {module}, [module], []
        while frontier:
            nxt = sorted({w for m in frontier for w in importers.get(m, ()) if w not in seen})
            seen.update(nxt)
            ordered += [w for w in nxt if w.startswith("tests/") and w not in LEFT_OUT_TESTS]
            frontier = [w for w in nxt if not w.startswith("tests/")]
        own = re.compile(rf"(^|_){re.escape(module.rsplit('.', 1)[-1])}(_|$)")    # its own test file first
        ordered = [t for t in ordered if "browser" not in t]      # the browser tests: minutes each, marked browser
        selection[module] = [t for t in ordered if own.search(Path(t).stem)] + [
            t for t in ordered if not own.search(Path(t).stem)]
    return selection


def run_pytest(work: Path, files: list[str], limit: float) -> tuple[str, float, str]:
    """('passed' | 'failed' | 'empty' | 'timeout', seconds, first failing test) of one pytest run."""
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-m", "not slow and not gpu and not browser", "-rf", *files]
    environment = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=work, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return "timeout", time.monotonic() - start, ""
    except BaseException:                 # stopped (SIGTERM, Ctrl-C): no test process left behind
        os.killpg(process.pid, signal.SIGKILL)
        raise
    seconds = time.monotonic() - start
    failing = re.search(r"^(?:FAILED|ERROR) (\S+(?: - [^\n]{0,120})?)", output, re.M)   # the test and its error
    verdict = {0: "passed", 5: "empty"}.get(process.returncode, "failed")
    return verdict, seconds, failing.group(1) if failing else output.strip().splitlines()[-1:][0] if output.strip() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="+", choices=PACKAGES)
    parser.add_argument("--work", type=Path, required=True, help="a copy of the checkout to mutate (a git worktree)")
    parser.add_argument("--sample", type=int, default=25, help="mutants drawn per package (default 25)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--max-test-files", type=int, default=2)
    parser.add_argument("--baseline-limit", type=float, default=60.0, help="seconds; slower test files are left out")
    parser.add_argument("--out", type=Path, default=Path("mutation-sample"))
    parser.add_argument("--list", action="store_true", help="print the drawn mutants and their tests, run nothing")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # a stopped run puts the mutated file back
    work = args.work.resolve()
    if work == Path(__file__).resolve().parents[1]:
        parser.error("--work must be a copy of the checkout, not the checkout itself")
    selection = test_files_by_distance(work)
    args.out.mkdir(parents=True, exist_ok=True)
    baseline_path = args.out / "baseline.json"
    baseline = json.loads(baseline_path.read_text()) if baseline_path.exists() else {}
    for package in args.packages:
        files = sorted(str(p.relative_to(work)) for p in (work / package).rglob("*.py"))
        pool = [(f, site) for f in files for site in mutation_sites((work / f).read_text())]
        drawn = sorted(random.Random(f"{args.seed}:{package}").sample(pool, min(args.sample, len(pool))))
        results_path = args.out / f"{package}.jsonl"
        done = {r["id"]: r for r in map(json.loads, results_path.read_text().splitlines())} if results_path.exists() else {}
        print(f"== {package}: {len(drawn)} of {len(pool)} mutants (seed {args.seed})", flush=True)
        for path, site in drawn:
            key = f"{path}:{site[0]}:{site[1]}:{site[5]}"
            if key in done:
                continue
            tests = []
            for test in selection[module_name(path)]:
                if len(tests) == args.max_test_files:
                    break
                if test not in baseline and not args.list:
                    verdict, seconds, _ = run_pytest(work, [test], args.baseline_limit)
                    baseline[test] = {"verdict": verdict, "seconds": round(seconds, 1)}
                    baseline_path.write_text(json.dumps(baseline, indent=1, sort_keys=True))
                    if verdict != "passed":
                        print(f"   left out: {test} ({verdict} unmutated, {seconds:.0f} s)", flush=True)
                if args.list or (baseline[test]["verdict"] == "passed" and baseline[test]["seconds"] <= args.baseline_limit):
                    tests.append(test)
            change = f"{site[4].splitlines()[0] if site[4] else ''!s} -> {site[5]}"
            if args.list:
                print(f"   {path}:{site[0]} {change[:100]}  [{' '.join(tests)}]")
                continue
            original = (work / path).read_text()
            mutated = apply(original, site)
            record = {"id": key, "file": path, "line": site[0], "change": change[:200], "tests": tests}
            if mutated is None:
                record.update(verdict="equivalent (the same syntax tree)", seconds=0.0, by="")
            elif not tests:
                record.update(verdict="survived", seconds=0.0, by="no test reaches the module")
            else:
                limit = 30 + 4 * sum(baseline[t]["seconds"] for t in tests)
                try:
                    (work / path).write_text(mutated)
                    verdict, seconds, by = run_pytest(work, tests, limit)
                finally:
                    (work / path).write_text(original)
                record.update(verdict={"passed": "survived", "failed": "killed"}.get(verdict, verdict),
                              seconds=round(seconds, 1), by=by)
            done[key] = record
            with results_path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            print(f"   {record['verdict']:8s} {path}:{site[0]} {change[:90]}  {record['by'][:80]}", flush=True)
        if not args.list:
            summarize(package, [done[f"{p}:{s[0]}:{s[1]}:{s[5]}"] for p, s in drawn])
    return 0


def summarize(package: str, records: list[dict]) -> None:
    counts = {v: sum(r["verdict"] == v for r in records) for v in ("killed", "survived", "timeout")}
    scored = counts["killed"] + counts["survived"] + counts["timeout"]
    caught = counts["killed"] + counts["timeout"]
    print(f"== {package}: killed {counts['killed']}, survived {counts['survived']}, timeout {counts['timeout']}"
          f" (score {caught}/{scored} = {100 * caught / max(scored, 1):.0f}%)")
    for record in records:
        if record["verdict"] == "survived":
            print(f"   survived: {record['file']}:{record['line']} {record['change'][:110]}")


if __name__ == "__main__":
    sys.exit(main())
