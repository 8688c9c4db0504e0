"""A study's final value of an eval metric by value: the last evaluation that logged a number for it; an
evaluation that logged the metric as null or as text is passed over, not read (a sampled mutant that read
such a value survived the app's tests)."""

from __future__ import annotations

import math
from pathlib import Path

from apps.data.study import final_value
from gdro_lab import RunWriter
from gdro_lab.runformat.runlog import read_run


def test_the_final_value_is_the_last_evaluation_that_logged_a_number(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run", {"method": "grpo"}, 2, "test")
    writer.log_step(1, {"mean_success": 0.5}, {})
    writer.log_eval(1, {"accuracy": 0.25, "label": 0.5})
    writer.log_eval(2, {"accuracy": 0.4, "label": "n/a"})
    writer.log_eval(3, {"accuracy": None, "label": "n/a"})
    writer.close()
    run = read_run(tmp_path / "run")
    assert final_value(run, "accuracy") == 0.4          # step 3 logged no number: step 2's
    assert final_value(run, "label") == 0.5             # text at steps 2 and 3: step 1's
    assert math.isnan(final_value(run, "missing"))
