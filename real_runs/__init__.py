"""Real training and evaluation runs: data, rewards, rollout engines, evaluation, the trainer.

Depends on ``gdro_lab`` (the controllers and the math) plus torch and transformers; vLLM and
verl are optional extras with their own environments. The contracts every part shares are in
:mod:`real_runs.types`.
"""
