"""Rollout allocation math, as pure functions: who gets how many rollouts under an exact budget.

The square-root (Neyman) law (:mod:`~gdro_lab.allocation.sqrt_law`), integer plans over per-bin arm
distributions (:mod:`~gdro_lab.allocation.bin_plans`) and the exact per-prompt planner
(:mod:`gdro_lab.allocation.planner`), separable concave plans, beta-binomial shrinkage, the per-prompt
optimum of the variance proxy, and the peers' allocations (Knapsack-RL, VIP). The controllers in
:mod:`gdro_lab.controllers` call these; nothing here keeps state.
"""
