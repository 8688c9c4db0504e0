"""The repository's ``scripts/*.py`` (and other stand-alone files) as modules, for their tests.

The scripts are not a package; a test loads one by file with :func:`load_script` instead of copying
the six ``importlib`` lines. Each call executes the file afresh and registers the module in
``sys.modules`` under its name (dataclasses and pickling look a module up there).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_file(path: Path, name: str | None = None) -> ModuleType:
    """The Python file at ``path`` as the module ``name`` (default: the file's stem), executed now."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as the module ``name``."""
    return load_file(ROOT / "scripts" / f"{name}.py")
