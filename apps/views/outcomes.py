"""Outcomes: mean and worst-group accuracy, pass@k, effective support and evaluation results.

Training-time success (mean over prompts and worst bin, ``diagnostics.worst_group``), the
effective support exp(entropy) of the Prompt-GDRO weights (``diagnostics.effective_support``)
and, when the run has evaluations (eval.jsonl), their metrics over steps and the latest table.
"""

from __future__ import annotations

import streamlit as st

from apps import charts, data, ui, uicharts
from gdro_lab.runlog import RunData

TITLE = "Outcomes"
SUCCESS_NAMES = {"mean_success": "mean over prompts", "worst_bin_success": "worst bin"}


def _evaluations(run: RunData, key: str) -> None:
    """pass@k and accuracy metrics over steps, any other metric on request, and the latest table."""
    evals = data.evals_frame(run)
    if evals.empty:
        st.info("No evaluation results in this run (eval.jsonl is absent or empty).", icon=":material/info:")
        return
    pass_names, accuracy_names = data.pass_at_k_metrics(evals), data.accuracy_metrics(evals)
    figures = []
    if pass_names:
        figures.append(charts.points(evals[evals["metric"].isin(pass_names)], "Evaluation pass@k", "pass@k"))
    else:
        ui.missing("a pass@k evaluation metric")
    if accuracy_names:
        figures.append(charts.points(evals[evals["metric"].isin(accuracy_names)], "Evaluation accuracy", "accuracy"))
    if figures:
        uicharts.stacked_charts(figures)
    others = sorted(set(evals["metric"]) - set(pass_names) - set(accuracy_names))
    if others:
        chosen = st.multiselect("More evaluation metrics", others, default=[], key=f"{key}-eval-more")
        if chosen:
            uicharts.chart(charts.points(evals[evals["metric"].isin(chosen)], "Evaluation: other metrics", "value"))
    st.caption(f"Latest evaluation (step {int(evals['step'].max())})")
    st.dataframe(data.latest_evals(evals), hide_index=True, width="stretch")


def render(run: RunData, key: str) -> None:
    """Training success, effective support, evaluations."""
    frame = data.outcomes_frame(run)
    success = data.to_long(frame, SUCCESS_NAMES)
    support = data.to_long(frame, {"effective_support": "exp(entropy) of bin weights"})
    if success.empty:
        ui.missing("success rates (`mean_success`, `worst_bin_success` or per-bin `success`)")
    if support.empty:
        ui.missing("Prompt-GDRO weights (`weight` bins or the `effective_support` scalar)")
    uicharts.linked_series([uicharts.Series(success, "Training success: mean and worst group", "success rate"),
                      uicharts.Series(support, f"Effective support (of {run.num_bins} bins)", "bins")],
                     key=f"{key}-charts")
    _evaluations(run, key)


ui.views(render, TITLE, "Mean and worst-group success during training, the effective support of the "
         "adversary's weights, and evaluation results (pass@k, accuracy) when the run has them.")
