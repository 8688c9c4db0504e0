"""GDRO on verl as a plugin: difficulty bins, Prompt-GDRO and Rollout-GDRO inside verl's PPO loop.

Importing verl, never copying its files or changing them on disk (tested against verl 0.9.1, the
``verl`` extra). The modules and their roles: docs/verl.md and docs/verl-notes.md#real_runs-verl.
"""


class VerlPluginError(ValueError):
    """Bad input to the verl plugin; the message names the problem and the fix in one line."""
