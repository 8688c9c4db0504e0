"""The length fit: it recovers the parameters of data drawn from the world's own length model (with and
without a binding cap; without one it agrees with OLS on log tokens), and gdro calibrate writes them into
world.toml only when the samples carry token counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulators import knobs
from simulators.calibrate.cli import calibrate_main
from simulators.calibrate.lengths import FIELDS, LengthSamples, fit_lengths, ols
from simulators.world import WorldConfig, sample_lengths

TRUTH = {"length_log_mean": 2.3, "length_hardness": 0.6, "length_failure": 0.4, "length_log_sd": 0.3}


def drawn(truth: dict[str, float], cap: int, prompts: int = 2000, k: int = 8, seed: int = 0
          ) -> tuple[LengthSamples, np.ndarray, np.ndarray]:
    """k responses per prompt at p ~ U(0, 1): (samples with the observed pass rates, p_P, successes_R)."""
    rng = np.random.default_rng(seed)
    p = rng.random(prompts)
    success = rng.random(prompts * k) < np.repeat(p, k)
    tokens = sample_lengths(rng, p, np.full(prompts, k), success, WorldConfig(**truth, max_new_tokens=cap))
    return LengthSamples(np.repeat(p, k), success, tokens), p, success


def test_fit_recovers_known_parameters_under_a_binding_cap() -> None:
    samples, _, _ = drawn(TRUTH, cap=16)  # over half of the responses cut at 16 tokens
    fit = fit_lengths(samples)
    assert 0.4 < fit.at_cap < 0.7 and fit.values["max_new_tokens"] == 16
    for name in FIELDS:
        assert fit.values[name] == pytest.approx(TRUTH[name], abs=0.03), name
    assert fit.ols["length_hardness"] < TRUTH["length_hardness"] - 0.1  # OLS, blind to the cap, is pulled down


def test_without_a_cap_the_fit_is_ols_on_log_tokens() -> None:
    truth = {**TRUTH, "length_log_mean": 6.5}  # ~700 tokens: rounding is negligible, nothing reaches the cap
    samples, _, _ = drawn(truth, cap=10**6)
    fit, check = fit_lengths(samples), ols(samples)
    for j, name in enumerate(FIELDS):
        assert fit.values[name] == pytest.approx(check[j], abs=2e-3), name
        assert fit.values[name] == pytest.approx(truth[name], abs=0.03), name


def write_samples(path: Path, samples: LengthSamples, tokens: bool, k: int = 8) -> Path:
    path.mkdir(parents=True)
    with open(path / "eval_samples_step0.jsonl", "w", encoding="utf-8") as handle:
        for r, (ok, count) in enumerate(zip(samples.success_R, samples.tokens_R)):
            record = {"id": f"q{r // k}", "sample": r % k, "success": bool(ok), "text": "", "group": f"g{r // k % 2}"}
            handle.write(json.dumps({**record, **({"tokens": int(count)} if tokens else {})}) + "\n")
    return path


@pytest.mark.parametrize("tokens", [True, False])
def test_calibrate_writes_the_fitted_lengths_only_when_the_samples_have_them(tmp_path: Path, tokens: bool) -> None:
    """From the samples file alone: the pass rates are estimated from 8 responses per prompt."""
    samples, _, _ = drawn(TRUTH, cap=16, prompts=1000)
    out = tmp_path / "cal"
    assert calibrate_main(["--samples", str(write_samples(tmp_path / "eval", samples, tokens)), "--boots", "4",
                           "--out", str(out)]) == 0
    world = WorldConfig(**knobs.load_toml(out / "world.toml")["world"])
    report = (out / "report.md").read_text()
    if tokens:
        assert world.lengths and world.max_new_tokens == 16 and "## Response lengths\n" in report
        for name in FIELDS:
            assert getattr(world, name) == pytest.approx(TRUTH[name], abs=0.08), name
    else:
        assert not world.lengths and "## Response lengths: not fitted" in report
        assert all(getattr(world, n) == getattr(WorldConfig(), n) for n in (*FIELDS, "max_new_tokens"))
