"""Settings a method brings to every arena run of it beyond its controllers, shared by the simulator's arena
(``simulators.studies.allocation_arena``) and the CPU LM study's (``real_runs.lmstudy.lm_arena``)."""

from __future__ import annotations

from typing import Any

DUET_EARLY_STOP: dict[str, Any] = {"abort_horizon": 11, "abort_grace": 1, "abort_keep_prob": 0.05}
"""DUET's early stopping: a check at 12 tokens, about the 85th percentile of both arenas' response lengths at
the start (10-13 tokens: the simulator's length model is fitted to the CPU LM study); the paper's horizon was
not available (docs/arena.md)."""
METHOD_SETTINGS: dict[str, dict[str, Any]] = {"duet": DUET_EARLY_STOP}
"""Per method: the simulator's ``SimConfig`` fields, and the trainer's ``rollout`` section, of the same names."""
