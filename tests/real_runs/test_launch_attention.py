"""Every launch path picks flash_attention_2 when flash-attn imports, else SDPA, and says so in one line
(real_runs.attention; gdro train's load_policy, the verl launch scripts and scripts/verl_smoke.sh use it)."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
import types
from pathlib import Path

import pytest

from real_runs import attention

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def flash_present(monkeypatch):
    module = types.ModuleType("flash_attn")
    module.__spec__ = importlib.machinery.ModuleSpec("flash_attn", None)  # transformers calls find_spec on it
    monkeypatch.setitem(sys.modules, "flash_attn", module)


@pytest.fixture
def flash_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # `import flash_attn` raises ImportError


def test_flash_attention_when_it_imports_on_cuda(flash_present):
    assert attention.choose_attention("cuda") == ("flash_attention_2", "flash-attn imports")
    assert attention.choose_attention("cuda:1")[0] == "flash_attention_2"
    assert attention.choose_attention("cpu")[0] == "sdpa"  # no CPU kernels


def test_sdpa_when_flash_attn_is_missing_or_broken(flash_absent, monkeypatch):
    implementation, reason = attention.choose_attention("cuda")
    assert implementation == "sdpa" and reason.startswith("flash-attn does not import (ModuleNotFoundError")

    def broken(name):
        raise OSError("undefined symbol: _ZN3c10 (built against another torch)\nsecond line")

    monkeypatch.setattr(attention.importlib, "import_module", broken)
    implementation, reason = attention.choose_attention("cuda")
    assert implementation == "sdpa" and "OSError: undefined symbol" in reason and "\n" not in reason


def test_verl_overrides_turn_packing_off_with_sdpa():
    assert attention.verl_overrides("flash_attention_2") == [
        "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2",
        "actor_rollout_ref.model.use_remove_padding=true"]
    assert attention.verl_overrides("sdpa")[1] == "actor_rollout_ref.model.use_remove_padding=false"


def test_cli_prints_the_overrides_and_one_line_saying_which():
    result = subprocess.run([sys.executable, "-m", "real_runs.attention", "--verl"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0
    expected, _ = attention.choose_attention("cuda")
    assert result.stdout.splitlines() == attention.verl_overrides(expected)
    assert result.stderr.splitlines() == [result.stderr.strip()] and result.stderr.startswith(f"attention: {expected} (")


def test_gdro_train_model_loading_announces_its_choice(flash_present, capsys):
    """On stdout with the run's other progress lines, once the model loaded (a load error stays one line)."""
    pytest.importorskip("transformers")
    from real_runs import models

    assert models.default_attention("cuda") == "flash_attention_2"
    models.load_policy("tiny", device="cpu")
    assert capsys.readouterr().out.splitlines() == ["attention: sdpa (device cpu: flash-attn has CUDA kernels only)"]
    models.load_policy("tiny", device="cpu", attn_implementation="eager")
    assert capsys.readouterr().out.splitlines() == ["attention: eager (asked for)"]


def test_every_verl_launch_path_asks_the_same_rule():
    """The GPU launch scripts get their attention overrides from real_runs.attention (composed and validated in
    tests/real_runs/verl/test_launch_scripts.py); none hard-codes an implementation."""
    for path in (ROOT / "real_runs/verl/configs/paper_run.sh", ROOT / "scripts/verl_smoke.sh"):
        text = path.read_text(encoding="utf-8")
        assert "-m real_runs.attention --verl" in text and "attn_implementation=" not in text, path
