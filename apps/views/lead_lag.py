"""Lead-lag (paper Eq. 32, Fig. 6a): the gap between where the adversary's weights and the data sit.

mu_weight(t) = sum_b b w_hat_t(b) (normalised Prompt-GDRO weights), mu_data(t) = sum_b b q_t(b)
(empirical prompt share), gap(t) = mu_weight - mu_data. A positive gap means the weights lead
the data toward higher-index, more solvable bins (the "learnable frontier"). Run and baseline
columns share one y-range per chart, so a 2x difference in the gap looks like one. Under
uniform weights (GRPO) mu_weight = (B-1)/2 and the gap only says where the data sits; the page
says so.
"""

from __future__ import annotations

import streamlit as st

from apps import data, ui, uicharts
from gdro_lab.runlog import RunData

TITLE = "Lead-lag"
GAP_NAMES = {"gap": "Δμ = μ_weight − μ_data"}
MEAN_NAMES = {"mu_weight": "μ_weight (under weights)", "mu_data": "μ_data (under data)"}


def _domains() -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """Shared y-ranges of the gap and the mean-index charts over the run and its baseline."""
    frames = [data.lead_lag_frame(run) for run in ui.shown_runs()]
    if len(frames) < 2:
        return None, None
    gap = uicharts.common_domain([frame.assign(zero=0.0) for frame in frames], ("gap", "zero"))
    means = uicharts.common_domain(frames, ("mu_weight", "mu_data"))
    return gap, means


def render(run: RunData, key: str) -> None:
    """Gap over steps, the two mean bin indices, and the gap at the start and the end."""
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
    if data.uniform_weights(run):
        centre = (run.num_bins - 1) / 2
        st.info(f"This run's bin weights are uniform (GRPO, no adversary): μ_weight = (B−1)/2 = {centre:g} "
                f"for B = {run.num_bins} bins, so Δμ = {centre:g} − μ_data only tracks where the data sits, "
                "not a lead of the weights.", icon=":material/info:")
    gap_domain, mean_domain = _domains()
    if gap_domain is not None:
        st.caption("Run and baseline share the y-range of each chart.")
    uicharts.linked_series([
        uicharts.Series(data.to_long(frame, GAP_NAMES), "Lead-lag gap Δμ(t)", "Δμ (bins)", zero_rule=True,
                  y_domain=gap_domain),
        uicharts.Series(data.to_long(frame, MEAN_NAMES), "Mean bin index under weights and under data", "mean bin index",
                  y_domain=mean_domain)], key=f"{key}-charts")


ui.views(render, TITLE, "Eq. 32: Δμ(t) = Σ_b b·ŵ_t(b) − Σ_b b·q_t(b). Positive early, decaying later, "
         "means the adversary leads the data toward more solvable bins. Drag or scroll a chart to zoom "
         "both; hover for every series' value.")
