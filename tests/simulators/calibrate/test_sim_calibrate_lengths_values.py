"""The length fit's posterior pass rates by hand at two samples per prompt (the smallest count that has a
spread to shrink), where a sampled mutant (`n > 2` for `n > 1`) survived the length tests."""

from __future__ import annotations

import numpy as np

from simulators.calibrate.lengths import posterior_pass


def test_posterior_pass_rates_shrink_by_the_moments_at_two_samples_per_prompt():
    successes, samples = np.array([0, 1, 2, 2, 0, 2, 1, 2]), np.full(8, 2)
    m = 5 / 8                                                # mean pass rate
    var_p = (0.171875 - m * (1 - m) / 2) / (1 - 1 / 2)       # the rates' variance 0.171875 less binomial noise
    total = m * (1 - m) / var_p - 1                          # Beta(m t, (1 - m) t): t = 8/7
    np.testing.assert_allclose(posterior_pass(successes, samples), (m * total + successes) / (total + 2), rtol=1e-12)
    np.testing.assert_allclose(total, 8 / 7)
