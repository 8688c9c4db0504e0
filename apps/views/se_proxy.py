"""SE proxy (paper Eq. 33): the weighted standard-error proxy of the allocation actually used.

WSE(t) = sum_b q_t(b) sigma_b / sqrt(n_b(t)) for the rollouts used, for the uniform budget
n_b = n_bar and for the square-root optimum (Thm 4.2), and the reduction
100 (1 - WSE_actual / WSE_uniform). Detail: docs/app-notes.md#apps-views-se_proxy.
Groups of seeds (:mod:`apps.views.group_pages`): the mean or median of the seeds' logged ``se_*``
scalars at each step (recomputed from the group's per-bin values for runs that log none).
"""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from apps.data import budget, curriculum, results
from apps.views import group_pages, page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "SE proxy"
UNIFORM = "uniform n̄ (dashed, on top)"
SE_NAMES = {"se_actual": "actual", "se_sqrt": "square-root optimum", "se_uniform": UNIFORM}
REDUCTION_NAMES = {"se_reduction_pct": "actual vs uniform", "se_sqrt_reduction_pct": "optimum vs uniform"}


def _percent(value: float) -> str:
    return f"{value:.1f}%" if math.isfinite(value) else "n/a"


def render(run: RunData, key: str) -> uicharts.Parts | None:
    """Reduction metrics (in the column), the three WSE curves and the reduction over steps."""
    del key
    frame = budget.se_frame(run)
    if frame.empty:
        ui.missing_or_warmup(run, ("share", "sigma", "rollouts"), "the SE scalars `se_*` (nor per-bin `share`, "
                             "`sigma` and `rollouts` to compute them)", "SE proxy")
        return None
    actual, optimum = st.columns(2)
    actual.metric("Mean reduction, actual", _percent(budget.mean_reduction(frame, "se_reduction_pct")))
    optimum.metric("Mean reduction, √ optimum", _percent(budget.mean_reduction(frame, "se_sqrt_reduction_pct")))
    same = frame[["se_actual", "se_uniform"]].dropna()
    if len(same) and np.allclose(same["se_actual"], same["se_uniform"], rtol=1e-9):
        allocator = results.allocator_of(run.config)
        why = f" (its config names the allocator `{allocator}`)" if allocator else ""
        st.caption(f"The actual allocation equals the uniform budget at every step{why}: "
                   "the solid 'actual' line lies under the dashed uniform line.")
    return uicharts.Parts(series=[
        uicharts.Series(curriculum.to_long(frame, SE_NAMES), "Weighted SE proxy WSE(t)", "WSE", dashed=(UNIFORM,),
                        bounds=(0.0, math.inf)),
        uicharts.Series(curriculum.to_long(frame, REDUCTION_NAMES), "Reduction against uniform n̄", "reduction (%)",
                        zero_rule=True, bounds=(-math.inf, 100.0))])


page_frame.views(render, TITLE, "Eq. 33: WSE(t) = Σ_b q_t(b) σ̂_b / √n_b(t). Compared with the uniform budget of "
         "the same compute and with the square-root (Neyman) optimum of Thm 4.2.",
         groups=lambda: group_pages.page("se-proxy", lambda run, key, _: render(run, key)))
