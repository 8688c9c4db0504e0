"""The app's data helpers by value where sampled mutants survived their tests: the last step's cell ends one
stride after it (one step when every step is logged), interval bounds X_lo / X_hi are not offered as keys
of their own, and the band note lists five thin groups without "and 0 more"."""

from __future__ import annotations

import numpy as np

from apps.data.curriculum import _step_ends
from apps.data.runcolumns import RunScalars, scalar_keys
from apps.data.study import Method, band_note


def test_each_steps_cell_ends_at_the_next_logged_step_and_the_last_one_stride_later():
    np.testing.assert_array_equal(_step_ends(np.array([1, 2, 3])), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(_step_ends(np.array([10, 20, 30])), [20.0, 30.0, 40.0])
    np.testing.assert_array_equal(_step_ends(np.array([5])), [6.0])


def test_interval_bounds_of_a_logged_key_are_not_keys_of_their_own():
    runs = [RunScalars({"acc": np.ones(2), "acc_lo": np.ones(2), "acc_hi": np.ones(2), "x_lo": np.ones(1)}),
            RunScalars({"loss": np.ones(3), "empty": np.zeros(0)})]
    assert scalar_keys(runs) == ["acc", "loss", "x_lo"]


def test_the_band_note_lists_up_to_five_thin_groups_by_name():
    thin = [Method(f"m{i}", f"k{i}", (("seed0", None),)) for i in range(6)]
    five = band_note(thin[:5], "mean", "95% CI")
    assert five.endswith("5 groups with fewer get no band (m0, m1, m2, m3, m4).")
    assert band_note(thin, "mean", "95% CI").endswith("(m0, m1, m2, m3, m4 and 1 more).")


def test_a_finished_run_with_no_step_logged_is_flagged_truncated():
    from pathlib import Path

    from apps.data.listing import RunInfo
    from apps.data.loading import RunEntry

    entry = RunEntry(Path("runs/a"), "a")
    assert RunInfo(entry, meta={"status": "finished"}, config={"steps": 40}).damage == "truncated: no step logged of 40"
    assert RunInfo(entry, meta={"status": "finished"}, config={"steps": 40}, last_step=40).damage is None
    assert RunInfo(entry, meta={"status": "finished"}, config={}).damage is None       # no steps said: nothing to check
