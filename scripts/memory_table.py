"""Print docs/train.md's table of the paper presets' projected GPU memory, from the code that projects it.

Each row: a ``real_runs/presets/paper-qwen3-*.toml`` preset, its model's parameters, the static and peak
memory that ``real_runs.memory.project`` gives for its micro-batch, and whether that fits each card of
``real_runs.memory.CARDS`` (the share of the card, or "does not fit"). tests/docs/test_memory_table.py
checks that docs/train.md holds exactly this table::

    python scripts/memory_table.py
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from real_runs import memory  # noqa: E402

PRESETS = ("paper-qwen3-1.7b", "paper-qwen3-4b", "paper-qwen3-8b")
CARD_LABELS = {"H200 141 GB": "H200", "80 GB card (H100/A100)": "80 GB card"}


def row(preset: str) -> str:
    settings = tomllib.loads((ROOT / "real_runs" / "presets" / f"{preset}.toml").read_text(encoding="utf-8"))
    tokens = settings["train"]["micro_batch_tokens"]
    shape = memory.Shape.of(memory.QWEN3_SHAPES[settings["model"]["name"]])
    projection = memory.project(shape, micro_batch_tokens=tokens, kl=settings["loss"]["kl_coef"] > 0,
                                gradient_checkpointing=settings["model"]["gradient_checkpointing"])
    static, peak = sum(projection.static.values()) / memory.GIB, projection.peak / memory.GIB
    cards = [f"fits ({peak / size:.0%})" if peak <= size else "does not fit" for size in memory.CARDS.values()]
    return (f"| `{preset}` ({tokens:,}) | {shape.parameters / 1e9:.2f} B | {static:.1f} GiB | {peak:.1f} GiB | "
            + " | ".join(cards) + " |")


def table() -> str:
    cards = " | ".join(f"{CARD_LABELS.get(name, name)} ({size:.1f} GiB)" for name, size in memory.CARDS.items())
    return "\n".join([f"| preset (micro-batch tokens) | parameters | static | peak | {cards} |",
                      "|---|---:|---:|---:|" + "---|" * len(memory.CARDS), *(row(p) for p in PRESETS)])


if __name__ == "__main__":
    print(table())
