"""World presets for the paper's three model scales (docs/paper.md, Fig. 3-4 and 8).

Each preset sets the world's difficulty offset, prompt-difficulty scale and never-solvable fraction so
that GRPO's bin mass at the end of the quick study lands near the paper's profile for that model. They
were fitted on GRPO only, never on a GDRO method, and reproduce mass profiles, not benchmark numbers.
The targets: docs/simulator-notes.md#simulators-presets; the fit: docs/benchmarks.md#simulators-presets.
"""

from __future__ import annotations

import difflib

from typing import Any

from gdro_lab import ConfigError

PRESETS: dict[str, dict[str, Any]] = {
    "paper-1.7b": {"unsolvable_frac": 0.35, "difficulty_offset": 0.75},
    "paper-4b": {"unsolvable_frac": 0.08, "difficulty_offset": 0.75, "prompt_difficulty_scale": 0.6},
    "paper-8b": {"unsolvable_frac": 0.0, "difficulty_offset": -1.5},
}


def preset_world(name: str) -> dict[str, Any]:
    """World overrides of preset ``name`` (one-line ConfigError for an unknown name)."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, list(PRESETS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"--preset {name!r}: {hint}choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[name])
