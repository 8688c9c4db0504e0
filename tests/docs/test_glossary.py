"""docs/glossary.md lists every key a tiny simulator run and a tiny `gdro train` run log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "glossary.md"


def glossary_patterns(text: str) -> list[re.Pattern[str]]:
    """One regex per backticked key in the first column of the page's tables (`<x>`: any name part)."""
    patterns = []
    for line in text.splitlines():
        cells = line.split("|")
        if not line.startswith("|") or len(cells) < 3 or cells[1].strip() in ("key", "---"):
            continue
        for key in re.findall(r"`([^`]+)`", cells[1]):
            parts = re.split(r"(<[^>]+>)", key)
            body = "".join(r"[^/]+?" if p.startswith("<") else re.escape(p) for p in parts)
            patterns.append(re.compile(body + r"\Z"))
    return patterns


def undocumented(keys: set[str], text: str) -> list[str]:
    patterns = glossary_patterns(text)
    return sorted(k for k in keys if not any(p.match(k) for p in patterns))


def run_keys(run: Path) -> set[str]:
    """Every scalar, per-bin and evaluation key of a run directory."""
    keys: set[str] = set()
    for line in (run / "steps.jsonl").read_text().splitlines():
        record = json.loads(line)
        keys |= set(record["scalars"]) | set(record["bins"])
    if (run / "eval.jsonl").is_file():
        for line in (run / "eval.jsonl").read_text().splitlines():
            keys |= set(json.loads(line)["metrics"])
    return keys


def test_patterns_match_only_what_they_name():
    page = "| key | meaning |\n|---|---|\n| `a/b`, `<benchmark>/mean@<k>_lo` | x |\n"
    assert undocumented({"a/b", "math500/mean@8_lo", "a/bc", "x/y/mean@8_lo", "math500/mean@8"}, page) == \
        ["a/bc", "math500/mean@8", "x/y/mean@8_lo"]


def test_a_simulator_run_logs_only_documented_keys(tmp_path):
    from simulated_run import write_tiny_run
    keys = run_keys(write_tiny_run(tmp_path / "run", steps=12))
    assert {"mean_success", "mu", "count", "test/accuracy"} <= keys  # the run really logged
    assert undocumented(keys, PAGE.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("method", ["prompt_gdro", "rollout_gdro"])
def test_a_tiny_train_run_logs_only_documented_keys(tmp_path, method):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch

    from real_runs import train
    from real_runs.config import load_config
    torch.set_num_threads(1)
    cfg = load_config("tiny-cpu", [f"train.out={json.dumps(str(tmp_path))}", "train.progress=false",
                                   "train.steps=2", "data.limit=8", "eval.every=1", "eval.limit=2",
                                   f"method.name={method}", "train.run_name=g"])
    keys = run_keys(Path(train.main(cfg)))
    assert {"actor/loss", "time/step", "pooled/num_prompts"} <= keys
    assert undocumented(keys, PAGE.read_text(encoding="utf-8")) == []
