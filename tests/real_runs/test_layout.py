"""The layout of ``real_runs/`` (docs/architecture.md, "real_runs by concept"), checked on the source (ast):

- no library module imports a command-line module: those are ``cli.py``, ``*_cli.py``, ``__main__.py``,
  the verl launcher ``real_runs/verl/main.py`` and ``gdro_cli``; a command may import another's parser
  helpers, a library never (what a command and a library share lives in the library);
- no module re-exports: every name a module imports at the top level is used there, and no module lists
  ``__all__``, so a name is imported from the module that defines it. An import kept only to fail early
  when a dependency is missing says so in its comment ("dependency check").
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def is_cli(module: str) -> bool:
    """Whether the dotted module name is a command-line module of the project."""
    last = module.rsplit(".", 1)[-1]
    return (module == "gdro_cli" or module.startswith("gdro_cli.") or last in ("cli", "__main__")
            or last.endswith("_cli") or module == "real_runs.verl.main")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(root: Path, path: Path) -> list[str]:
    """Every project module ``path`` imports, at any depth (``from a import b`` counts a and a.b)."""
    name = module_name(root, path).split(".")
    package = name if path.name == "__init__.py" else name[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return [n for n in names if n.split(".")[0] in ("real_runs", "gdro_cli")]


def cli_imports_of_libraries(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "real_runs").rglob("*.py")):
        if is_cli(module_name(root, path)):
            continue
        found += [f"{path.relative_to(root).as_posix()} imports {name}" for name in imported_modules(root, path)
                  if is_cli(name)]
    return found


def reexports(root: Path) -> list[str]:
    """``__all__`` lists, and top-level imports a module never uses (unless marked as a dependency check)."""
    found = []
    for path in sorted((root / "real_runs").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        rel = path.relative_to(root).as_posix()
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                found.append(f"{rel}:{node.lineno}: __all__")
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "module", None) == "__future__":
                continue
            if "dependency check" in lines[node.lineno - 1]:
                continue
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if name not in used:
                    found.append(f"{rel}:{node.lineno}: {name} is imported but not used")
    return found


def test_no_library_module_of_real_runs_imports_a_command_line_module() -> None:
    assert cli_imports_of_libraries(ROOT) == []


def test_no_module_of_real_runs_re_exports_a_name() -> None:
    assert reexports(ROOT) == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    """Both checks can fail: a planted tree with one of each."""
    files = {
        "real_runs/__init__.py": "",
        "real_runs/train_cli.py": "from gdro_cli.args import OneLineParser\nOneLineParser\n",    # a command: allowed
        "real_runs/lib.py": "def f():\n    from real_runs.train_cli import run\n    return run\n",  # a late CLI import
        "real_runs/verl/__init__.py": "",
        "real_runs/verl/cpu.py": "from . import main\nmain\n",                                # the verl launcher
        "real_runs/shim.py": "from real_runs.lib import f  # noqa: F401\n__all__ = ['f']\n",   # a re-export
        "real_runs/check.py": "import math_verify  # noqa: F401  (dependency check)\n",         # allowed
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert cli_imports_of_libraries(tmp_path) == ["real_runs/lib.py imports real_runs.train_cli",
                                                  "real_runs/verl/cpu.py imports real_runs.verl.main"]
    assert reexports(tmp_path) == ["real_runs/shim.py:1: f is imported but not used", "real_runs/shim.py:2: __all__"]
