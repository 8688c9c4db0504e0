"""Fixtures of the LM study's tests: one warm start of the quick setting for the whole test session."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest


@pytest.fixture(scope="session")
def quick_warm_cache(built_once: Callable[[str, Callable[[Path], Any]], Any]) -> Path:
    """A warm-start cache (``GDRO_LMSTUDY_CACHE``) holding the quick setting's seed-0 warm start, trained once
    per test session (about 20 s; ``built_once``: the pytest-xdist workers share it) for the end-to-end
    tests that start from it (the quick study, the quick arena). The cache itself (a hit skips the
    training, a crash leaves nothing half written) is tested on its own in test_lm_warmstart.py."""
    from real_runs.lmstudy import learning_study
    from real_runs.lmstudy.warmstart import warm_start

    def train(folder: Path) -> Path:
        folder.mkdir(parents=True)
        warm_start(learning_study.warm_config(learning_study.QUICK, 0), cache_root=folder, log=lambda _: None)
        return folder

    return built_once("lmstudy-quick-warm-cache", train)
