"""The arrows between the parts point one way (docs/architecture.md), checked on the source (ast), not by
importing it: every ``import`` and ``from ... import`` at any depth (inside functions too) counts.

- ``real_runs/`` never imports ``simulators/``, and ``simulators/`` never imports ``real_runs/``
  (the calibration reads real outputs through the run format);
- ``gdro_lab/`` (the core) imports no other part of the project and no torch / matplotlib / streamlit;
  ``studykit/`` (what the studies share) imports the core only;
- inside the core, each layer of :data:`CORE_LAYERS` imports only its own layer and the ones below;
- no re-export shim (:func:`reexports`): no module but the core's public API (``gdro_lab/__init__.py``)
  imports a name, ours or a library's, at any depth, that it never uses (a use is a name in its code,
  not a mention in a string) or lists in ``__all__`` (``__all__`` may list only names the module
  defines), unless the import's line says "dependency check" (an import kept only to fail early when
  a dependency is missing); and no module imports a name through a module that only imports it;
- no library module imports an entry point (:func:`cli_modules`: a module a ``gdro`` command runs, a
  ``cli.py``, ``*_cli.py``, ``main.py`` or ``__main__.py``, and all of gdro_cli/); the argument helpers
  every part's parsers share are a library below the parts (``studykit/args.py``, standard library only);
- a library module has no ``if __name__ == "__main__":`` door (a hidden entry point) but the ones listed
  in :data:`MAIN_BLOCKS`, each with its reason;
- no import circle between modules, except the ones listed in :data:`KNOWN_CIRCLES` (each with its
  owner); the circles already broken (:data:`BROKEN_CIRCLES`: issue 19's simulators/learner.py <->
  world.py and real_runs/lmstudy/slips.py <-> warmstart.py, and the app's two) must never return;
- inside ``apps/`` (:data:`APPS_LAYERS`): ``apps/data/`` imports no Streamlit, no altair and neither
  the views nor the report; ``apps/report/`` imports no Streamlit, no altair and no view;
- one name, one meaning: no two modules of the shipped packages share a base name (but the app's page
  scripts and :data:`SHARED_NAMES`), and the core never names the simulator's own methods or controllers
  (:func:`simulator_only_names`: they are registered by the simulator).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gdro_lab", "simulators", "real_runs", "apps", "studykit", "gdro_cli")
#: The core's layers, lowest first: a file imports only from its own layer and the ones below (a path
#: ending in "/" is a folder). The shared math sits above allocation because the diagnostics compare
#: with the square-root law; the run format above the controllers because the record takes their feedback.
CORE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("gdro_lab/_validate.py", "gdro_lab/checks.py", "gdro_lab/_rows.py"),
    ("gdro_lab/allocation/",),
    ("gdro_lab/functional/",),
    ("gdro_lab/controllers/",),
    ("gdro_lab/runformat/",),
    ("gdro_lab/methods.py",),
    ("gdro_lab/step.py",),
    ("gdro_lab/__init__.py",),
)
#: The one module allowed to re-export: the core's public API.
PUBLIC_API = "gdro_lab/__init__.py"
#: Circles that exist today, by owner; a new circle, or one of these growing, fails the test.
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()
BROKEN_CIRCLES = (("simulators/learner.py", "simulators/world.py"),
                  ("real_runs/lmstudy/slips.py", "real_runs/lmstudy/warmstart.py"),
                  ("apps/data/colours.py", "apps/data/identity.py"), ("apps/views/ui.py", "apps/views/uicharts.py"),
                  ("simulators/calibrate/predict.py", "simulators/calibrate/predict_report.py"),
                  ("simulators/calibrate/cli.py", "simulators/calibrate/predict.py"),
                  ("simulators/studies/allocation_arena.py", "simulators/studies/arena_report.py"))
FORBIDDEN = {"real_runs": ("simulators",), "simulators": ("real_runs",),
             "studykit": ("simulators", "real_runs", "apps", "gdro_cli", "torch", "streamlit"),
             "gdro_lab": ("simulators", "real_runs", "apps", "studykit", "gdro_cli", "torch", "matplotlib",
                          "streamlit", "transformers", "pandas")}

#: Folders of apps/ (path prefix) -> what their modules must never import: the data layer stays plain
#: pandas (testable without Streamlit, shared by the app and the report), the report draws with matplotlib.
APPS_LAYERS = {"apps/data/": ("streamlit", "altair", "apps.views", "apps.report"),
               "apps/report/": ("streamlit", "altair", "apps.views")}


def _module_file(root: Path, dotted: str) -> str | None:
    """The file (relative to root) of module ``dotted``, None when it is not the project's."""
    parts = dotted.split(".")
    for candidate in (Path(*parts).with_suffix(".py"), Path(*parts) / "__init__.py"):
        if (root / candidate).is_file():
            return candidate.as_posix()
    return None


def imports_of(root: Path, path: Path) -> list[str]:
    """Every dotted module name ``path`` imports (relative imports resolved), at any depth."""
    rel = path.relative_to(root)
    package = list(rel.parent.parts)
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return [n for n in names if n]


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """(file -> project files it imports, file -> every dotted name it imports), files relative to root."""
    graph: dict[str, set[str]] = {}
    raw: dict[str, list[str]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            key = path.relative_to(root).as_posix()
            raw[key] = imports_of(root, path)
            targets = {_module_file(root, name) for name in raw[key]}
            graph[key] = {t for t in targets if t is not None and t != key and not t.endswith("/__init__.py")}
    return graph, raw


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one file (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(frozenset(component))
    return out


def plant(root: Path, files: dict[str, str]) -> None:
    """Write a planted tree (relative path -> source) under ``root`` for a check that must fail on it."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def forbidden_imports(raw: dict[str, list[str]]) -> list[str]:
    """'file imports name' for every import that crosses an arrow the wrong way (:data:`FORBIDDEN`)."""
    found = []
    for path, names in raw.items():
        for name in names:
            for banned in FORBIDDEN.get(path.split("/", 1)[0], ()):
                if name == banned or name.startswith(banned + "."):
                    found.append(f"{path} imports {name}")
    return sorted(set(found))


def layer_violations(raw: dict[str, list[str]], layers: dict[str, tuple[str, ...]] = APPS_LAYERS) -> list[str]:
    """'file imports name' for every import a folder of apps/ must not make (:data:`APPS_LAYERS`)."""
    found = []
    for path, names in raw.items():
        for prefix, banned_names in layers.items():
            if not path.startswith(prefix):
                continue
            for name in names:
                for banned in banned_names:
                    if name == banned or name.startswith(banned + "."):
                        found.append(f"{path} imports {name}")
    return sorted(set(found))


def test_the_arrows_point_one_way() -> None:
    _, raw = import_graph(ROOT)
    assert any(p.startswith("real_runs/lmstudy/") for p in raw) and any(p.startswith("simulators/") for p in raw)
    assert forbidden_imports(raw) == []


def test_no_import_circle_but_the_known_ones() -> None:
    graph, _ = import_graph(ROOT)
    found = circles(graph)
    for a, b in BROKEN_CIRCLES:
        assert (ROOT / a).is_file() and (ROOT / b).is_file(), f"{a} or {b} moved: name its new path here"
        assert not any(a in c and b in c for c in found), f"the circle {a} <-> {b} is back"
    new = [sorted(c) for c in found if c not in KNOWN_CIRCLES]
    assert new == [], "a new import circle: break it (move the shared names to a module both can import)"


def test_the_scan_sees_function_level_relative_and_circular_imports(tmp_path: Path) -> None:
    """The checks can fail: a planted tree with each kind of violation."""
    files = {
        "real_runs/__init__.py": "",
        "real_runs/a.py": "def f():\n    from simulators.world import W\n",            # late import, wrong way
        "real_runs/lm/__init__.py": "",
        "real_runs/lm/slips.py": "from . import warm\n",                                 # relative, circle
        "real_runs/lm/warm.py": "def g():\n    from real_runs.lm.slips import h\n",
        "simulators/__init__.py": "",
        "simulators/world.py": "import numpy\n",
        "gdro_lab/__init__.py": "",
        "gdro_lab/core.py": "if False:\n    import torch.nn as nn\n",
    }
    plant(tmp_path, files)
    graph, raw = import_graph(tmp_path, ("gdro_lab", "simulators", "real_runs"))
    assert forbidden_imports(raw) == ["gdro_lab/core.py imports torch.nn", "real_runs/a.py imports simulators.world",
                                      "real_runs/a.py imports simulators.world.W"]
    assert circles(graph) == [frozenset({"real_runs/lm/slips.py", "real_runs/lm/warm.py"})]
    assert graph["real_runs/a.py"] == {"simulators/world.py"}


def test_apps_data_and_report_never_import_streamlit_or_the_views() -> None:
    _, raw = import_graph(ROOT)
    assert any(p.startswith("apps/data/") for p in raw) and any(p.startswith("apps/report/") for p in raw)
    assert layer_violations(raw) == []


def test_the_apps_layer_check_sees_late_and_dotted_imports(tmp_path: Path) -> None:
    """The apps check can fail: a planted apps/ tree with a late streamlit import and a view import."""
    files = {
        "apps/__init__.py": "",
        "apps/data/__init__.py": "",
        "apps/data/loading.py": "def f():\n    import streamlit as st\n",           # late import
        "apps/data/study.py": "from apps.views import ui\n",                           # data -> views
        "apps/report/__init__.py": "",
        "apps/report/figures.py": "from apps.data import loading\nimport matplotlib\n",  # allowed
        "apps/report/cli.py": "from streamlit.testing.v1 import AppTest\n",
        "apps/views/__init__.py": "",
        "apps/views/ui.py": "import streamlit\nfrom apps.data import loading\n",       # views may
    }
    plant(tmp_path, files)
    _, raw = import_graph(tmp_path, ("apps",))
    assert layer_violations(raw) == ["apps/data/loading.py imports streamlit", "apps/data/study.py imports apps.views",
                                     "apps/data/study.py imports apps.views.ui",
                                     "apps/report/cli.py imports streamlit.testing.v1",
                                     "apps/report/cli.py imports streamlit.testing.v1.AppTest"]


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [frozenset("abc")]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}}, [frozenset("ab"), frozenset("cd")]),
])
def test_circles_against_hand_worked_graphs(graph: dict[str, set[str]], expected: list[frozenset[str]]) -> None:
    assert sorted(circles(graph), key=sorted) == sorted(expected, key=sorted)


# ----------------------------------------------------------------------------- core layers

def core_layer(path: str) -> int | None:
    """The index in :data:`CORE_LAYERS` of a core file, None outside the core."""
    for index, layer in enumerate(CORE_LAYERS):
        if any(path == entry or (entry.endswith("/") and path.startswith(entry)) for entry in layer):
            return index
    return None


def core_layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """'a imports b' for every core file that imports a core file of a higher layer."""
    found = []
    for path, targets in graph.items():
        own = core_layer(path)
        if own is None:
            continue
        for target in sorted(targets):
            other = core_layer(target)
            if other is not None and other > own:
                found.append(f"{path} imports {target}")
    return found


def test_the_core_is_layered() -> None:
    graph, _ = import_graph(ROOT, ("gdro_lab",))
    unplaced = [p for p in graph if core_layer(p) is None and not p.endswith("/__init__.py")]
    assert unplaced == [], "place every core file in a layer of CORE_LAYERS"
    assert core_layer_violations(graph) == []


# ----------------------------------------------------------------------------- shims

def _defined_names(tree: ast.Module) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments), not the ones it imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):   # definitions under a guard still count
            inner = [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                     *(stmt for handler in getattr(node, "handlers", []) for stmt in handler.body)]
            names |= _defined_names(ast.Module(body=inner, type_ignores=[]))
    return names


def _imports(tree: ast.Module, rel: Path) -> list[tuple[int, str, str, str]]:
    """(line, bound name, source module, imported name) for every import of a module at any depth, relative
    imports resolved, ``__future__`` left out: ``from m import x as y`` gives (line, "y", "m", "x"),
    ``import a.b`` gives (line, "a", "a.b", "") and ``import a.b as c`` gives (line, "c", "a.b", "")."""
    out = []
    package = list(rel.parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out += [(node.lineno, a.asname or a.name, module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.asname or a.name.split(".")[0], a.name, "") for a in node.names]
    return out


def _project_imports(tree: ast.Module, rel: Path, packages: tuple[str, ...]) -> list[tuple[int, str, str, str]]:
    """(line, bound name, source module, imported name) for every ``from <project module> import name``
    and ``import <project module> as name`` of a module, at any depth."""
    out = []
    package = list(rel.parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if module.split(".")[0] in packages:
                out += [(node.lineno, a.asname or a.name, module, a.name) for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.asname, a.name, "") for a in node.names
                    if a.asname and a.name.split(".")[0] in packages]
    return out


def reexports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Re-export shims: 'file:line re-exports module.name' for every name a module (but :data:`PUBLIC_API`)
    imports, ours or a library's, at any depth, and never uses in its code or lists in ``__all__``; a
    star import always counts. An import whose line says "dependency check" is kept on purpose (it fails
    early when a dependency is missing). A name mentioned only in a string or docstring is not a use."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel.as_posix() == PUBLIC_API:
                continue
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            tree = ast.parse(text)
            used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
            exported: set[str] = set()
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                        for t in node.targets):
                    exported = {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
            for line, name, module, imported in _imports(tree, rel):
                if "dependency check" in lines[line - 1]:
                    continue
                if imported == "*" or name not in used or name in exported:
                    found.append(f"{rel.as_posix()}:{line} re-exports {module}.{imported}" if imported
                                 else f"{rel.as_posix()}:{line} re-exports {module}")
    return found


def through_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``from A import X`` where A only imports X (X is defined elsewhere): import it from where it lives.
    ``from gdro_lab import X`` (the public API) and a submodule of a package are fine."""
    trees: dict[str, ast.Module] = {}
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, _, module, name in _project_imports(tree, rel, packages):
                if not name or module == "gdro_lab":
                    continue
                target = _module_file(root, module)
                if target is None or _module_file(root, f"{module}.{name}") is not None:
                    continue
                if target not in trees:
                    trees[target] = ast.parse((root / target).read_text(encoding="utf-8"))
                if name not in _defined_names(trees[target]):
                    found.append(f"{rel.as_posix()}:{line} imports {name} through {module}")
    return found


def test_no_reexport_shims() -> None:
    assert reexports(ROOT) == []
    assert through_imports(ROOT) == []


# ----------------------------------------------------------------------------- entry points

def cli_modules(root: Path) -> set[str]:
    """Files of entry points (what a user or a launch script runs): every module a ``gdro`` command runs
    (gdro_cli/main.py's COMMANDS), every ``cli.py``, ``*_cli.py``, ``main.py`` (gdro_cli/main.py, the verl
    launcher real_runs/verl/main.py) and ``__main__.py``, and gdro_cli/ but its package file (the argument
    helpers every part's parsers share live below the parts: studykit/args.py)."""
    tree = ast.parse((root / "gdro_cli" / "main.py").read_text(encoding="utf-8"))
    commands = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "COMMANDS" for t in node.targets))
    assert isinstance(commands, ast.Dict)
    modules = {value.elts[0].value for value in commands.values if isinstance(value, ast.Tuple)
               and isinstance(value.elts[0], ast.Constant)}
    files = {f for f in (_module_file(root, m) for m in modules) if f is not None}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            if path.name in ("cli.py", "main.py", "__main__.py") or path.stem.endswith("_cli") or \
                    (rel.startswith("gdro_cli/") and path.name != "__init__.py"):
                files.add(rel)
    return files


def library_imports_of_cli(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """'library imports entry point' for every import, at any depth, of an entry point by a module that is none."""
    graph, _ = import_graph(root, packages)
    cli = cli_modules(root)
    return sorted(f"{path} imports {target}" for path, targets in graph.items() if path not in cli
                  for target in targets if target in cli)


def test_no_library_module_imports_an_entry_point() -> None:
    assert {"simulators/cli.py", "apps/launch.py", "gdro_cli/main.py", "real_runs/verl/main.py",
            "real_runs/train_cli.py", "simulators/calibrate/cli.py"} <= cli_modules(ROOT)
    assert "studykit/args.py" not in cli_modules(ROOT) and not (ROOT / "gdro_cli" / "args.py").exists()
    assert library_imports_of_cli(ROOT) == []


#: Library modules with a ``python -m`` door (a module-level ``if __name__ == "__main__":``), each with why it
#: stays a library: a new door fails :func:`test_library_doors_are_the_listed_ones` (give the command its own
#: ``*_cli.py``, or list it here with its reason).
MAIN_BLOCKS = {
    "apps/serve.py": "Streamlit's own command line with the app's checks; gdro app runs it as a child process "
                     "(apps/launch.py), so it must be runnable by module name",
    "real_runs/attention.py": "the launch scripts (paper_run.sh, verl_smoke.sh) ask it which attention to use, in the "
                              "verl environment, which has no gdro command; the trainer imports its resolve function",
    "real_runs/verl/cluster.py": "ray_cluster.sh runs the shared-filesystem check in the verl environment (no gdro "
                                 "command there); the launcher imports the check",
    "real_runs/verl/convert.py": "docs/data.md and docs/verl.md convert data sets in the verl environment (no gdro "
                                 "command there); the batch checks import its id field",
    "real_runs/verl/cpu.py": "verl on CPU in the verl environment (tests, benchmarks, verl_smoke.sh); the tests "
                             "import its gaps, and Ray pickles its classes by module name",
    "real_runs/verl/cpu_vllm.py": "verl's vLLM rollout on CPU in the verl environment; Ray pickles its classes by "
                                  "module name",
    "real_runs/verl/paper_settings.py": "prints the table pasted into docs/launch.md; the launch checks import the table",
    "real_runs/verl/smoke.py": "gpu_check.sh and verl_smoke.sh set up the smoke run in the verl environment; the CPU "
                               "fit test imports the same setup",
    "simulators/calibrate/gain_recovery.py": "a study documented in docs/calibration.md; its parts are imported by "
                                             "the recovery tests",
    "simulators/calibrate/lmcompare.py": "a study documented in docs/calibration.md (and timed in docs/benchmarks.md)",
    "simulators/calibrate/recovery.py": "a study documented in docs/calibration.md (and timed in docs/benchmarks.md)",
    "studykit/provenance.py": "prints a report's source digest (docs/toy-studies.md); the studies import it",
}


def _is_main_block(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either side) at module level."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.comparators) != 1:
        return False
    sides = [node.test.left, node.test.comparators[0]]
    return isinstance(node.test.ops[0], ast.Eq) and \
        any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides) and \
        any(isinstance(side, ast.Constant) and side.value == "__main__" for side in sides)


def library_doors(root: Path, packages: tuple[str, ...] = PACKAGES) -> set[str]:
    """Library modules (not :func:`cli_modules`) with an ``if __name__ == "__main__":`` block."""
    cli = cli_modules(root)
    found = set()
    for package in packages:
        for path in (root / package).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            if rel not in cli and any(_is_main_block(node) for node in
                                      ast.parse(path.read_text(encoding="utf-8")).body):
                found.add(rel)
    return found


def test_library_doors_are_the_listed_ones() -> None:
    assert library_doors(ROOT) == set(MAIN_BLOCKS)
    assert all(reason.strip() for reason in MAIN_BLOCKS.values())


def test_the_door_check_can_fail(tmp_path: Path) -> None:
    """A planted library module with a ``__main__`` block is seen (either side of ``==``); a docstring that
    mentions one, and an entry point's own block, are not."""
    plant(tmp_path, {**PLANTED, "simulators/run.py": 'def main():\n    return 0\n\n\nif __name__ == "__main__":\n'
                                                     '    main()\n'})
    assert library_doors(tmp_path, PLANTED_PACKAGES) == {"simulators/door.py", "real_runs/verl/launcher.py"}


#: A planted tree with each kind of shim, layer and entry-point violation (and the allowed cases beside them).
PLANTED = {
    "gdro_cli/__init__.py": "",
    "gdro_cli/main.py": 'COMMANDS = {"go": ("simulators.run", "main", "help")}\n',
    "gdro_cli/args.py": "def did_you_mean(x):\n    return x\n",                  # an entry point's module
    "studykit/__init__.py": "",
    "studykit/args.py": "def did_you_mean(x):\n    return x\n",
    "simulators/__init__.py": "",
    "simulators/run.py": "def main():\n    return 0\n",
    "simulators/lib.py": "from simulators.run import main\nfrom studykit.args import did_you_mean\n"
                         "VALUE = main() + len(did_you_mean('a'))\n",
    "simulators/shim.py": "from simulators.lib import VALUE  # noqa: F401\n",
    "simulators/np_shim.py": "import numpy as np\nfrom math import *\n",             # a library's name
    "simulators/docs.py": "def f():\n    import json\n    return 'json.dumps'\n",     # a string is no use
    "simulators/check.py": "import math_verify  # noqa: F401  (dependency check)\n",   # allowed
    "simulators/own.py": "import math\nX = math.pi\n__all__ = ['X']\n",               # allowed
    "simulators/plots.py": "import matplotlib.pyplot as plt\nplt.figure()\n__all__ = ['plt']\n",
    "simulators/late.py": "def f():\n    from simulators import run\n    return run\n",  # a late CLI import
    "real_runs/__init__.py": "",
    "real_runs/train_cli.py": "from studykit.args import did_you_mean\ndid_you_mean('a')\n",
    "real_runs/back_up.py": "from gdro_cli.args import did_you_mean\nX = did_you_mean('a')\n",  # arrow back up
    "simulators/door.py": 'def main():\n    return 0\n\n\nif __name__ == "__main__":\n    main()\n',
    "simulators/mention.py": '"""Build it under ``if __name__ == \'__main__\':`` in a script."""\n',
    "real_runs/verl/launcher.py": 'import sys\nif "__main__" == __name__:\n    sys.exit(0)\n',
    "real_runs/export_cli.py": "from real_runs.train_cli import did_you_mean\n",     # command -> command
    "real_runs/verl/__init__.py": "",
    "real_runs/verl/main.py": "X = 1\n",                                             # the verl launcher
    "real_runs/verl/cpu.py": "from . import main\nY = main.X\n",
    "simulators/exported.py": "from simulators.lib import VALUE\n__all__ = ['VALUE']\n",
    "simulators/user.py": "from simulators.exported import VALUE\nprint(VALUE)\n",
    "gdro_lab/__init__.py": "",
    "gdro_lab/controllers/__init__.py": "",
    "gdro_lab/controllers/c.py": "X = 1\n",
    "gdro_lab/allocation/__init__.py": "",
    "gdro_lab/allocation/a.py": "from gdro_lab.controllers.c import X\nY = X\n",
}
PLANTED_PACKAGES = ("gdro_lab", "simulators", "gdro_cli", "real_runs", "studykit")


def test_the_shim_checks_can_fail(tmp_path: Path) -> None:
    """Unused imports (ours or a library's, late ones too), ``__all__`` of a name defined elsewhere, a star
    import, a name imported through a module that only imports it; not a "dependency check" or own names."""
    plant(tmp_path, PLANTED)
    assert reexports(tmp_path, PLANTED_PACKAGES) == [
        "simulators/docs.py:2 re-exports json",
        "simulators/exported.py:1 re-exports simulators.lib.VALUE",
        "simulators/np_shim.py:1 re-exports numpy",
        "simulators/np_shim.py:2 re-exports math.*",
        "simulators/plots.py:1 re-exports matplotlib.pyplot",
        "simulators/shim.py:1 re-exports simulators.lib.VALUE",
        "real_runs/export_cli.py:1 re-exports real_runs.train_cli.did_you_mean"]
    assert through_imports(tmp_path, PLANTED_PACKAGES) == [
        "simulators/user.py:1 imports VALUE through simulators.exported",
        "real_runs/export_cli.py:1 imports did_you_mean through real_runs.train_cli"]


def test_the_layer_check_can_fail(tmp_path: Path) -> None:
    plant(tmp_path, PLANTED)
    graph, _ = import_graph(tmp_path, PLANTED_PACKAGES)
    assert core_layer_violations(graph) == ["gdro_lab/allocation/a.py imports gdro_lab/controllers/c.py"]


def test_the_entry_point_check_can_fail(tmp_path: Path) -> None:
    """A library importing a command's module (at the top or late) or the verl launcher fails; a command
    importing another command, and anything importing studykit/args.py, does not; gdro_cli/ is all
    entry points, so a library importing any of it (an arrow back up) fails."""
    plant(tmp_path, PLANTED)
    assert cli_modules(tmp_path) == {"gdro_cli/main.py", "gdro_cli/args.py", "simulators/run.py",
                                     "real_runs/train_cli.py", "real_runs/export_cli.py", "real_runs/verl/main.py"}
    assert library_imports_of_cli(tmp_path, PLANTED_PACKAGES) == [
        "real_runs/back_up.py imports gdro_cli/args.py", "real_runs/verl/cpu.py imports real_runs/verl/main.py",
        "simulators/late.py imports simulators/run.py", "simulators/lib.py imports simulators/run.py"]


# ----------------------------------------------------------------------------- names

#: Module base names that may repeat in the shipped packages, each one meaning wherever it occurs; any
#: other name two modules share fails :func:`test_no_two_modules_share_a_name` (name the new one for what it is).
SHARED_NAMES = {
    "__init__": "a package's own file",
    "__main__": "python -m PACKAGE",
    "cli": "a part's command line: its parser and main (an entry point, see cli_modules)",
    "main": "an entry point's main: gdro_cli/main.py (gdro) and real_runs/verl/main.py (verl's launcher)",
}


def app_pages(root: Path) -> set[str]:
    """The app's page scripts (apps/streamlit_app.py's ``PAGES``, files of apps/views/): Streamlit runs each
    by its path (``st.Page``) and nothing imports it, so a page is named by its URL and may share the name of
    the data module it shows (apps/views/study.py shows apps/data/study.py)."""
    path = root / "apps" / "streamlit_app.py"
    if not path.exists():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pages = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "PAGES" for t in node.targets))
    assert isinstance(pages, ast.Tuple)
    return {f"apps/views/{page.elts[0].value}" for page in pages.elts
            if isinstance(page, ast.Tuple) and isinstance(page.elts[0], ast.Constant)}


def shared_module_names(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, list[str]]:
    """Base name -> files, for each name that two or more modules of ``packages`` share (the app's pages and
    :data:`SHARED_NAMES` left out)."""
    pages = app_pages(root)
    files: dict[str, list[str]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel not in pages and path.stem not in SHARED_NAMES:
                files.setdefault(path.stem, []).append(rel)
    return {name: found for name, found in sorted(files.items()) if len(found) > 1}


def test_no_two_modules_share_a_name() -> None:
    """One name, one meaning: the core's sqrt_law, difficulty, methods and rollout Plan have no namesakes in
    the simulator or the studies (a repeated name is allowed only in :data:`SHARED_NAMES`, each with its reason)."""
    assert shared_module_names(ROOT) == {}
    assert {"apps/views/study.py", "apps/views/sweep.py", "apps/views/config.py"} <= app_pages(ROOT)
    assert all(reason.strip() for reason in SHARED_NAMES.values())


def simulator_only_names(root: Path) -> set[str]:
    """The simulator's own methods and controllers, read from its source (simulators/simulator_methods.py):
    the names of ``SIMULATOR_METHODS`` and the keys of ``LOCAL_CONTROLLERS``."""
    tree = ast.parse((root / "simulators" / "simulator_methods.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else \
            node.targets[0] if isinstance(node, ast.Assign) else None
        if not isinstance(target, ast.Name) or node.value is None:
            continue
        if target.id == "SIMULATOR_METHODS" and isinstance(node.value, ast.Tuple):
            names |= {call.args[0].value for call in node.value.elts if isinstance(call, ast.Call)
                      and call.args and isinstance(call.args[0], ast.Constant)}
        if target.id == "LOCAL_CONTROLLERS" and isinstance(node.value, ast.Dict):
            names |= {key.value for inner in node.value.values if isinstance(inner, ast.Dict)
                      for key in inner.keys if isinstance(key, ast.Constant)}
    return names


def core_mentions(root: Path, names: set[str]) -> list[str]:
    """'file:line name' for each string, identifier, attribute, argument or definition of the core
    (gdro_lab/) that is one of ``names``; prose that mentions one (a docstring, a comment) is no mention."""
    found = []
    for path in sorted((root / "gdro_lab").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            words = {ast.Constant: lambda n: [n.value], ast.Name: lambda n: [n.id], ast.Attribute: lambda n: [n.attr],
                     ast.arg: lambda n: [n.arg], ast.keyword: lambda n: [n.arg],
                     ast.FunctionDef: lambda n: [n.name], ast.ClassDef: lambda n: [n.name]}
            for word in words.get(type(node), lambda n: [])(node):
                if isinstance(word, str) and word in names:
                    found.append(f"{rel}:{getattr(node, 'lineno', 0)} {word}")
    return sorted(set(found))


def test_the_core_never_names_a_simulator_only_method() -> None:
    """The simulator registers its references (they need the world's truth) through the core's public
    registration; the core's table, registry and step never name them."""
    names = simulator_only_names(ROOT)
    assert {"class_gdro", "sqrt_oracle", "prompt_oracle", "prompt_bayes", "prompt_stale"} <= names
    assert core_mentions(ROOT, names) == []


def test_the_name_checks_can_fail(tmp_path: Path) -> None:
    """Two modules of one name in two parts fail (a page beside its data module, and cli.py / __init__.py
    anywhere, do not); a core table or registry naming the simulator's method or controller fails, prose does not."""
    plant(tmp_path, {
        "gdro_lab/allocation/sqrt_law.py": "X = 1\n",
        "simulators/studies/sqrt_law.py": "X = 2\n",
        "real_runs/lmstudy/plan.py": "X = 3\n",
        "simulators/calibrate/plan.py": "X = 4\n",
        "simulators/cli.py": "", "real_runs/lmstudy/cli.py": "", "simulators/__init__.py": "", "apps/__init__.py": "",
        "apps/streamlit_app.py": 'PAGES = (("study.py", "Study", "", "study", True),)\n',
        "apps/views/study.py": "", "apps/data/study.py": "", "apps/views/ui.py": "", "apps/data/ui.py": "",
        "simulators/simulator_methods.py": 'SIMULATOR_METHODS = (MethodSpec("prompt_oracle", "x", allocator="prompt_oracle"),)\n'
                                           'LOCAL_CONTROLLERS: dict = {"allocator": {"prompt_bayes": object}}\n',
        "gdro_lab/methods.py": '"""Not prompt_oracle: the simulator registers it."""\n'
                               'METHODS = {"grpo": 1, "prompt_oracle": 2}\n',
        "gdro_lab/controllers/registry.py": "# prompt_bayes lives in the simulator\n"
                                            "def build(name, prompt_bayes=None):\n    return prompt_bayes\n",
    })
    assert shared_module_names(tmp_path, ("gdro_lab", "simulators", "real_runs", "apps")) == {
        "plan": ["simulators/calibrate/plan.py", "real_runs/lmstudy/plan.py"],
        "sqrt_law": ["gdro_lab/allocation/sqrt_law.py", "simulators/studies/sqrt_law.py"],
        "ui": ["apps/data/ui.py", "apps/views/ui.py"]}
    assert simulator_only_names(tmp_path) == {"prompt_oracle", "prompt_bayes"}
    assert core_mentions(tmp_path, {"prompt_oracle", "prompt_bayes"}) == [
        "gdro_lab/controllers/registry.py:2 prompt_bayes", "gdro_lab/controllers/registry.py:3 prompt_bayes",
        "gdro_lab/methods.py:2 prompt_oracle"]
