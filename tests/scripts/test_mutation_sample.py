"""scripts/mutation_sample.py: the mutants it makes and the tests it picks, on small sources by hand."""

from __future__ import annotations

from scriptload import load_script

mutation_sample = load_script("mutation_sample")

SOURCE = '''"""Docstring: 1 + 2 is never mutated."""
LIMIT: int = 3


def f(x: int, y: float = 0.5) -> int:
    """The docstring."""
    if x < LIMIT and not y:
        x += 1
    print(f"{x + 1}")
    return -x * 2
'''


def mutants(source: str) -> set[str]:
    """Every mutated module, as the one changed line."""
    out = set()
    for site in mutation_sample.mutation_sites(source):
        mutated = mutation_sample.apply(source, site)
        assert mutated is not None, site
        changed = [new for old, new in zip(source.splitlines(), mutated.splitlines()) if old != new]
        out.add(changed[0].strip() if changed else "")
    return out


def test_each_operator_comparison_constant_and_statement_is_one_mutant_and_nothing_else():
    assert mutants(SOURCE) == {
        "LIMIT: int = (4)",                             # a constant off by one (the annotation is not mutated)
        "def f(x: int, y: float = (1.5)) -> int:",
        "if (x <= LIMIT) and not y:",                   # a comparison at its boundary
        "if (x < LIMIT or not y):",                     # and / or
        "if x < LIMIT and (y):",                        # a `not` dropped
        "x -= 1", "x += (2)",
        "pass",                                         # the print call dropped (its f-string is not mutated)
        "return (-x / 2)", "return (x) * 2", "return -x * (3)",
    }


def test_a_syntax_tree_that_does_not_change_is_no_mutant():
    line = "x = 1\n"
    assert mutation_sample.apply(line, (1, 0, 1, 5, "x = 1", "x = 1")) is None
    assert mutation_sample.apply(line, (1, 4, 1, 5, "1", "(2)")) == "x = (2)\n"


def test_a_modules_own_test_file_comes_first_then_its_importers_tests(tmp_path):
    for path, text in {"gdro_lab/__init__.py": "", "gdro_lab/core.py": "A = 1\n",
                       "gdro_lab/user.py": "from gdro_lab.core import A\n",
                       "tests/test_user.py": "from gdro_lab import user\n",
                       "tests/test_core.py": "import gdro_lab.core\n",
                       "tests/test_other.py": "import os\n"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    selection = mutation_sample.test_files_by_distance(tmp_path)
    assert selection["gdro_lab.core"] == ["tests/test_core.py", "tests/test_user.py"]
    assert selection["gdro_lab.user"] == ["tests/test_user.py"]
