"""Fixtures of the LM study's tests: the quick setting at its test size, and one warm start of it for the
whole test session."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import pytest


@pytest.fixture(scope="session")
def quick_config() -> Any:
    """The quick setting (``learning_study.QUICK``) with 4 held-out problems per group instead of 10: the
    fewest that leave every skill in both halves (validation and test; ``tasks.heldout_halves`` alternates
    within each level, and a skill has up to 3 levels) and in both of the arena's splits. The end-to-end
    tests evaluate every run on the held-out split, so its size is most of their time; what they check
    (every benchmark and group present, the budget, the report) does not depend on it."""
    from real_runs.lmstudy import learning_study

    quick = learning_study.QUICK
    return dataclasses.replace(quick, heldout_per_group=4, warm=dataclasses.replace(quick.warm, heldout_per_group=4))


@pytest.fixture(scope="session")
def quick_warm_cache(quick_config: Any, built_once: Callable[[str, Callable[[Path], Any]], Any]) -> Path:
    """A warm-start cache (``GDRO_LMSTUDY_CACHE``) holding ``quick_config``'s seed-0 warm start, trained once
    per test session (about 20 s; ``built_once``: the pytest-xdist workers share it) for the end-to-end
    tests that start from it (the quick study, the quick arena). The cache itself (a hit skips the
    training, a crash leaves nothing half written) is tested on its own in test_lm_warmstart.py."""
    from real_runs.lmstudy import learning_study
    from real_runs.lmstudy.warmstart import warm_start

    def train(folder: Path) -> Path:
        folder.mkdir(parents=True)
        warm_start(learning_study.warm_config(quick_config, 0), cache_root=folder, log=lambda _: None)
        return folder

    return built_once("lmstudy-quick-warm-cache-heldout4", train)
