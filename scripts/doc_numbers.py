"""Fill the marked numbers of the docs from the JSON files the commands write.

A number in a page is marked with its source, so it cannot go stale silently:

    <!-- num: reports/arena/summary.json#paper_scale.gdro_prompt.var_fraction_of_oracle scale=100 fmt=.1f pm -->71.5 ± 0.2<!-- /num -->

The part before ``#`` is a JSON file relative to the repository root; the part after it is the
path to the value: keys separated by dots, list positions as integers, a key that holds a dot in
brackets (``lr_sweep.grpo.[0.707107].test/accuracy``), ``*`` for every key or item of a level
(then ``agg=`` must reduce the values to one). Options, each ``name=value`` or a bare flag:

- ``scale=X``   multiply the value by X (``100`` for a fraction shown in percent or pp);
- ``fmt=SPEC``  Python format spec of the number (``.1f``, ``+.1f``, ``,.0f``; default ``g``);
- ``pm``        the value is a pair [mean, half-width]: written ``mean ± half`` (the half-width
                 without a forced sign);
- ``agg=min|max|mean|sum|count``  reduce the values a ``*`` path matched (a pair counts by its mean;
                 ``sum`` counts true as 1, ``count`` is how many values matched);
- ``minus=u``   write a negative sign as U+2212 (the typographic minus some pages use).

``python scripts/doc_numbers.py`` rewrites the text between each marker and its ``<!-- /num -->``
in place; ``--check`` changes nothing and exits 1, listing every number that differs from its
source (the test suite runs it). Exit 2, with one line, for a marker that cannot be resolved (a
missing file, key or option). Files: the given ones, else README.md and every ``docs/**/*.md``.

A setting the page quotes (a seed count, a horizon, a default) comes from the code itself: a source
ending in ``.py`` is read, never imported, and its module-level assignments of literal values
(``NAME = ...`` or ``NAME: T = ...``: numbers, strings, lists, tuples, dicts, ``dict(key=...)`` and
``{**EARLIER, ...}``: the keys of a constant assigned above, none for one imported) are the keys, as are a
module-level class's literal attributes and field defaults under ``Class.field`` and a module-level
function's literal parameter defaults under ``function.parameter``::

    <!-- num: studykit/arena_settings.py#DUET_EARLY_STOP.abort_horizon -->11<!-- /num -->

A preset a page quotes is read from its ``.toml`` file the same way (tables and keys, dot-separated):
``real_runs/presets/paper-qwen3-1.7b.toml#optim.lr``.

``--unmarked`` lists the other way round: every result-like number of the prose (a decimal, a %, pp,
a duration, a factor, "N of M") that carries no marker, as ``page:line: 'number' (kind)``, and exits 1
if there is one. What it reads, what it allows and which pages are exempt: ``scripts/doc_unmarked.py``.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!-- num: (?P<spec>[^>]*?) -->(?P<text>.*?)<!-- /num -->", re.DOTALL)
AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "min": min, "max": max, "mean": lambda xs: sum(xs) / len(xs), "sum": sum, "count": len}


class MarkerError(ValueError):
    """A marker that cannot be resolved: its message names the marker and the fix."""


@dataclass(frozen=True)
class Spec:
    """One parsed marker: the source file, the key path and the formatting options."""

    source: str
    path: tuple[str, ...]
    fmt: str = "g"
    scale: float = 1.0
    pm: bool = False
    agg: str | None = None
    unicode_minus: bool = False


def parse_spec(spec: str) -> Spec:
    """Parse ``FILE#PATH [fmt=..] [scale=..] [pm] [agg=..] [minus=u]`` into a Spec."""
    words = spec.split()
    if not words or "#" not in words[0]:
        raise MarkerError(f"marker {spec!r}: expected 'FILE.json#key.path [options]'")
    source, _, path = words[0].partition("#")
    options: dict[str, Any] = {}
    for word in words[1:]:
        name, eq, value = word.partition("=")
        if name == "pm" and not eq:
            options["pm"] = True
        elif name == "fmt" and eq:
            options["fmt"] = value
        elif name == "scale" and eq:
            try:
                options["scale"] = float(value)
            except ValueError:
                raise MarkerError(f"marker {spec!r}: scale={value!r} is not a number") from None
        elif name == "agg" and value in AGGREGATES:
            options["agg"] = value
        elif name == "minus" and value == "u":
            options["unicode_minus"] = True
        else:
            raise MarkerError(f"marker {spec!r}: unknown option {word!r} "
                              "(fmt=, scale=, pm, agg=min|max|mean|sum|count, minus=u)")
    keys = tuple(_split_path(path))
    if not keys:
        raise MarkerError(f"marker {spec!r}: empty key path after '#'")
    if "*" in keys and "agg" not in options:
        raise MarkerError(f"marker {spec!r}: a '*' path needs agg=min|max|mean|sum|count")
    return Spec(source=source, path=keys, **options)


def _split_path(path: str) -> list[str]:
    """Dot-separated keys; a bracketed segment ``[0.707107]`` is one key, dots and all."""
    keys: list[str] = []
    for match in re.finditer(r"\[([^\]]*)\]|([^.\[]+)", path):
        keys.append(match.group(1) if match.group(1) is not None else match.group(2))
    return keys


def lookup(data: Any, keys: tuple[str, ...], where: str) -> list[Any]:
    """Every value the key path reaches (one unless it holds ``*``)."""
    values = [data]
    for key in keys:
        nxt: list[Any] = []
        for value in values:
            if key == "*":
                nxt.extend(value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [])
            elif isinstance(value, dict) and key in value:
                nxt.append(value[key])
            elif isinstance(value, (list, tuple)) and key.lstrip("-").isdigit() and -len(value) <= int(key) < len(value):
                nxt.append(value[int(key)])
            else:
                raise MarkerError(f"{where}: no key {key!r} in the source (check the path)")
        values = nxt
    if not values:
        raise MarkerError(f"{where}: the '*' matched nothing")
    return values


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MarkerError(f"{where}: value {value!r} is not a finite number")
    return float(value)


def render(spec: Spec, values: list[Any], where: str) -> str:
    """Format the resolved value(s) as the page shows them."""
    if spec.agg is not None:
        if spec.pm:
            raise MarkerError(f"{where}: pm and agg cannot be combined")
        picked = [v[0] if isinstance(v, list) and v else v for v in values]  # a pair: its mean
        if spec.agg == "count":
            value: Any = len(picked)
        else:  # true / false count as 1 / 0 (how many rows are "consistent")
            value = AGGREGATES[spec.agg]([_number(int(v) if isinstance(v, bool) else v, where) for v in picked])
    else:
        value = values[0]
    if spec.pm:
        if not (isinstance(value, list) and len(value) == 2):
            raise MarkerError(f"{where}: pm needs a [mean, half-width] pair, got {value!r}")
        mean, half = (_number(v, where) * spec.scale for v in value)
        text = f"{_fmt(mean, spec.fmt, where)} ± {_fmt(half, spec.fmt.replace('+', ''), where)}"
    else:
        text = _fmt(_number(value, where) * spec.scale, spec.fmt, where)
    return text.replace("-", "\u2212") if spec.unicode_minus else text


def _fmt(x: float, fmt: str, where: str) -> str:
    try:
        return format(x, fmt)
    except ValueError:
        raise MarkerError(f"{where}: fmt={fmt!r} is not a Python format spec") from None


def _literal(node: ast.AST, known: dict[str, Any]) -> Any:
    """``ast.literal_eval``, plus ``dict(key=literal, ...)`` and ``{**NAME, ...}`` of a constant read before."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args \
            and all(k.arg is not None for k in node.keywords):
        return {k.arg: _literal(k.value, known) for k in node.keywords}
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:  # {**NAME}: a constant assigned above; one imported from elsewhere is left out
                if not isinstance(value, ast.Name):
                    raise ValueError("not a literal")
                out.update(known.get(value.id, {}) if isinstance(known.get(value.id, {}), dict) else {})
            else:
                out[_literal(key, known)] = _literal(value, known)
        return out
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(item, known) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    return ast.literal_eval(node)


def python_constants(source: str, name: str) -> dict[str, Any]:
    """The literal values a Python file assigns at module level and in its module-level classes' bodies."""
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as err:
        raise MarkerError(f"source {name} is not Python ({err.msg})") from None

    def literals(body: list[ast.stmt]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for node in body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) and node.value is not None else []
            for target in targets:
                if isinstance(target, ast.Name):
                    try:
                        found[target.id] = _literal(node.value, found)  # type: ignore[union-attr]
                    except ValueError:  # not a literal (a call, a name): not a setting this can quote
                        pass
        return found

    constants = literals(tree.body)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            constants[node.name] = literals(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # its parameters' literal defaults
            args = node.args
            pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
            pairs += [(arg, d) for arg, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            defaults = {}
            for arg, default in pairs:
                try:
                    defaults[arg.arg] = ast.literal_eval(default)
                except ValueError:
                    pass
            constants[node.name] = defaults
    return constants


def load_source(path: Path, source: str) -> Any:
    """A JSON or TOML file's data, or a Python file's literal constants."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return python_constants(text, source)
    if path.suffix == ".toml":
        import tomllib
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise MarkerError(f"source {source} is not TOML ({err})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise MarkerError(f"source {source} is not JSON ({err.msg})") from None


def process(text: str, name: str, root: Path, cache: dict[Path, Any]) -> tuple[str, list[str]]:
    """The page with every marker filled, and one line per number that differed."""
    diffs: list[str] = []

    def fill(match: re.Match[str]) -> str:
        line = text.count("\n", 0, match.start()) + 1
        where = f"{name}:{line}: marker {match.group('spec').strip()!r}"
        try:
            spec = parse_spec(match.group("spec"))
        except MarkerError as err:
            raise MarkerError(f"{name}:{line}: {err}") from None
        path = root / spec.source
        if path not in cache:
            if not path.is_file():
                raise MarkerError(f"{where}: source {spec.source} not found (run the command that writes it)")
            try:
                cache[path] = load_source(path, spec.source)
            except MarkerError as err:
                raise MarkerError(f"{where}: {err}") from None
        new = render(spec, lookup(cache[path], spec.path, where), where)
        if new != match.group("text"):
            diffs.append(f"{where}: page says {match.group('text')!r}, source gives {new!r}")
        return match.group(0)[: match.start("text") - match.start()] + new + "<!-- /num -->"

    return MARKER.sub(fill, text), diffs


def default_files(root: Path) -> list[Path]:
    files = sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    return ([root / "README.md"] if (root / "README.md").is_file() else []) + files


def count_markers(paths: list[Path]) -> int:
    return sum(len(MARKER.findall(p.read_text(encoding="utf-8"))) for p in paths)


def _unmarked_module() -> Any:
    """scripts/doc_unmarked.py, loaded by path (the scripts are files, not a package)."""
    import importlib.util
    name = "doc_unmarked"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("doc_unmarked.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def report_unmarked(paths: list[Path], root: Path) -> int:
    """Print every unmarked result-like number and a count per page; 1 if there is one."""
    found = _unmarked_module().scan(paths, root)
    for number in found:
        print(number)
    pages: dict[str, int] = {}
    for number in found:
        pages[number.page] = pages.get(number.page, 0) + 1
    summary = ", ".join(f"{page} {count}" for page, count in sorted(pages.items(), key=lambda kv: -kv[1]))
    print(f"doc_numbers: {len(found)} unmarked numbers" + (f" ({summary}): mark each with its source "
          "(<!-- num: FILE#key -->N<!-- /num -->) or write it without a digit" if found else ""))
    return 1 if found else 0


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="pages to fill (default: README.md, docs/**/*.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a number is stale")
    parser.add_argument("--unmarked", action="store_true",
                        help="change nothing; list the result-like numbers of the prose with no marker (exit 1 if any)")
    args = parser.parse_args(argv)
    paths = [p if p.is_absolute() else root / p for p in args.files] or default_files(root)
    if args.unmarked:
        return report_unmarked(paths, root)
    cache: dict[Path, Any] = {}
    stale: list[str] = []
    try:
        for path in paths:
            old = path.read_text(encoding="utf-8")
            new, diffs = process(old, str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
                                 root, cache)
            stale += diffs
            if new != old and not args.check:
                path.write_text(new, encoding="utf-8")
    except (MarkerError, OSError) as err:
        print(f"doc_numbers: {err}", file=sys.stderr)
        return 2
    markers = count_markers(paths)
    if args.check:
        for line in stale:
            print(line)
        print(f"doc_numbers: {markers} numbers checked, {len(stale)} stale"
              + (" (run `python scripts/doc_numbers.py` to update them)" if stale else ""))
        return 1 if stale else 0
    print(f"doc_numbers: {markers} numbers, {len(stale)} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
