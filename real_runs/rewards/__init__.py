"""Reward internals: the timed worker pool (:mod:`real_runs.rewards.pool`) and the math-verify
task run inside it (:mod:`real_runs.rewards.math_task`). The public rewards live in
:mod:`real_runs.reward`."""
