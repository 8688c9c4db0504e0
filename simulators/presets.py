"""World presets for the paper's three model scales (docs/paper.md, Fig. 3-4 and 8).

The paper gives, per model, where the batch mass sits by the end of training:

- Qwen3-1.7B: about 45% of the mass still in accbin_0 (never solved) at the last step;
- Qwen3-4B: more than 50% in accbin_5-7 by step 366;
- Qwen3-8B: accbin_0 nearly empty, the mass mostly in accbin_8-9.

Each preset sets the world's difficulty offset, prompt-difficulty scale and never-solvable
fraction so that GRPO's bin mass at the end of the quick study (400 steps, 4,000 prompts)
lands near that profile. Measured with GRPO, seed 0 (share by bin 0..9 at step 400):
1.7b ≈ 47% in bin 0; 4b ≈ 44% in bins 5-7 (16% in bin 0); 8b ≈ 78% in bins 8-9, 7% in bin 0.
They were fitted on GRPO only, never on a GDRO method. They reproduce mass profiles, not the
paper's benchmark numbers.
"""

from __future__ import annotations

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
        raise ConfigError(f"--preset {name!r}: choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[name])
