"""Shared fixtures: a small stationary world that produces StepFeedback for the controllers, and
the data folders (the full ``../shared/data`` or the small fixtures shipped in ``tests/fixtures/data``).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from gdro_lab.controllers.feedback import StepFeedback


@dataclass
class ToyWorld:
    """Fixed prompts with fixed success probabilities; rollouts are Bernoulli, rewards +-1.

    ``step_seed`` makes the outcome of a step a function of (seed, step, plan) only, so two
    controllers given the same plans see the same feedback.
    """

    success_P: np.ndarray
    seed: int = 0

    @property
    def prompt_ids(self) -> list[str]:
        return [f"toy:train:{i}" for i in range(self.success_P.size)]

    def batch(self, step: int, size: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step, 1])
        return rng.choice(self.success_P.size, size=size, replace=False)

    def feedback(self, step: int, index_P: np.ndarray, bins_P: np.ndarray, counts_P: np.ndarray,
                 variance_G: np.ndarray | None = None) -> StepFeedback:
        rng = np.random.default_rng([self.seed, step, 2])
        success = rng.random(int(np.sum(counts_P))) < np.repeat(self.success_P[index_P], counts_P)
        ids = [f"toy:train:{i}" for i in index_P]
        return StepFeedback(ids, np.asarray(bins_P), np.asarray(counts_P), 2.0 * success - 1.0, success,
                            variance_G=variance_G)


@pytest.fixture
def toy_world() -> ToyWorld:
    rng = np.random.default_rng(123)
    return ToyWorld(rng.beta(0.6, 0.6, size=400), seed=7)


# ----------------------------------------------------------------------------- data folders

#: A few dozen rows per data set, in the layout of ../shared/data (see its README.md).
FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "data"
#: The one line a test that needs the full data skips with on a clone alone.
FULL_DATA_SKIP = ("needs the full data sets ({root} has {what}): put ../shared/data beside the clone "
                  "or set GDRO_DATA")


def pytest_configure(config: pytest.Config) -> None:
    """A clone alone (no $GDRO_DATA, no ../shared/data) runs on the shipped fixtures.

    Set in the environment, so subprocesses (the CLI tests) see it too."""
    from real_runs.data import data_root

    if not os.environ.get("GDRO_DATA") and not (data_root() / "math500" / "test.jsonl").exists():
        os.environ["GDRO_DATA"] = str(FIXTURE_DATA)


#: torch's intra-op threads as CI sets them (OMP_NUM_THREADS); None when unset (a developer's machine).
TORCH_THREADS = int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS", "").isdigit() else None


@pytest.fixture(autouse=True, scope="session")
def _fsync_checks_only_its_descriptor():
    """``os.fsync`` in the test process checks its descriptor (a closed or bad one raises, as fsync does) and
    writes nothing to the disk: the run writers fsync every JSON file they replace, and a test that writes
    many runs (a prediction's simulated worlds) spent most of its time waiting on the disk (the plan's loop
    driver: 3,318 fsyncs, 17 of its 91 s on a busy disk). What a crash leaves is tested with real processes
    (the kill-and-resume tests), which keep the real fsync."""
    real = os.fsync

    def checked(fd: Any) -> None:
        os.fstat(fd if isinstance(fd, int) else fd.fileno())

    os.fsync = checked
    yield
    os.fsync = real


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """torch's thread count back to what it was after every test. Code under test sets it (the LM study's and
    arena's warm start: jobs x threads), and in a pytest-xdist worker the setting outlived the test: with two
    workers and CI's second core busy, the extra OpenMP threads oversubscribed the machine and every later
    torch test in that worker ran 5-20 times slower (the paper-preset rehearsal 200 s in CI, 29 s alone)."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else TORCH_THREADS
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with a slow test first, each file's tests kept together and in order: under `.ci/run`'s
    `pytest -n 2 --dist loadfile` the longest files start early instead of running alone at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], Any]], Any]:
    """``built_once(name, build)``: ``build(folder)``'s value, built once per test session in a folder of its own
    and read back by every later caller, the other pytest-xdist workers of the session included (under
    `.ci/run`'s two workers each would otherwise build it again). The first caller builds under a file lock
    while the others wait; the value is kept with pickle. For what the tests only read (a generated runs
    folder, a trained warm start)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' temporary folders sit in the session's own
        base = base.parent

    def once(name: str, build: Callable[[Path], Any]) -> Any:
        record = base / f"{name}.pickle"
        with open(base / f"{name}.lock", "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if record.is_file():
                return pickle.loads(record.read_bytes())
            folder = base / name
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            value = build(folder)
            record.write_bytes(pickle.dumps(value))
            return value

    return once


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The data root in use: the full data, or the fixtures on a clone alone. For tests that
    need only a few rows of each set (the fixtures hold 24-64)."""
    from real_runs.data import data_root

    root = data_root()
    if not (root / "math500" / "test.jsonl").exists():
        pytest.skip(f"data folder {root} not found: set GDRO_DATA")
    return root


@pytest.fixture(scope="session")
def shared_data(data_dir: Path) -> Path:
    """The FULL data (``../shared/data`` or ``$GDRO_DATA``): tests that count whole files skip
    with one line when only the fixtures are there."""
    if data_dir.resolve() == FIXTURE_DATA:
        pytest.skip(FULL_DATA_SKIP.format(root="tests/fixtures/data", what="24-64 rows per set"))
    return data_dir


@pytest.fixture
def fixture_data(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Forces the shipped fixtures for one test (same rows on every machine); returns their root."""
    monkeypatch.setenv("GDRO_DATA", str(FIXTURE_DATA))
    return FIXTURE_DATA
