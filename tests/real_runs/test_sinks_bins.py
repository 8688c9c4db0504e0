"""Per-bin arrays in TensorBoard: histograms over the bin index (the traveling wave), signed ones as
per-bin scalars; read back with TensorBoard's own event reader and compared to the arrays sent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from real_runs.sinks import Sinks  # noqa: E402


def read_events(run_dir: Path) -> EventAccumulator:
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"histograms": 0, "scalars": 0})
    events.Reload()
    return events


def test_per_bin_arrays_become_histograms_over_the_bin_index(tmp_path: Path) -> None:
    share = [np.array([0.5, 0.25, 0.25, np.nan]), np.array([0.1, 0.2, 0.3, 0.4])]
    rollouts = [np.array([4.0, 2.0, 0.0, 6.0]), np.array([3.0, 3.0, 3.0, 3.0])]
    sinks = Sinks(tmp_path, tensorboard=True)
    for step in (1, 2):
        sinks.log(step, {"mean_reward": 0.5}, {"share": share[step - 1], "rollouts": list(rollouts[step - 1])})
    sinks.close()
    events = read_events(tmp_path)
    for name, sent in (("share", share), ("rollouts", rollouts)):
        logged = events.Histograms(f"bins/{name}")
        assert [h.step for h in logged] == [1, 2]
        for h, values in zip(logged, sent):
            value = h.histogram_value
            expected = [0.0 if not np.isfinite(v) else float(v) for v in values]  # an empty bin: height 0
            np.testing.assert_allclose(value.bucket, expected, rtol=1e-6)
            np.testing.assert_allclose(value.bucket_limit, [0.5, 1.5, 2.5, 3.5])
            assert (value.min, value.max) == (-0.5, 3.5)
            # moments over the bin index, by a loop
            assert value.num == pytest.approx(sum(expected))
            assert value.sum == pytest.approx(sum(b * c for b, c in enumerate(expected)))
            assert value.sum_squares == pytest.approx(sum(b * b * c for b, c in enumerate(expected)))
    assert [e.value for e in events.Scalars("mean_reward")] == [0.5, 0.5]


def test_signed_arrays_are_per_bin_scalars(tmp_path: Path) -> None:
    """The mean reward per bin (in [-1, 1]) and an array once it had a negative value cannot be a
    histogram: one scalar per bin, NaN bins left out."""
    sinks = Sinks(tmp_path, tensorboard=True)
    sinks.log(1, {}, {"reward": [0.2, np.nan, -0.4], "score": [0.1, 0.2, 0.3]})
    sinks.log(2, {}, {"reward": [0.3, 0.1, 0.0], "score": [-0.1, 0.2, 0.3]})
    sinks.log(3, {}, {"reward": [0.3, 0.1, 0.0], "score": [0.1, 0.2, 0.3]})
    sinks.close()
    events = read_events(tmp_path)
    tags = events.Tags()
    assert "bins/reward" not in tags["histograms"]
    assert [(e.step, round(e.value, 6)) for e in events.Scalars("bins/reward/0")] == [(1, 0.2), (2, 0.3), (3, 0.3)]
    assert [e.step for e in events.Scalars("bins/reward/1")] == [2, 3]
    assert [h.step for h in events.Histograms("bins/score")] == [1]   # then signed: scalars from step 2 on
    assert [(e.step, round(e.value, 6)) for e in events.Scalars("bins/score/0")] == [(2, -0.1), (3, 0.1)]


def test_without_tensorboard_per_bin_arrays_are_ignored(tmp_path: Path) -> None:
    sinks = Sinks(tmp_path)
    sinks.log(1, {"x": 1.0}, {"share": [0.5, 0.5]})
    sinks.close()
    assert not (tmp_path / "tensorboard").exists()
