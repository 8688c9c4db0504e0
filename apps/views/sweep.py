"""Sweep: the parallel coordinates of the sweep, brushable (a brush over the axes keeps the runs it
crosses: the run table and the charts below follow), then the final (or tail-mean) metric against
each swept config key, one line per method (a step-matched baseline its own line) with 95% intervals
over the runs that share a setting (a learning-rate scale first, on a log axis).

The runs are those picked on the Runs page, else the study of the first listed run
(:func:`apps.data.sweep.sweep_keys` finds the keys that differ between them).
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping

import pandas as pd
import streamlit as st

from apps.data import study, sweep
from apps.data.colours import method_hues
from apps.views import charts, interactive, ui, uicharts

TITLE = "Sweep"


def page() -> None:
    """Metric, final value and keys; a chart per swept key; parallel coordinates."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("A sweep's final metric against each swept key: one line per method, 95% interval over the runs "
               "that share a setting (3 runs or more). The runs picked on the Runs page, else the first study.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    labels = [label for label in chosen.picked_or_first_study() if label in by_label]

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if len(runs) < 2:
            st.info("Pick at least two runs of a sweep on the Runs page.", icon=":material/info:")
            return
        keys = sweep.sweep_keys({label: run.config for label, run in runs.items()})
        if not keys:
            st.info("These runs differ only in their method and seed: nothing is swept.", icon=":material/info:")
            return
        methods = [study.Method(label, label, ((label, run),)) for label, run in runs.items()]
        metrics = study.final_metrics(methods)
        metric_box, final_box = st.columns([3, 1])
        metric = str(metric_box.selectbox("Metric", metrics, key="sweep-metric", bind="query-params"))
        final = str(final_box.selectbox("Final value", sweep.FINALS, key="sweep-final", bind="query-params",
                                        help="Tail mean: steps at or after the 60th percentile; or the last value."))
        st.caption(f"{len(runs)} runs; swept: {', '.join(keys)}")
        colours = method_hues(sweep.line_of(run.config, run.path.name) for run in runs.values())
        axes = [*keys, metric]
        names = {label: chosen.name(label) for label in runs}
        parallel = sweep.parallel_frame(runs, keys, metric, final, names)
        kept = _brushed(parallel, axes, (tuple(runs), metric, final),
                        lambda frame, held: charts.parallel_coordinates(
                            frame, axes, colours, sweep.parallel_ticks(runs, keys, metric, final), held))
        table = sweep.run_table(parallel[parallel["label"].isin(kept)])
        st.dataframe(table, hide_index=True, width="stretch", key="sweep-table",
                     column_config={"run": st.column_config.TextColumn("run", width="large")})
        uicharts.export_button({"parallel coordinates": parallel}, "sweep-parallel", "sweep-parallel")
        brushed = {label: runs[label] for label in kept}
        for key in keys:
            frame = sweep.sweep_frame(brushed, key, metric, final)
            name = f"{metric} ({final}) against {key}"
            uicharts.chart(charts.sweep_lines(frame, key, metric, colours, log_x=key in sweep.LR_KEYS, final=final),
                           csv={name: frame}, key=f"sweep-{key}")

    ui.live_fragment(body, chosen)()


def _brushed(parallel: pd.DataFrame, axes: list[str], signature: Hashable,
             draw: Callable[[pd.DataFrame, Mapping[str, tuple[float, float]]], charts.AnyChart]) -> list[str]:
    """Draw the parallel coordinates with their brushes, and say which runs they keep (every run
    without a brush). The live rectangle's range on each axis comes back from the browser as the
    chart's selection (:func:`apps.data.sweep.brush_ranges`); the rectangles drawn before it are held
    in the session (:class:`apps.data.sweep.Brushes`, one per run set, metric and final value) and drawn
    as grey bands, so that two axes can be brushed with different ranges."""
    state = st.session_state.setdefault("sweep-brushes", {})
    if state.get("signature") != signature:  # other runs or another metric: the positions mean other values
        state.update(signature=signature, brushes=sweep.Brushes.empty(), generation=0)
    brushes: sweep.Brushes = state["brushes"]
    key = f"sweep-brush-{state['generation']}"  # a new key after "Clear brushes" drops the live rectangle
    event = st.session_state.get(key)
    live = sweep.brush_ranges(_selection(event).get(charts.BRUSH) or {}, axes)
    ranges = brushes.step(live)
    held = brushes.shown_held()
    frame = parallel.assign(held_out=(~parallel["label"].isin(sweep.runs_in_brush(parallel, held))).astype(int))
    st.vega_lite_chart(interactive.to_spec(draw(frame, held)), on_select="rerun", selection_mode=[charts.BRUSH],
                       key=key, width="stretch")  # its selection is read from the session above, before drawing
    kept = sweep.runs_in_brush(parallel, ranges)
    total = parallel["label"].nunique()
    if ranges:
        described = "; ".join(f"{axis} {_range_text(parallel, axis, low, high)}" for axis, (low, high) in ranges.items())
        st.caption(f"**Brushed: {len(kept)} of {total} runs** ({described}). The table and the charts below show "
                   "these runs. Drag on another axis to add a brush (earlier ones stay, in grey); click the chart "
                   "outside the current brush to drop it.")
        if st.button("Clear brushes", key="sweep-clear-brushes", icon=":material/ink_eraser:"):
            brushes.clear()
            state["generation"] += 1
            st.rerun()
    else:
        st.caption(f"All {total} runs. Drag a rectangle over an axis (or several) to keep the runs it crosses, "
                   "then over another axis to narrow them further: the table and the charts below follow.")
    return kept


def _selection(event: object) -> Mapping[str, Any]:
    """The selection of a chart event (``{}`` before the first)."""
    selection = event.get("selection") if isinstance(event, Mapping) else None
    return selection if isinstance(selection, Mapping) else {}


def _range_text(parallel: pd.DataFrame, axis: str, low: float, high: float) -> str:
    """The values of ``axis`` inside a brushed range of positions, lowest and highest (or none)."""
    part = parallel[(parallel["axis"] == axis) & (parallel["position"] >= low) & (parallel["position"] <= high)]
    if part.empty:
        return "(no value)"
    ordered = part.sort_values("position")["raw"]
    first, last = ordered.iloc[0], ordered.iloc[-1]
    return f"= {_short(first)}" if first == last else f"{_short(first)} to {_short(last)}"


def _short(text: str) -> str:
    try:
        return f"{float(text):.4g}"
    except ValueError:
        return text


page()
