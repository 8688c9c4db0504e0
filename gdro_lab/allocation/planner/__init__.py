"""The exact per-prompt rollout planner (§3.3, "joint probability"), in three steps.

:mod:`~gdro_lab.allocation.planner.exact` is the entry point (:func:`exact_plan`, the envelope and the
Lagrangian's reduced costs), :mod:`~gdro_lab.allocation.planner.relax` the relaxation over shifts and a
feasible plan (step 2), :mod:`~gdro_lab.allocation.planner.dp` the bounded-deviation DP, its exact
fallback (step 3).
"""
