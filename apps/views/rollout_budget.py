"""Rollout budget (paper Fig. 7-9): the staircase, the shadow price mu and the budget frontier.

The rollout-count heatmap (mean rollouts per prompt, steps x bins), the shadow price mu of the
budget constraint (Eq. 21), the budget frontier at a chosen step (share of rollouts vs share of
prompts per bin, Fig. 9) and the check that the mean budget n_bar held every step.
"""

from __future__ import annotations

import streamlit as st

from apps.data import budget, curriculum, results
from apps.views import charts, page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Rollout budget"


def _budget(run: RunData) -> uicharts.Series | None:
    """The pass/fail line of the mean budget; returns the chart of mean rollouts per prompt against n_bar."""
    check = budget.budget_check(run)
    if check is None:
        ui.missing("rollouts per bin (nor the `mean_rollouts` scalar)")
        return None
    settings = budget.rollout_settings(run)
    if check.held:
        st.success(f"Mean budget held: every step spent n̄ = {check.target:g} rollouts per prompt "
                   f"(max deviation {check.max_deviation:.2g}; n̄ from {settings.source}).",
                   icon=":material/check_circle:")
    else:
        st.warning(f"Mean budget missed: step {check.worst_step} is {check.max_deviation:.3g} rollouts per prompt "
                   f"away from n̄ = {check.target:g} (n̄ from {settings.source}).", icon=":material/warning:")
    long = curriculum.to_long(check.frame, {"realized": "realized mean", "target": "budget n̄"})
    return uicharts.Series(long, "Mean rollouts per prompt", "rollouts per prompt", dashed=("budget n̄",), smooth=False,
                           bounds=(min(settings.n_min, check.target), max(settings.n_max, check.target)))


def _frontier(run: RunData, key: str, index: int) -> None:
    """Share of prompts vs share of rollouts per bin at the chosen step."""
    frontier = budget.frontier_frame(run, index)
    if frontier.empty:
        ui.missing_or_warmup(run, ("rollouts",), "per-bin `rollouts` with `count` or `share`",
                             "rollouts per bin")
        return
    first_bin = st.slider("Frontier: bins from", 0, run.num_bins - 1, value=run.num_bins // 2,
                          key=f"{key}-frontier", bind="query-params") if run.num_bins > 1 else 0
    prompts, rollouts = budget.frontier_split(frontier, first_bin)
    left, right = st.columns(2)
    left.metric(f"Prompts in bins ≥ {first_bin}", f"{100 * prompts:.1f}%")
    multiple = f"{rollouts / prompts:.2f}× uniform" if prompts > 0 else None
    right.metric(f"Rollouts spent on bins ≥ {first_bin}", f"{100 * rollouts:.1f}%", delta=multiple,
                 delta_color="off", delta_arrow="off")
    bars = frontier.melt(id_vars=["bin", "label"], value_vars=["prompt_share", "rollout_share"],
                         var_name="series", value_name="value")
    bars["series"] = bars["series"].map({"prompt_share": "share of prompts", "rollout_share": "share of rollouts"})
    name = f"Budget frontier at step {int(run.steps[index])}"
    uicharts.chart(charts.grouped_bars(bars, "series", name, "share", y_domain=(0.0, 1.0),
                                       group_order=["share of prompts", "share of rollouts"]),
                   csv={name: frontier}, key=f"{key}-frontier-csv")


def render(run: RunData, key: str) -> uicharts.Parts:
    """Step slider; staircase heatmap; frontier at the chosen step; shadow price and budget check."""
    index = ui.step_slider(run, key=f"{key}-step")
    heatmaps = []
    if curriculum.has_bins(run, "rollouts"):
        heatmaps.append(("rollouts", "Rollouts per prompt [rollouts] (the staircase)"))
    else:
        allocator = results.allocator_of(run.config)
        told = f" (its config names the allocator `{allocator}`)" if allocator else ""
        ui.missing_or_warmup(run, ("rollouts",), f"the per-bin field `rollouts`{told}", "rollouts per bin")
    items = [uicharts.Series(curriculum.scalars_long(run, {"mu": "μ"}), "Shadow price μ (Eq. 21)", "μ")]
    if not curriculum.has_scalar(run, "mu"):
        ui.missing("the shadow price `mu`")
    budget_chart = _budget(run)
    return uicharts.Parts(heatmaps=heatmaps, selected_step=float(run.steps[index]),
                          middle=lambda: _frontier(run, key, index),
                          series=items + ([budget_chart] if budget_chart is not None else []))


page_frame.views(render, TITLE, "Fig. 7-9: how Rollout-GDRO spends a fixed mean budget n̄ across bins. "
         "Rollouts per prompt form a staircase; the frontier shows rollout share against prompt share.")
