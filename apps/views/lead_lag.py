"""Lead-lag (paper Eq. 32, Fig. 6a): the gap between where the adversary's weights and the data sit.

mu_weight(t) = sum_b b w_hat_t(b) (normalised Prompt-GDRO weights), mu_data(t) = sum_b b q_t(b)
(empirical prompt share), gap(t) = mu_weight - mu_data. Run and baseline are one linked view. How to
read it (and GRPO's constant mu_weight): docs/app-notes.md#apps-views-lead_lag. Groups of seeds
(:mod:`apps.views.group_pages`): Δμ of the group's mean shares and weights, which is the mean of its
seeds' Δμ (linear in shares and weights that each sum to 1).
"""

from __future__ import annotations

import streamlit as st

from apps.data import curriculum, results
from apps.views import group_pages, page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Lead-lag"
GAP_NAMES = {"gap": "Δμ = μ_weight − μ_data"}
MEAN_NAMES = {"mu_weight": "μ_weight (under weights)", "mu_data": "μ_data (under data)"}


def render(run: RunData, key: str) -> uicharts.Parts | None:
    """Gap at the start and the end (in the column); the gap and the two mean bin indices over steps."""
    del key
    frame = curriculum.lead_lag_frame(run)
    if frame.empty:
        ui.missing_or_warmup(run, ("share", "weight"), "the per-bin `share` and `weight` (nor the `lead_lag_gap` "
                             "scalar)", "lead-lag gap")
        return None
    gaps = frame["gap"].dropna()
    first, last = st.columns(2)
    first.metric("Δμ at the start", f"{gaps.iloc[0]:+.3f}" if len(gaps) else "n/a")
    change = f"{gaps.iloc[-1] - gaps.iloc[0]:+.3f} since the start" if len(gaps) else None
    last.metric("Δμ at the end", f"{gaps.iloc[-1]:+.3f}" if len(gaps) else "n/a", delta=change,
                delta_color="off", delta_arrow="off")
    if results.uniform_weights(run):
        centre = (run.num_bins - 1) / 2
        st.info(f"This run's bin weights are uniform (GRPO, no adversary): μ_weight = (B−1)/2 = {centre:g} "
                f"for B = {run.num_bins} bins, so Δμ = {centre:g} − μ_data only tracks where the data sits, "
                "not a lead of the weights.", icon=":material/info:")
    index_range = (0.0, float(run.num_bins - 1))
    return uicharts.Parts(series=[
        uicharts.Series(curriculum.to_long(frame, GAP_NAMES), "Lead-lag gap Δμ(t)", "Δμ (bins)", zero_rule=True,
                        bounds=(-index_range[1], index_range[1])),
        uicharts.Series(curriculum.to_long(frame, MEAN_NAMES), "Mean bin index under weights and under data",
                        "mean bin index", bounds=index_range)])


page_frame.views(render, TITLE, "Eq. 32: Δμ(t) = Σ_b b·ŵ_t(b) − Σ_b b·q_t(b). Positive early, decaying later, "
         "means the adversary leads the data toward more solvable bins. Drag or scroll a chart to zoom "
         "both columns; hover for every series' value. Run and baseline share each chart's y-range.",
         groups=lambda: group_pages.page("lead-lag", lambda run, key, _: render(run, key)))
