"""Rewards, one module each: :mod:`real_runs.rewards.math` (math-verify on ``\\boxed{}``),
:mod:`real_runs.rewards.choice` (multiple choice) and :mod:`real_runs.rewards.toy` (known odds, not a
task); the math reward's internals: the timed worker pool (:mod:`real_runs.rewards.pool`), the
math-verify task run inside it (:mod:`real_runs.rewards.math_task`) and the cheap verdicts
(:mod:`real_runs.rewards.verdicts`); :mod:`real_runs.rewards.realistic` builds a realistic batch
for the benchmarks and tests."""
