"""Names of the CPU learning study's runs as the report prints them."""

from __future__ import annotations

METHOD_LABELS = {
    "grpo": "GRPO",
    "grpo_matched_first": "GRPO, step-matched E[m]",
    "grpo_matched_second": "GRPO, step-matched √E[m²]",
    "tuned": "tuned GRPO",
    "prompt_gdro": "Prompt-GDRO",
    "rollout_gdro": "Rollout-GDRO",
    "joint": "joint (Prompt+Rollout)",
}
