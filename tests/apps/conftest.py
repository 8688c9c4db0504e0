"""Fixtures for the app tests: run directories to open, healthy and broken.

``tiny_run`` comes from the simulator (``simulated_run.write_tiny_run``) when it exists and
from the synthetic writer in ``gdro_app_synthetic`` otherwise; ``synthetic_run`` is always the
synthetic one (every field logged, so exact chart counts can be asserted). Broken runs are
copies of a healthy one with one thing damaged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from gdro_app_synthetic import SyntheticCurriculum, log_steps, open_synthetic_run, write_synthetic_run
from root100 import Root100
from root1000 import Root1000

APP_SCRIPT = Path(__file__).resolve().parents[2] / "apps" / "streamlit_app.py"


def _tiny_writer() -> tuple[str, Callable[[Path], Path]]:
    """The simulator's tiny-run writer when available, else the synthetic one."""
    try:
        from simulated_run import write_tiny_run
    except ImportError:
        return "synthetic", lambda path: write_synthetic_run(path, steps=30, seed=0)
    return "simulator", lambda path: write_tiny_run(path, steps=30, seed=0)


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder with a synthetic study: GRPO, Prompt-GDRO and Rollout-GDRO runs."""
    root = tmp_path_factory.mktemp("runs")
    for seed, method in enumerate(("grpo", "prompt_gdro", "rollout_gdro")):
        write_synthetic_run(root / "study" / method, steps=40, num_bins=6, seed=seed, method=method)
    return root


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny finished run from the simulator when it offers one, else synthetic; returns the run folder."""
    _, writer = _tiny_writer()
    return writer(tmp_path_factory.mktemp("tiny") / "tiny")


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished synthetic run logging every standard field (method "both")."""
    return write_synthetic_run(tmp_path_factory.mktemp("synthetic") / "both", steps=30, num_bins=6, seed=3)


@pytest.fixture
def copy_run(synthetic_run: Path, tmp_path: Path) -> Callable[[str], Path]:
    """Copy the synthetic run to a fresh folder (to damage it without touching the shared one)."""
    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(synthetic_run, target)
        return target
    return copy


@pytest.fixture
def torn_run(copy_run: Callable[[str], Path]) -> Path:
    """A run whose last steps.jsonl line is half written (no newline), as after a crash mid-write."""
    path = copy_run("torn")
    with open(path / "steps.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"step": 30, "scalars": {"mean_success": 0.5}, "bins": {"share": [0.1, 0.')
    return path


@pytest.fixture
def live_run(tmp_path: Path) -> Iterator[tuple[Path, Callable[[int], None]]]:
    """A run being written: 10 steps so far, status "running", and a function to append more steps."""
    curriculum = SyntheticCurriculum(num_bins=6, total_steps=40, seed=5)
    path = tmp_path / "live"
    writer = open_synthetic_run(path, curriculum)
    log_steps(writer, curriculum, range(10))
    written = [10]

    def append(count: int) -> None:
        log_steps(writer, curriculum, range(written[0], written[0] + count))
        written[0] += count

    yield path, append
    writer.close("finished")


@pytest.fixture
def newer_version_run(copy_run: Callable[[str], Path]) -> Path:
    """A run written by a newer gdro-lab (format version 99)."""
    path = copy_run("newer")
    meta = json.loads((path / "meta.json").read_text())
    meta["version"] = 99
    (path / "meta.json").write_text(json.dumps(meta))
    return path


@pytest.fixture
def corrupt_steps_run(copy_run: Callable[[str], Path]) -> Path:
    """A run whose steps.jsonl is damaged in the middle (not just a torn tail)."""
    path = copy_run("corrupt-steps")
    lines = (path / "steps.jsonl").read_text().splitlines(keepends=True)
    lines[5] = "#### not json ####\n"
    (path / "steps.jsonl").write_text("".join(lines))
    return path


@pytest.fixture
def corrupt_meta_run(copy_run: Callable[[str], Path]) -> Path:
    """A run whose meta.json is not JSON."""
    path = copy_run("corrupt-meta")
    (path / "meta.json").write_text('{"format": "gdro-run", "vers')
    return path


@pytest.fixture
def corrupt_config_run(copy_run: Callable[[str], Path]) -> Path:
    """A run whose config.json is cut short."""
    path = copy_run("corrupt-config")
    (path / "config.json").write_text('{"method": "bo')
    return path


@pytest.fixture
def malformed_record_run(copy_run: Callable[[str], Path]) -> Path:
    """A run with a well-formed JSON line whose content is wrong (a step that is not a number)."""
    path = copy_run("malformed")
    lines = (path / "steps.jsonl").read_text().splitlines(keepends=True)
    lines[3] = json.dumps({"step": "three", "scalars": {}, "bins": {}}) + "\n"
    (path / "steps.jsonl").write_text("".join(lines))
    return path


@pytest.fixture
def not_a_run(tmp_path: Path) -> Path:
    """A folder with files but no meta.json."""
    path = tmp_path / "not-a-run"
    path.mkdir()
    (path / "notes.txt").write_text("hello")
    return path


@pytest.fixture
def empty_run(tmp_path: Path) -> Path:
    """A run that has just started: meta and config written, no step yet."""
    curriculum = SyntheticCurriculum(num_bins=6, total_steps=40, seed=1)
    writer = open_synthetic_run(tmp_path / "empty", curriculum)
    writer.close("running")
    return tmp_path / "empty"


@pytest.fixture(scope="session")
def seeds_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study of two methods x three seeds, in simulator layout (<method>/seed<k>)."""
    root = tmp_path_factory.mktemp("seeds")
    for method in ("grpo", "prompt_gdro"):
        for seed in range(3):
            write_synthetic_run(root / method / f"seed{seed}", steps=30, num_bins=6, seed=seed, method=method)
    return root


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with a real trainer's extras: time/* scalars, agreed-name evaluations with
    bounds, and 8 warm-up steps on which no prompt is assigned to a bin yet."""
    return write_synthetic_run(tmp_path_factory.mktemp("real") / "real", steps=40, num_bins=6, seed=4,
                               real=True, warmup=8)


@pytest.fixture(scope="session")
def lr_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study in the simulator's lr-grid layout: 2 methods x 2 lr scales x 2 seeds (<method>/lr<s>/seed<k>)."""
    root = tmp_path_factory.mktemp("lr")
    for method in ("grpo", "prompt_gdro"):
        for lr_scale in (0.5, 2.0):
            for seed in range(2):
                write_synthetic_run(root / method / f"lr{lr_scale:g}" / f"seed{seed}", steps=20, num_bins=6, seed=seed,
                                    method=method, lr_scale=lr_scale)
    return root


@pytest.fixture(scope="session")
def trainer_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs in ``gdro train``'s layout (config sections, folders named ``<method>-tiny-s<seed>``), with a
    trainer's extras (step times, agreed evaluation names): 2 methods x 2 seeds."""
    root = tmp_path_factory.mktemp("trainer")
    for method in ("grpo", "prompt_gdro"):
        for seed in range(2):
            write_synthetic_run(root / f"{method}-tiny-s{seed}", steps=20, num_bins=6, seed=seed, method=method,
                                real=True, layout="trainer", eval_every=5)
    return root


@pytest.fixture
def warmup_run(tmp_path: Path) -> Path:
    """A live run still in the classifier's warm-up: 6 steps, no prompt assigned to a bin yet."""
    curriculum = SyntheticCurriculum(num_bins=6, total_steps=40, seed=2, warmup=20)
    writer = open_synthetic_run(tmp_path / "warming", curriculum)
    log_steps(writer, curriculum, range(6))
    writer.close("running")
    return tmp_path / "warming"


@pytest.fixture(scope="session")
def root100(built_once: Callable[[str, Callable[[Path], Any]], Any]) -> Root100:
    """A runs folder of 117 run candidates like a user's (``root100.build_root``): 100 runs of one
    ``gdro simulate`` study, 12 of a ``gdro sweep``, 3 trainer-style runs, a truncated run, a run of
    a newer format, and a folder that is not a run. Built once per test session (about 15 s), shared by
    the pytest-xdist workers (``built_once``); the tests only read it."""
    from root100 import build_root

    return built_once("root100", build_root)


@pytest.fixture(scope="session")
def root1000(built_once: Callable[[str, Callable[[Path], Any]], Any]) -> Root1000:
    """A runs folder shaped like one ``gdro arena`` output (``root1000.build_root``): 1,020 simulator
    runs, 150 trainer runs, 4 damaged folders and an empty one, synthesized (about 15 s, 310 MB).
    Built once per test session for every browser test at 1,000 runs, shared by the pytest-xdist workers
    (``built_once``); the tests only read it."""
    from root1000 import build_root

    return built_once("root1000", lambda folder: build_root(folder / "arena"))


@pytest.fixture(scope="session")
def app100_url(root100: Root100, app_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One app server (SVG renderer) on ``root100`` for every browser module that reads it: started once
    per test session (per worker under pytest-xdist), so that each module skips the server's start and
    its first scan of the root. The tests only read the root; each opens its own browser session."""
    from browser100 import serve

    with serve(root100.root, tmp_path_factory.mktemp("app100") / "app.log") as url:
        yield url


@pytest.fixture(scope="session")
def app1000_url(root1000: Root1000, app_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One app server (SVG renderer) on ``root1000`` for every browser module that reads it (as ``app100_url``)."""
    from browser100 import serve

    with serve(root1000.root, tmp_path_factory.mktemp("app1000") / "app.log") as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def app_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The app's state folder (pinned names, the run index) in a temporary folder for every test,
    app servers started by the browser tests included (they inherit the environment)."""
    from apps.data.pins import STATE_ENV

    folder = tmp_path_factory.mktemp("app-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_ENV, str(folder))
        yield folder
