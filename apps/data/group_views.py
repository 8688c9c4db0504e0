"""A group of seeds as one run: the mean (or median) over its seeds of every per-step, per-bin logged
value, for the traveling-wave, lead-lag and SE-proxy views over groups.

A group is one of :mod:`apps.data.identity`'s (the same config but the seed). Its seeds' values are
aligned on the step (and the bin): at each step the statistic is taken over the seeds that log that
step, missing values (NaN) skipped, and ``n`` counts those seeds. Runs of different lengths are not
cut to the shortest: past a seed's last step the group's values are those of the seeds still going,
with a smaller ``n`` (the view says where). The aggregate is returned as a :class:`RunData`, so the
views derive their charts from it as from one run (Eq. 32's Δμ is linear in the shares and the
normalised weights, so the Δμ of the group mean is the mean of the seeds' Δμ). No Streamlit here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from gdro_lab.runformat.runlog import RunData

#: How a group's seeds are summarised at each step (and bin).
STATISTICS = ("mean", "median")
#: The scalar of a group run holding ``n``, the seeds that log each step.
SEEDS_SCALAR = "group/seeds"


def across_seeds(frames: Mapping[str, pd.DataFrame], keys: Sequence[str], statistic: str = "mean") -> pd.DataFrame:
    """One frame for a group's seeds (run label -> frame of ``keys`` and value columns): per key (a
    step, or a step and a bin), the ``statistic`` (``mean`` or ``median``) of each value column over
    the seeds that have a row there (NaN values skipped), and ``n``, the number of those seeds.
    Sorted by ``keys``; a key no seed has a finite value for keeps NaN."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic {statistic!r}: choose one of {STATISTICS}")
    parts = [frame.assign(_seed=label) for label, frame in frames.items() if not frame.empty]
    if not parts:
        columns = list(dict.fromkeys(column for frame in frames.values() for column in frame.columns))
        return pd.DataFrame(columns=[*columns, "n"] if columns else [*keys, "n"])
    table = pd.concat(parts, ignore_index=True)
    values = [column for column in table.columns if column not in (*keys, "_seed")]
    grouped = table.groupby(list(keys), sort=True)
    out = grouped[values].agg(statistic) if values else grouped.size().to_frame("_size")[[]]
    out["n"] = grouped["_seed"].nunique()
    return out.reset_index()


def bins_frame(run: RunData, field: str) -> pd.DataFrame:
    """A run's logged per-bin ``field`` as a long frame: columns step, bin, value (NaN kept)."""
    if field not in run.bins or run.steps.size == 0:
        return pd.DataFrame(columns=["step", "bin", "value"])
    values_TG = run.bins[field]
    num_steps, num_bins = values_TG.shape
    return pd.DataFrame({"step": np.repeat(run.steps, num_bins), "bin": np.tile(np.arange(num_bins), num_steps),
                         "value": values_TG.reshape(-1)})


def group_bins(runs: Mapping[str, RunData], field: str, statistic: str = "mean") -> pd.DataFrame:
    """The group's per-bin ``field`` over steps: columns step, bin, value, n (seeds logging the step)."""
    return across_seeds({label: bins_frame(run, field) for label, run in runs.items()}, ("step", "bin"), statistic)


def scalars_frame(run: RunData) -> pd.DataFrame:
    """A run's logged scalars as a wide frame: step, then one column per scalar."""
    return pd.DataFrame({"step": run.steps, **run.scalars})


def seeds_per_step(runs: Mapping[str, RunData]) -> pd.DataFrame:
    """Columns step, n: how many of the group's seeds log each step (every step any seed logs)."""
    frames = {label: pd.DataFrame({"step": run.steps}) for label, run in runs.items()}
    return across_seeds(frames, ("step",))


def group_run(runs: Mapping[str, RunData], statistic: str = "mean", name: str = "group") -> RunData:
    """The group as one run: steps every seed logs any of, each per-bin field and scalar the
    ``statistic`` over the seeds logging the step (:func:`across_seeds`), ``n`` as the scalar
    :data:`SEEDS_SCALAR`. Meta and config are the first seed's (the seeds share the config but the
    seed), with ``num_bins`` the most bins a seed has."""
    if not runs:
        raise ValueError("a group needs at least one run")
    first = next(iter(runs.values()))
    counts = seeds_per_step(runs)
    steps_T = counts["step"].to_numpy()
    num_bins = max(run.num_bins for run in runs.values())
    fields = list(dict.fromkeys(field for run in runs.values() for field in run.bins))
    bins = {field: _to_grid(group_bins(runs, field, statistic), steps_T, num_bins) for field in fields}
    scalars_wide = across_seeds({label: scalars_frame(run) for label, run in runs.items()}, ("step",), statistic)
    scalars_wide = scalars_wide.set_index("step").reindex(steps_T)
    scalars = {str(column): scalars_wide[column].to_numpy(dtype=float) for column in scalars_wide.columns
               if column != "n"}
    scalars[SEEDS_SCALAR] = counts["n"].to_numpy(dtype=float)
    meta = dict(first.meta, num_bins=num_bins, status="group", group_seeds=len(runs))
    return RunData(path=Path(name), meta=meta, config=first.config, steps=steps_T, scalars=scalars, bins=bins)


def _to_grid(frame: pd.DataFrame, steps_T: np.ndarray, num_bins: int) -> np.ndarray:
    """A long (step, bin, value) frame as a (T, G) array on ``steps_T`` (NaN where absent)."""
    grid_TG = np.full((steps_T.size, num_bins), np.nan)
    if frame.empty:
        return grid_TG
    rows = np.searchsorted(steps_T, frame["step"].to_numpy())
    grid_TG[rows, frame["bin"].to_numpy(dtype=int)] = frame["value"].to_numpy(dtype=float)
    return grid_TG


def coverage_note(runs: Mapping[str, RunData]) -> str:
    """Which steps how many seeds log: ``3 seeds at steps 0–29`` (plus ``2 at steps 30–39``...)."""
    counts = seeds_per_step(runs)
    if counts.empty:
        return "no step logged yet"
    spans = []
    change = np.flatnonzero(np.diff(counts["n"].to_numpy())) + 1
    for block in np.split(np.arange(len(counts)), change):
        first, last = int(counts["step"].iloc[block[0]]), int(counts["step"].iloc[block[-1]])
        seeds = int(counts["n"].iloc[block[0]])
        where = f"step {first}" if first == last else f"steps {first}–{last}"
        spans.append(f"{seeds} seed{'s' * (seeds != 1)} at {where}")
    return "; ".join(spans)
