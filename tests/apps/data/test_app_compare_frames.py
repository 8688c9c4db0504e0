"""apps.data.results at many runs: the frames Compare draws, built with numpy in one pass, equal the
frames of one pandas pivot or concat per run (the reference below) on runs with interval bounds,
gaps, repeated evaluation steps and runs that lack the metric."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pytest

from apps.data import curriculum, results
from gdro_lab.runformat.runlog import RunData


def reference_compare_frame(runs: Mapping[str, RunData], metric: str) -> pd.DataFrame:
    """One frame per run, concatenated (the definition)."""
    parts = []
    for label, run in runs.items():
        if metric == "lead_lag_gap":
            frame = curriculum.lead_lag_frame(run)[["step", "gap"]].rename(columns={"gap": "value"})
        elif curriculum.has_scalar(run, metric):
            frame = pd.DataFrame({"step": run.steps, "value": run.scalars[metric]})
            for bound in ("lo", "hi"):
                if curriculum.has_scalar(run, f"{metric}_{bound}"):
                    frame[bound] = run.scalars[f"{metric}_{bound}"]
        else:
            continue
        parts.append(frame.assign(run=label))
    combined = pd.concat(parts, ignore_index=True)
    combined = combined[["step", "run", "value", *[bound for bound in ("lo", "hi") if bound in combined]]]
    combined["value"] = pd.to_numeric(combined["value"], errors="coerce")
    return combined.dropna(subset=["value"]).reset_index(drop=True)


def reference_with_bounds(evals: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """A pivot of every metric per step (the last record of a step), then each name with its bounds."""
    table = evals.pivot_table(index="step", columns="metric", values="value", aggfunc="last")
    parts = []
    for name in names:
        if name not in table:
            continue
        nan = pd.Series(np.nan, index=table.index)
        parts.append(pd.DataFrame({"step": table.index.to_numpy(dtype=float), "series": name,
                                   "value": table[name].to_numpy(dtype=float),
                                   "lo": table.get(f"{name}_lo", nan).to_numpy(dtype=float),
                                   "hi": table.get(f"{name}_hi", nan).to_numpy(dtype=float)}).dropna(subset=["value"]))
    return pd.concat(parts, ignore_index=True)[["step", "series", "value", "lo", "hi"]]


def make_run(seed: int, steps: int = 40, bounds: bool = True, lead_lag: bool = True) -> RunData:
    """A run of ``steps`` logged steps: a score with gaps (NaN), its bounds when asked, the share and
    weight bins of the lead-lag gap when asked, and evaluations with a repeated step."""
    generator = np.random.default_rng(seed)
    score = generator.random(steps)
    score[generator.random(steps) < 0.2] = np.nan
    scalars = {"score": score, "other": generator.random(steps)}
    if bounds:
        scalars["score_lo"], scalars["score_hi"] = score - 0.1, score + 0.1
    bins = {}
    if lead_lag:
        bins["share"] = generator.random((steps, 4))
        bins["weight"] = generator.random((steps, 4))
        bins["share"][:3] = 0.0  # no prompt assigned yet: no gap at those steps
    evals = [{"step": step, "metrics": {"accuracy": float(generator.random()), "accuracy_lo": 0.1,
                                        **({"accuracy_hi": 0.9} if step != 20 else {}), "pass@8": 0.5}}
             for step in (0, 10, 20, 20, 30)]
    evals.append({"step": 35, "metrics": {"pass@8": 0.7}})
    return RunData(path=Path(f"run{seed}"), meta={"num_bins": 4}, config={}, steps=np.arange(steps) * 5,
                   scalars=scalars, bins=bins, evals=evals)


@pytest.fixture(scope="module")
def runs() -> dict[str, RunData]:
    return {"a": make_run(0), "b": make_run(1, bounds=False), "c": make_run(2, steps=25, lead_lag=False),
            "d": make_run(3)}


@pytest.mark.parametrize("metric", ["score", "other", "lead_lag_gap"])
def test_compare_frame_equals_one_frame_per_run(runs: dict[str, RunData], metric: str) -> None:
    frame = results.compare_frame(runs, metric)
    pd.testing.assert_frame_equal(frame, reference_compare_frame(runs, metric))
    if metric == "score":  # the bounds where logged, NaN for the run that logs none
        assert frame.loc[frame["run"] == "b", "lo"].isna().all()
        assert frame.loc[frame["run"] == "a", "lo"].notna().all()


def test_compare_table_reads_the_same_values(runs: dict[str, RunData]) -> None:
    table = results.compare_table(runs, ["score", "lead_lag_gap", "missing"])
    for label, row in table.set_index("run").iterrows():
        values = reference_compare_frame({label: runs[label]}, "score")["value"].to_numpy()
        assert row["score (final)"] == values[-1]
        assert row["score (tail)"] == pytest.approx(values[int(0.6 * values.size):].mean())
        assert np.isnan(row["missing (final)"])
    assert np.isnan(table.set_index("run").loc["c", "lead_lag_gap (final)"])


def test_with_bounds_equals_the_pivot(runs: dict[str, RunData]) -> None:
    for run in runs.values():
        evals = results.evals_frame(run)
        for names in (["accuracy"], ["pass@8"], ["accuracy", "pass@8", "missing"]):
            pd.testing.assert_frame_equal(results.with_bounds(evals, names), reference_with_bounds(evals, names))
        frame = results.with_bounds(evals, ["accuracy"])
        assert list(frame["step"]) == [0, 10, 20, 30]
        assert np.isnan(frame.loc[frame["step"] == 20, "hi"]).all()  # the last record of step 20 has no hi
