"""A plug-in method for ``gdro simulate --plugin simulators.examples.hard_bin --methods grpo,hard_bin``.

It registers a weighter that doubles the advantages of the hardest bin (bin 0) and a method that
uses it; the method then gets the same baselines (step-matched and tuned GRPO) and decision as the
built-in ones. Any class with ``cls(config, seed)``, ``config_class``, ``update(feedback)`` and
``state_dict()`` / ``load_state_dict()`` can be registered this way.
"""

from __future__ import annotations

import numpy as np

from gdro_lab.controllers.prompt_gdro import UniformWeighter
from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.methods import MethodSpec
from simulators.methods import register_method


class HardBinWeighter(UniformWeighter):
    """Multiplier 2 for prompts in bin 0, 1 elsewhere (unassigned prompts included)."""

    def multipliers(self, bins_P: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(bins_P) == 0, 2.0, 1.0)


REGISTRY["weighter"]["hard_bin_x2"] = HardBinWeighter
register_method(MethodSpec("hard_bin", "hard bin x2", weighter="hard_bin_x2", summary="doubles bin 0"), replace=True)
