"""Lead-lag (paper Eq. 32, Fig. 6a): the gap between where the adversary's weights and the data sit.

mu_weight(t) = sum_b b w_hat_t(b) (normalised Prompt-GDRO weights), mu_data(t) = sum_b b q_t(b)
(empirical prompt share), gap(t) = mu_weight - mu_data. A positive gap means the weights lead
the data toward higher-index, more solvable bins (the "learnable frontier").
"""

from __future__ import annotations

import streamlit as st

from apps import charts, data, ui
from gdro_lab.runlog import RunData

TITLE = "Lead-lag"


def render(run: RunData, key: str) -> None:
    """Gap over steps, the two mean bin indices, and the gap at the start and the end."""
    del key
    frame = data.lead_lag_frame(run)
    if frame.empty:
        ui.missing("the per-bin `share` and `weight` (nor the `lead_lag_gap` scalar)")
        return
    gaps = frame["gap"].dropna()
    first, last = st.columns(2)
    first.metric("Δμ at the start", f"{gaps.iloc[0]:+.3f}" if len(gaps) else "n/a")
    change = f"{gaps.iloc[-1] - gaps.iloc[0]:+.3f} since the start" if len(gaps) else None
    last.metric("Δμ at the end", f"{gaps.iloc[-1]:+.3f}" if len(gaps) else "n/a", delta=change,
                delta_color="off", delta_arrow="off")
    gap_long = data.to_long(frame, {"gap": "Δμ = μ_weight − μ_data"})
    ui.chart(charts.lines(gap_long, "Lead-lag gap Δμ(t)", "Δμ (bins)", zero_rule=True))
    means = data.to_long(frame, {"mu_weight": "μ_weight (under weights)", "mu_data": "μ_data (under data)"})
    if means.empty:
        ui.missing("the mean bin indices `mu_weight` and `mu_data`")
        return
    ui.chart(charts.lines(means, "Mean bin index under weights and under data", "mean bin index"))


ui.views(render, TITLE, "Eq. 32: Δμ(t) = Σ_b b·ŵ_t(b) − Σ_b b·q_t(b). Positive early, decaying later, "
         "means the adversary leads the data toward more solvable bins.")
