"""Outcomes: mean and worst-group accuracy, pass@k, effective support and evaluation results.

Training-time success (``diagnostics.worst_group``), the effective support exp(entropy) of the
Prompt-GDRO weights and, with eval.jsonl, the evaluation metrics with their bands and the latest
table. Axes: docs/app-notes.md#apps-views-outcomes.
"""

from __future__ import annotations

import math

import streamlit as st

from apps.data import curriculum, results, scales
from apps.views import page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Outcomes"
SUCCESS_NAMES = {"mean_success": "mean over prompts", "worst_bin_success": "worst bin"}


def _evaluations(run: RunData) -> list[uicharts.Series]:
    """pass@k and accuracy metrics over steps, with their bands when logged."""
    evals = results.evals_frame(run)
    if evals.empty:
        st.info("No evaluation results in this run (eval.jsonl is absent or empty).", icon=":material/info:")
        return []
    pass_names, accuracy_names = results.pass_at_k_metrics(evals), results.accuracy_metrics(evals)
    if not pass_names:
        ui.missing("a pass@k evaluation metric")
    return [uicharts.Series(results.with_bounds(evals, names), title, y_title, smooth=False, bounds=(0.0, 1.0))
            for names, title, y_title in ((pass_names, "Evaluation pass@k", "pass@k"),
                                          (accuracy_names, "Evaluation accuracy", "accuracy")) if names]


def _more(run: RunData, key: str) -> None:
    """Any other evaluation metric on request (one chart each: their scales differ), the latest table."""
    evals = results.evals_frame(run)
    if evals.empty:
        return
    shown = set(results.pass_at_k_metrics(evals)) | set(results.accuracy_metrics(evals))
    others = [name for name in results.headline_metrics(evals["metric"]) if name not in shown]
    if others:
        chosen = st.multiselect("More evaluation metrics", others, default=[], key=f"{key}-eval-more",
                                bind="query-params")
        items = [uicharts.Series(results.with_bounds(evals, [name]), f"Evaluation: {name}", name, smooth=False,
                                 bounds=scales.natural_range(name, run.num_bins,
                                                             evals.loc[evals["metric"] == name, "value"]))
                 for name in chosen]
        uicharts.linked_series(items, key=f"{key}-eval-more-charts", export=f"outcomes-{key}-more", in_column=True)
    st.caption(f"Latest evaluation (step {int(evals['step'].max())}): value and its interval when logged")
    st.dataframe(results.latest_evals(evals), hide_index=True, width="stretch")


def render(run: RunData, key: str) -> uicharts.Parts:
    """Training success, effective support, evaluations."""
    frame = results.outcomes_frame(run)
    success = curriculum.to_long(frame, SUCCESS_NAMES)
    support = curriculum.to_long(frame, {"effective_support": "exp(entropy) of bin weights"})
    if success.empty:
        ui.missing_or_warmup(run, ("success",), "success rates (`mean_success`, `worst_bin_success` or per-bin "
                             "`success`)", "success rate")
    if support.empty:
        ui.missing("Prompt-GDRO weights (`weight` bins or the `effective_support` scalar)")
    support_bounds = scales.natural_range("effective_support", run.num_bins, support.get("value"))
    items = [uicharts.Series(success, "Training success: mean and worst group", "success rate", bounds=(0.0, 1.0)),
             uicharts.Series(support, f"Effective support (of {run.num_bins} bins)", "bins",
                             bounds=support_bounds if math.isfinite(support_bounds[1]) else (1.0, math.inf)),
             *_evaluations(run)]
    return uicharts.Parts(series=items, bottom=lambda: _more(run, key))


page_frame.views(render, TITLE, "Mean and worst-group success during training, the effective support of the "
         "adversary's weights, and evaluation results (pass@k, accuracy, with their intervals when logged).")
