"""A real two-node Ray cluster on this machine, started with scripts/ray_cluster.sh exactly as the docs
say (`head`, then `worker HEAD_IP:PORT`), and the shared-filesystem check run against it
(`scripts/ray_cluster.sh check`): one Ray task per node, pinned to it.

Both nodes share this machine's disk, so an absolute folder passes; a relative one fails, as on a
real cluster, because each node resolves it against the directory its `ray start` ran in. The
cluster lives in its own RAY_TMPDIR, port and home (so its own Ray auth token; other Ray instances
on the machine are not touched) and is stopped by killing the two `ray start --block` process groups
this test started.
Runtime: about 1-2 minutes of CPU.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
RAY = Path(sys.executable).parent / "ray"
SMALL = ["--block", "--num-cpus=1", "--num-gpus=0", "--object-store-memory=80000000"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def two_nodes():
    if not RAY.exists():
        pytest.skip("no ray command next to this interpreter")
    base = Path(tempfile.mkdtemp(prefix="gdro-ray-", dir="/tmp"))  # short: Ray's socket paths have a limit
    env = {**os.environ, "RAY": str(RAY), "RAY_TMPDIR": str(base / "t"), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_PORT": str(_free_port()), "PYTHON": sys.executable, "PYTHONPATH": str(ROOT),
           "OMP_NUM_THREADS": "1", "HOME": str(base / "home")}  # a home both nodes share: one auth token
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    (base / "home").mkdir()
    procs = []

    def start(name: str, *args: str) -> subprocess.Popen:
        (base / name).mkdir()
        log = open(base / f"{name}.log", "w")
        proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "ray_cluster.sh"), *args], cwd=base / name,
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    address_file = base / "t" / "ray" / "ray_current_cluster"
    try:
        start("head", "head", "--include-dashboard=false", *SMALL)
        address = _wait_for(lambda: address_file.exists() and address_file.read_text().strip(), 180, "the head")
        start("worker", "worker", address, *SMALL)
        (base / "driver").mkdir()

        def check(*folders: str) -> subprocess.CompletedProcess:
            return subprocess.run(["bash", str(ROOT / "scripts" / "ray_cluster.sh"), "check", *folders],
                                  cwd=base / "driver", env=env, capture_output=True, text=True, timeout=300)

        last: list[subprocess.CompletedProcess] = []

        def joined() -> bool:
            last[:] = [check(str(base / "probe"))]
            return "all 2 node(s)" in last[0].stdout

        try:
            _wait_for(joined, 240, "the worker to join")
        except AssertionError as err:
            logs = {name: (base / f"{name}.log").read_text()[-1500:] for name in ("head", "worker")}
            raise AssertionError(f"{err}; last check: {last[0].stdout[-500:]} {last[0].stderr[-1500:]}; "
                                 f"logs: {logs}") from None
        yield {"base": base, "check": check, "address": address, "env": env}
    finally:
        for proc in procs:  # only the process groups this fixture started
            with_group = proc.pid
            try:
                os.killpg(with_group, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(5)  # the raylets and GCS exit after their `ray start --block` parent
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(base, ignore_errors=True)


def test_head_printed_the_worker_command_and_made_the_token(two_nodes):
    first = (two_nodes["base"] / "head.log").read_text().splitlines()[0]
    port = two_nodes["address"].rsplit(":", 1)[1]
    assert first.startswith("ray_cluster: starting the head on port ") and first.endswith(f":{port}")
    assert (two_nodes["base"] / "home" / ".ray" / "auth_token").stat().st_size > 0  # both nodes joined with it


def test_every_node_sees_a_shared_absolute_folder(two_nodes):
    ckpt, run = two_nodes["base"] / "shared" / "ckpt", two_nodes["base"] / "shared" / "run"
    result = two_nodes["check"](str(ckpt), str(run))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0] == f"shared filesystem: all 2 node(s) see folder 1={ckpt}, folder 2={run}"
    labels = lines[1].removeprefix("nodes: ").split("; ")
    assert len(labels) == 2 and len({label.split("node ")[-1] for label in labels}) == 2  # two node ids
    assert list(ckpt.iterdir()) == [] and list(run.iterdir()) == []  # the markers are gone


def test_a_relative_folder_is_not_shared_and_fails_naming_the_node(two_nodes):
    base = two_nodes["base"]
    result = two_nodes["check"]("ckpt_rel")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: folder 1=ckpt_rel is not one shared filesystem: node ")
    assert "cannot see the marker file" in last
    assert (f"working directory {base / 'head'}" in last) or (f"working directory {base / 'worker'}" in last)
    assert list((base / "driver" / "ckpt_rel").iterdir()) == []


def test_a_plugin_error_raised_on_the_cluster_ends_the_launcher_in_one_line(two_nodes):
    """What the launcher does when the task runner's check fails: Ray's task error is a
    VerlPluginError, and the launcher prints its message alone and exits 2."""
    code = f"""
import ray
from real_runs.verl import VerlPluginError
from real_runs.verl.main import _fail

ray.init(address={two_nodes['address']!r}, log_to_driver=False)

@ray.remote(num_cpus=0)
def check():
    raise VerlPluginError("trainer.default_local_dir=/x is not one shared filesystem: fix it")

try:
    ray.get(check.remote())
except VerlPluginError as err:
    _fail(err)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**two_nodes["env"], "RAY_AUTH_MODE": "token"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == \
        "error: trainer.default_local_dir=/x is not one shared filesystem: fix it"
