"""The bootstrap's error interval covers the truth at its nominal rate, fit by fit, in a world where the truth is
known exactly and the fit's own posterior is too narrow (as the gain recovery's noisy and middle worlds' were).

The toy pipeline mirrors ``bootstrap.replicate`` with every piece replaced by one that is cheap and exact: a world
is one true gain theta; its calibration data are ``N_OBS`` noisy measurements of theta; the fit draws
``DRAWS`` worlds around their mean with ``posterior_scale`` times the right spread (1: honest, below 1:
overconfident); ``predict.over_worlds`` summarises the draws as gdro predict does. The bootstrap refits B of the
fit's own drawn worlds and records each refit's error truth - median, which ``bootstrap.error_interval`` turns into
the printed interval. Over many fits (deterministic seeds) the coverage must lie in the binomial band of 95%.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from simulators.calibrate import bootstrap, predict

N_OBS, DRAWS, B, FITS = 4, 8, 6, 1000
LOW = binom.ppf(0.001, FITS, 0.95) / FITS  # a method that covers 95% falls below this once in a thousand runs
WORLDS = {"good": dict(theta=-0.10, noise=0.01, posterior_scale=1.0),   # honest posterior, small noise
          "poor": dict(theta=-0.20, noise=0.06, posterior_scale=0.25)}  # a posterior four times too narrow


def _fit(theta: float, noise: float, posterior_scale: float, rng: np.random.Generator) -> dict:
    """Measure theta N_OBS times, fit, predict: the over_worlds entry of the DRAWS drawn worlds."""
    mean = rng.normal(theta, noise, N_OBS).mean()
    return predict.over_worlds(rng.normal(mean, posterior_scale * noise / np.sqrt(N_OBS), DRAWS))


def _one_fit(world: dict, rng: np.random.Generator) -> tuple[dict, np.ndarray, list[float]]:
    """The fit, its B bootstrap errors (truth - median of the refit in each of B drawn worlds) and their stretches
    (the method before: distance in units of the refit's own side facing the truth)."""
    entry = _fit(world["theta"], world["noise"], world["posterior_scale"], rng)
    errors, stretches = [], []
    for b in range(B):
        truth = entry["per_world"][(b * DRAWS) // B]  # bootstrap.bootstrap spreads B worlds over the draws
        refit = _fit(truth, world["noise"], world["posterior_scale"], rng)
        errors.append(truth - refit["median"])
        stretches.append(bootstrap.stretch(truth, refit["median"], refit["lo"], refit["hi"]))
    return entry, np.array(errors), stretches


def _coverage(name: str) -> dict:
    world = WORLDS[name]
    covered, widths, central, stretched = [], [], [], []
    for fit in range(FITS):
        entry, errors, stretches = _one_fit(world, np.random.default_rng([17, len(name), fit]))
        printed = bootstrap.error_interval(entry, errors)
        covered.append(printed["wide_lo"] <= world["theta"] <= printed["wide_hi"])
        widths.append(printed["wide_hi"] - printed["wide_lo"])
        central.append(entry["lo"] <= world["theta"] <= entry["hi"])
        factor = float(np.quantile(stretches, bootstrap.LEVEL, method="higher"))
        wide = bootstrap.widen(entry, factor)
        stretched.append(wide["wide_lo"] <= world["theta"] <= wide["wide_hi"])
    return {"covered": np.mean(covered), "width": float(np.median(widths)), "central": np.mean(central),
            "stretched": np.mean(stretched)}


@pytest.fixture(scope="module")
def coverage() -> dict[str, dict]:
    return {name: _coverage(name) for name in WORLDS}


def test_each_world_is_covered_at_the_nominal_rate(coverage: dict[str, dict]) -> None:
    """95% nominal: at least the binomial band's lower end in each world, and not everything (a useless
    interval would cover every fit)."""
    for name, c in coverage.items():
        assert LOW <= c["covered"] <= 0.99, (name, c)


def test_the_overconfident_fit_gets_a_wide_interval_and_the_honest_one_a_narrow_one(coverage: dict[str, dict]) -> None:
    """The width follows each fit's own error, not one factor: the errors' sd is noise / sqrt(N_OBS) (the refit's
    median adds under 1% there), the median rms of B of them is sqrt(median chi2(B) / B) = 0.944 of it, and the
    half-width t(0.975, B) = 2.447 times that."""
    good, poor = coverage["good"], coverage["poor"]
    assert poor["width"] > 4 * good["width"]
    assert poor["width"] == pytest.approx(2 * 2.447 * 0.944 * 0.06 / np.sqrt(N_OBS), rel=0.1)


def test_the_overconfident_fit_defeats_the_central_interval_and_the_stretch_factor(coverage: dict[str, dict]) -> None:
    """Why the method changed: with a posterior four times too narrow the drawn worlds' central 95% covers about
    a third of the fits, and one stretch factor from six refits (a high order statistic of six values) stays
    below the nominal rate; the error interval is the one inside the band."""
    poor = coverage["poor"]
    assert poor["central"] < 0.5
    assert poor["stretched"] < LOW <= poor["covered"]
