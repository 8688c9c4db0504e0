"""The calibration's identification notes by value on a range narrower than 1 (a fraction's, or a short log
range), where the interval's share and the pile-up margin are relative to the range's width, not absolute."""

from __future__ import annotations

import numpy as np

from simulators.calibrate.calibration import identification

LO, HI = np.array([0.0]), np.array([0.4])      # width 0.4: a margin of 2% of it is 0.008


def notes(draws: list[float]) -> str:
    return identification(np.array(draws)[:, None], LO, HI, ("scale",))["scale"]


def test_the_interval_share_is_of_the_ranges_width():
    """Draws over [0.1, 0.35]: their interval spans 59% of a range 0.4 wide (25% of a range 1 wide)."""
    spread = notes(list(np.linspace(0.1, 0.35, 40)))
    assert spread == "weak: interval spans 59% of the allowed range"
    assert notes(list(np.linspace(0.15, 0.25, 40))) == "well identified"       # 25% of 0.4


def test_draws_pile_up_only_within_two_percent_of_the_ranges_width():
    middle = list(np.linspace(0.15, 0.2, 17))
    assert "3 of 20 draws pile up at the low end" in notes(middle + [0.005] * 3)   # within 0.008 of the end
    assert "pile up" not in notes(middle + [0.03] * 3)                            # within 0.05 = 0.02 / 0.4 only
