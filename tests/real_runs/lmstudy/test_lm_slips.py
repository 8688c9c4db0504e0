"""Slip diagnostic: shares counted by hand, batched greedy decoding equal to one-at-a-time decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from real_runs.lmstudy import slips, tasks
from real_runs.lmstudy.tokenizer import build_tokenizer


def _problem(group, level, ops):
    return tasks.make_problem(group, level, ops, "test")


def test_shares_by_hand():
    add_carry = _problem("add", 0, (58, 67))  # right 125, slip 15
    add_plain = _problem("add", 0, (12, 34))  # right 46 = slip: counts for "right" only
    mod = _problem("mod", 0, (47, 5))  # right 2, slip 9
    problems = [add_carry, add_plain, mod, mod]
    responses = ["\\boxed{15}", "\\boxed{46}", "\\boxed{2}", "\\boxed{7}"]
    out = slips.shares(problems, responses)
    assert out["add"] == {"right": 0.5, "slip": 1.0}  # 1 of 2 right; the one carry problem slipped
    assert out["mod"] == {"right": 0.5, "slip": 0.0}
    assert slips.pooled(out, "right") == 0.5 and slips.pooled(out, "slip") == 0.5
    only_plain = slips.shares([add_plain], ["\\boxed{46}"])
    assert only_plain["add"]["right"] == 1.0 and np.isnan(only_plain["add"]["slip"])
    with pytest.raises(ValueError):  # a missing response is an error, not a silent truncation
        slips.shares(problems, responses[:-1])


def test_batched_greedy_equals_one_at_a_time():
    pytest.importorskip("real_runs.models")
    from real_runs.models import build_qwen3

    torch.manual_seed(0)
    tok = build_tokenizer()
    model = build_qwen3(tok, seed=3, max_position_embeddings=64)
    problems = tasks.heldout_split(tasks.TaskConfig(heldout_per_group=3))  # prompts of different lengths
    batched = slips.greedy_responses(model, tok, problems, batch_size=7)
    single = [slips.greedy_responses(model, tok, [p], batch_size=1)[0] for p in problems]
    assert batched == single
    assert len({len(p.problem) for p in problems}) > 1 and len(set(batched)) > 1


def test_markdown_reports_paired_change_against_grpo():
    def table(right, slip):
        return {g: {"right": right, "slip": slip} for g in tasks.SKILLS}

    measured = {"warm": {0: table(0.3, 0.25), 1: table(0.32, 0.25)},  # each seed's own warm start
                "runs": {"grpo": {0: table(0.40, 0.10), 1: table(0.42, 0.12)},
                         "joint": {0: table(0.41, 0.08), 1: table(0.43, 0.08)}}}
    text = "\n".join(slips.markdown(measured, {"grpo": "GRPO", "joint": "joint"}))
    warm_row = next(line for line in text.splitlines() if line.startswith("| warm starts"))
    assert warm_row.startswith("| warm starts | 31.0 ± ") and "| 25.0 ± 0.0 |" in warm_row  # seed mean ± t-interval
    joint_row = next(line for line in text.splitlines() if line.startswith("| joint"))
    assert "-3.0" in joint_row  # paired: (8 - 10) and (8 - 12) -> mean -3 pp
