"""A learning study on CPU: a small Qwen3 trained from scratch on a synthetic, heavy-tailed
arithmetic suite, then GRPO vs Prompt-GDRO / Rollout-GDRO / joint through the real trainer.

Modules: :mod:`.tasks` (the suite), :mod:`.tokenizer` (char-level tokenizer), :mod:`.warmstart`
(cached supervised warm start), :mod:`.study` (the study driver), :mod:`.cli` (``gdro study lm``).
"""
