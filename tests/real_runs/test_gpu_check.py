"""scripts/gpu_check.sh: its dry mode runs every stage on CPU; its stages fit the device window.

The dry run executes the real stages at tiny size (the `gdro train` GDRO path with a stop and a
`--resume`, the verl smoke's composed launch, the throughput benchmark) and checks the summary
JSON. The window tests drive the script's shell logic with a stand-in interpreter: stage order
(the GDRO check first), caps that fit the window with a margin, a stage cut short or not run
when the window is spent, failures recorded while the next stage still runs, a verl environment
that is absent counted as a failure unless the user asked to skip it, the documented
`.venv-verl-gpu` found, and summary.json strict JSON (a NaN MFU is null with its reason).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
STAGES = ["env", "train", "verl", "bench"]
#: The device lends 15 minutes, start-up and transfers included: the script must end within ~9.
SCRIPT_BUDGET_S = 9 * 60


def strict_json(text: str) -> dict:
    """json.loads that refuses NaN and Infinity, as jq and most non-Python parsers do."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


#: Room for the env stage (imports torch) on a loaded machine: the verdict must not depend on the load.
SLOW_MACHINE_ENV = {"ENV_TIMEOUT": "240", "WINDOW_S": "900"}


def run_check(tmp_path: Path, *args: str, timeout: int = 600, script: Path = SCRIPT,
              **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out"
    result = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "OUT": str(out), "GPU_CHECK_WORK": str(tmp_path / "work"), **env})
    summary = strict_json((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    return result, summary


@pytest.mark.slow
def test_dry_mode_runs_every_stage_on_cpu_and_writes_the_summary(tmp_path: Path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    started = time.perf_counter()
    result, summary = run_check(tmp_path, "--dry-run", PYTHON=sys.executable, OMP_NUM_THREADS="1", **SLOW_MACHINE_ENV)
    assert result.returncode == 0, result.stdout[-3000:]
    stages = {s["name"]: s for s in summary["stages"]}
    assert [s["name"] for s in summary["stages"]] == STAGES and summary["dry"] and summary["passed"]
    assert all(s["status"] == "passed" for s in stages.values()), stages
    train = stages["train"]["numbers"]
    assert train["failures"] == [] and train["device"] == "cpu"
    assert train["total_rollouts_per_step"] == 8 * 4 and train["ragged_steps"]       # exact total, ragged plan
    assert 2 <= train["arms_min"] < 4 < train["arms_max"] <= 8
    assert train["multiplier_max"] > 1.0 and train["resumed_from"] == 2
    assert "step_00000002" in train["checkpoints_at_stop"] and "step_00000004" in train["checkpoints"]
    assert stages["verl"]["numbers"]["overrides"] > 20
    assert stages["bench"]["numbers"]["joint"]["tokens_per_s"] > 0
    # the CPU has no peak FLOPS: null with the reason (was NaN, not JSON); the attention it used is named
    bench = stages["bench"]["numbers"]
    assert bench["joint"]["mfu_pct"] is None and "PEAK_BF16" in bench["joint"]["mfu_null_reason"]
    assert bench["attention"] in ("sdpa", "eager", "flash_attention_2")
    assert stages["env"]["numbers"]["torch"].startswith("2.")
    # what comes back from a device machine: at most 8 files, no folders
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) <= 8 and all((tmp_path / "out" / f).is_file() for f in files), files
    assert {"summary.json", "summary.md", "gpu_check.log", "train.log"} <= set(files)
    print(f"dry run: {time.perf_counter() - started:.0f} s wall")


FAKE = """#!/usr/bin/env bash
# a stand-in interpreter: reports a GPU, records its calls, sleeps in the stage named by $SLEEP_IN
echo "$*" >> "$CALLS"
case "$*" in
  *find_spec*) exit 1;;  # the probe for verl and vLLM: not here
  "- "*bench_train.json*) exec "$REAL_PY" "$@";;  # the bench stage's summary code runs for real
  -\\ *|-) cat >/dev/null; echo "cuda 12.8 available True NVIDIA H200";;
  *gpu_check_train.py*) [ "$SLEEP_IN" = train ] && sleep "$SLEEP_S"; exit "${TRAIN_RC:-0}";;
  *bench_train.py*) [ "$SLEEP_IN" = bench ] && sleep "$SLEEP_S"; mkdir -p "$WORK/bench"; echo table > "$WORK/bench/bench_train.md"
    echo '{"rows": {"joint": {"tokens_per_s": 1234.5, "mfu_pct": NaN, "attention": "sdpa"}}}' > "$WORK/bench/bench_train.json";;
esac
exit 0
"""


def fake_check(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    fake = tmp_path / "python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    env = {"SLEEP_IN": "", "SLEEP_S": "0", **env}
    result, summary = run_check(tmp_path, *args, timeout=120, PYTHON=str(fake), CALLS=str(calls),
                                REAL_PY=sys.executable, VERL_PY=str(tmp_path / "no_python"), **env)
    return result, summary, calls.read_text().splitlines() if calls.exists() else []


def test_stages_run_gdro_first_and_their_caps_fit_the_window_with_a_margin(tmp_path: Path):
    result, summary, calls = fake_check(tmp_path)
    assert result.returncode == 1, result.stdout[-2000:]  # no verl environment here: a failure
    assert [s["name"] for s in summary["stages"]] == STAGES
    assert [s["status"] for s in summary["stages"]] == ["passed", "passed", "missing", "passed"]
    caps = summary["caps_s"]
    grace = 5  # timeout --kill-after per stage
    assert sum(caps.values()) + grace * len(caps) <= summary["window_s"] <= SCRIPT_BUDGET_S - 30
    assert [s["limit_s"] for s in summary["stages"]] == [caps[name] for name in STAGES]
    train_call = next(c for c in calls if "gpu_check_train.py" in c)
    assert "--device cuda" in train_call
    bench_call = next(c for c in calls if "bench_train.py" in c)
    assert "--shape qwen3-0.6b --device cuda" in bench_call and "--methods joint" in bench_call


def test_a_missing_verl_environment_is_a_failure_not_a_pass(tmp_path: Path):
    """No interpreter with verl and vLLM, and no --skip verl: the check must not end "passed"."""
    result, summary, calls = fake_check(tmp_path)
    assert result.returncode == 1 and not summary["passed"]
    assert [s["status"] for s in summary["stages"]] == ["passed", "passed", "missing", "passed"]
    detail = summary["stages"][2]["detail"]
    assert ".venv-verl-gpu" in detail and "--verl-python" in detail and "--skip verl" in detail
    assert "| verl | missing: gpu_check: verl: no interpreter has verl and vLLM" in (
        tmp_path / "out" / "summary.md").read_text()
    skipped, summary, _ = fake_check(tmp_path / "asked", "--skip", "verl")
    assert skipped.returncode == 0 and summary["passed"] and summary["stages"][2]["detail"] == "asked: --skip verl"
    assert "| verl | skipped (asked: --skip verl) |" in (tmp_path / "asked" / "out" / "summary.md").read_text()
    same, summary, _ = fake_check(tmp_path / "by_env", GPU_CHECK_SKIP="verl")
    assert same.returncode == 0 and summary["stages"][2]["status"] == "skipped"


def test_the_documented_verl_environment_is_found(tmp_path: Path):
    """docs/install.md makes .venv-verl-gpu: the verl stage runs the smoke with it (a copy of the script in a
    scratch repository, with stand-ins for the venv's python and the smoke script)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("gpu_check.sh", "gpu_check_train.py"):
        (repo / "scripts" / name).write_text((SCRIPT.parent / name).read_text())
    smoke = repo / "scripts" / "verl_smoke.sh"
    smoke.write_text('echo "smoke with $VERL_PY"\n')
    venv_python = repo / ".venv-verl-gpu" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text('#!/usr/bin/env bash\ncase "$*" in *find_spec*verl*vllm*) exit 0;; esac\nexit 1\n')
    venv_python.chmod(0o755)
    fake = tmp_path / "python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "VERL_PY"}
    result = subprocess.run(["bash", str(repo / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                            timeout=120, env={**env, "OUT": str(tmp_path / "out"), "GPU_CHECK_WORK": str(tmp_path / "w"),
                                              "PYTHON": str(fake), "CALLS": str(tmp_path / "calls"),
                                              "REAL_PY": sys.executable, "SLEEP_IN": "", "SLEEP_S": "0"})
    summary = strict_json((tmp_path / "out" / "summary.json").read_text())
    verl = summary["stages"][2]
    assert verl["status"] == "passed", result.stdout[-2000:]
    assert verl["detail"] == f"smoke with {venv_python}"
    assert result.returncode == 0


def test_the_summary_is_strict_json_and_names_the_attention(tmp_path: Path):
    """A GPU outside the benchmark's peak-FLOPS table: mfu_pct null with its reason, never NaN."""
    result, summary, _ = fake_check(tmp_path, "--skip", "verl")
    assert result.returncode == 0, result.stdout[-2000:]
    bench = summary["stages"][3]["numbers"]
    assert bench["joint"]["tokens_per_s"] == 1234.5 and bench["joint"]["mfu_pct"] is None
    assert "PEAK_BF16" in bench["joint"]["mfu_null_reason"] and bench["attention"] == "sdpa"
    assert "NaN" not in (tmp_path / "out" / "summary.json").read_text()


def test_a_failed_stage_is_recorded_and_the_next_still_runs(tmp_path: Path):
    result, summary, calls = fake_check(tmp_path, TRAIN_RC="1")
    assert result.returncode == 1 and not summary["passed"]
    assert [s["status"] for s in summary["stages"]] == ["passed", "failed", "missing", "passed"]
    assert any("bench_train.py" in c for c in calls)


def test_the_script_never_runs_past_its_window(tmp_path: Path):
    """22 s window, a train stage that would take 100 s: cut at the window, verl and bench not run."""
    started = time.perf_counter()
    result, summary, calls = fake_check(tmp_path, WINDOW_S="22", SLEEP_IN="train", SLEEP_S="100")
    elapsed = time.perf_counter() - started
    assert result.returncode == 1
    stages = {s["name"]: s for s in summary["stages"]}
    assert stages["train"]["status"] == "timeout" and 15 <= stages["train"]["limit_s"] <= 17
    assert stages["verl"]["status"] == stages["bench"]["status"] == "not run"
    assert not any("bench_train.py" in c for c in calls)
    # killed at the window, not after the stage's 100 s: the margin between the two absorbs any machine load
    assert elapsed < 22 + 5 + 30 < 100, elapsed


def test_no_gpu_stops_after_env_and_bad_arguments_are_one_line(tmp_path: Path):
    pytest.importorskip("torch")
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU is present")
    result, summary = run_check(tmp_path, PYTHON=sys.executable, timeout=600, **SLOW_MACHINE_ENV)
    assert result.returncode == 2 and "no usable GPU" in result.stdout
    assert [s["name"] for s in summary["stages"]] == ["env"] and summary["stages"][0]["status"] == "failed"
    assert (tmp_path / "out" / "env.txt").exists()
    bad = subprocess.run(["bash", str(SCRIPT), "--fast"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OUT": str(tmp_path / "bad")})
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "gpu_check: unknown argument '--fast': use --dry-run, --verl-python PYTHON, --skip verl|bench or nothing")
    for args, message in ((["--skip", "env"], "--skip env: only verl and bench can be skipped"),
                          (["--verl-python"], "--verl-python needs a value")):
        bad = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "OUT": str(tmp_path / "bad")})
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
