"""The arrows between the parts point one way (docs/architecture.md), checked on the source (ast), not by
importing it: every ``import`` and ``from ... import`` at any depth (inside functions too) counts.

- ``real_runs/`` never imports ``simulators/``, and ``simulators/`` never imports ``real_runs/``
  (the calibration reads real outputs through the run format);
- ``gdro_lab/`` (the core) imports no other part of the project and no torch / matplotlib / streamlit;
- no import circle between modules, except the ones listed in :data:`KNOWN_CIRCLES` (each with its
  owner); the circles already broken (:data:`BROKEN_CIRCLES`: issue 19's simulators/learner.py <->
  world.py and real_runs/lmstudy/slips.py <-> warmstart.py, and the app's two) must never return;
- inside ``apps/`` (:data:`APPS_LAYERS`): ``apps/data/`` imports no Streamlit, no altair and neither
  the views nor the report; ``apps/report/`` imports no Streamlit, no altair and no view.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gdro_lab", "simulators", "real_runs", "apps", "studyplots", "gdro_cli")
#: Circles that exist today, by owner; a new circle, or one of these growing, fails the test.
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()
BROKEN_CIRCLES = (("simulators/learner.py", "simulators/world.py"),
                  ("real_runs/lmstudy/slips.py", "real_runs/lmstudy/warmstart.py"),
                  ("apps/data/colours.py", "apps/data/identity.py"), ("apps/views/ui.py", "apps/views/uicharts.py"),
                  ("simulators/calibrate/predict.py", "simulators/calibrate/predict_report.py"),
                  ("simulators/calibrate/cli.py", "simulators/calibrate/predict.py"),
                  ("simulators/studies/arena.py", "simulators/studies/arena_report.py"))
FORBIDDEN = {"real_runs": ("simulators",), "simulators": ("real_runs",),
             "gdro_lab": ("simulators", "real_runs", "apps", "studyplots", "gdro_cli", "torch", "matplotlib",
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
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
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
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
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
