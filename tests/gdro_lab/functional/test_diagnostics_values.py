"""The SE proxies' input check by value where a sampled mutant survived its own tests: a rollout count that
is not > 0 on a bin with prompts is refused, whatever the other inputs."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab import ConfigError
from gdro_lab.functional.diagnostics import se_proxy, variance_proxy


@pytest.mark.parametrize("n_G", [[4.0, 0.0], [4.0, -2.0], [4.0, np.nan]])
def test_a_count_not_above_zero_on_a_bin_with_prompts_is_refused(n_G):
    share, sigma = np.array([0.5, 0.5]), np.array([0.5, 0.5])
    for proxy in (se_proxy, variance_proxy):
        with pytest.raises(ConfigError, match="n_G is invalid on a bin with prompts"):
            proxy(share, sigma, np.array(n_G))
    assert se_proxy(np.array([1.0, 0.0]), sigma, np.array(n_G)) == pytest.approx(0.5 / 2)   # an empty bin: ignored
