"""A plug-in method for ``gdro simulate --plugin simulators.examples.hard_bin --methods grpo,hard_bin``.

It registers a weighter that doubles the hardest bin's advantages and a method that uses it (what a
plug-in gets, and what it must provide: docs/simulator-notes.md#simulators-examples-hard_bin).
"""

from __future__ import annotations

import numpy as np

from gdro_lab.controllers.prompt_gdro import UniformWeighter
from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.methods import MethodSpec, register_method


class HardBinWeighter(UniformWeighter):
    """Multiplier 2 for prompts in bin 0, 1 elsewhere (unassigned prompts included)."""

    def multipliers(self, bins_P: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(bins_P) == 0, 2.0, 1.0)


REGISTRY["weighter"]["hard_bin_x2"] = HardBinWeighter
register_method(MethodSpec("hard_bin", "hard bin x2", weighter="hard_bin_x2", summary="doubles bin 0"), replace=True)
