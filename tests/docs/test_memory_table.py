"""docs/train.md's table of the paper presets' projected GPU memory is what scripts/memory_table.py prints."""

from __future__ import annotations

from pathlib import Path

from scriptload import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_the_memory_table_of_train_md_is_the_projection_of_the_presets() -> None:
    module = load_script("memory_table")
    page = (ROOT / "docs" / "train.md").read_text(encoding="utf-8")
    block = page.split("<!-- generated: memory_table -->\n")[1].split("\n<!-- /generated: memory_table -->")[0]
    assert block == module.table(), "docs/train.md's memory table is stale: paste `python scripts/memory_table.py`"
    assert "| `paper-qwen3-1.7b` (" in block and block.count("\n") == 4
