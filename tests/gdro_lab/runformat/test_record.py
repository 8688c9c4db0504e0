"""The shared step record: fields by hand on a small batch."""

from __future__ import annotations

import numpy as np

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.runformat.record import step_record


def test_step_record_fields():
    counts = np.array([2, 4, 6, 4])
    success = np.array([1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0], bool)
    bins = np.array([0, 2, 2, -1])
    feedback = StepFeedback(list("abcd"), bins, counts, 2.0 * success - 1, success)
    scalars, per_bin = step_record(feedback, 3, n_bar=4, n_min=2, n_max=12,
                                   weights_G=np.array([1.0, 1.0, 2.0]), mu=0.5)
    np.testing.assert_array_equal(per_bin["count"], [1, 0, 2])
    np.testing.assert_allclose(per_bin["share"], [1 / 3, 0, 2 / 3])
    np.testing.assert_allclose(per_bin["weight"], [0.25, 0.25, 0.5])
    np.testing.assert_allclose(per_bin["rollouts"], [2, np.nan, 5])
    np.testing.assert_allclose(per_bin["success"], [1.0, np.nan, (0.5 + 4 / 6) / 2])
    assert scalars["total_rollouts"] == 16 and scalars["num_unassigned"] == 1
    assert scalars["zero_variance_frac"] == 0.25  # prompt a: all successes
    np.testing.assert_allclose(scalars["lead_lag_gap"], (0.25 * 1 + 0.5 * 2) - (2 * 2 / 3))
    assert scalars["mu"] == 0.5
    assert scalars["se_uniform"] > 0 and np.isfinite(scalars["se_reduction_pct"])


def test_weights_of_another_number_of_bins_are_a_one_line_error():
    """Eq. 32 needs one weight per bin: weights of 2 bins on a 3-bin step name both sizes."""
    import pytest

    from gdro_lab._validate import ConfigError

    success = np.ones(8, bool)
    feedback = StepFeedback(list("ab"), np.array([0, 2]), np.array([4, 4]), 2.0 * success - 1, success)
    with pytest.raises(ConfigError, match=r"lead_lag_gap: share_G has 3 bins: must match weights_G \(2\)"):
        step_record(feedback, 3, n_bar=4, n_min=2, n_max=12, weights_G=np.array([1.0, 1.0]))
