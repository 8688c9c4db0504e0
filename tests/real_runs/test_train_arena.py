"""`gdro train` with the arena's controllers: method.allocator=knapsack|vip|duet|cero|gdro_prompt and
method.selector=dynamic_sampling|greso run a few CPU steps with the exact budget every step, the
compute counts, and a resumed run that continues as the uninterrupted one."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs import train  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.types import Problem, RewardResult  # noqa: E402

STEPS = 4
RECORDS = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(12)]


class PromptDependent:
    """+1 with a fixed per-prompt chance read from the answer slot: prompts 0-3 never, 4-7 half the
    time (by a hash of the response), 8-11 always, so groups are constant or mixed."""

    def score(self, responses, answers):
        rewards = []
        for text, answer in zip(responses, answers):
            kind = int(answer) % 3
            hit = kind == 2 or (kind == 1 and zlib.crc32(text.encode()) % 2 == 0)
            rewards.append(1.0 if hit else -1.0)
        rewards = np.array(rewards)
        return RewardResult(rewards, rewards > 0, {})


def records():
    return [Problem(p.id, p.problem, str(i // 4), p.source, p.group) for i, p in enumerate(RECORDS)]


def config(out: Path, *overrides: str):
    return load_config("tiny-cpu", [f"train.out={json.dumps(str(out))}", "train.progress=false",
                                    f"train.steps={STEPS}", "eval.every=0", "train.prompts_per_step=4",
                                    "rollout.max_new_tokens=2", "train.save_every=2", *overrides])


@pytest.mark.parametrize("overrides", [("method.allocator=knapsack",), ("method.allocator=vip",), ("method.allocator=duet",),
                                       ("method.allocator=cero",), ("method.allocator=gdro_prompt",), ("method.selector=dynamic_sampling",),
                                       ("method.selector=greso", "method.selector_config.p_easy=0.05",
                                        "method.selector_config.p_hard=0.05")])
def test_arena_controllers_train_with_an_exact_budget(tmp_path: Path, overrides):
    torch.set_num_threads(1)
    run = read_run(train.main(config(tmp_path, *overrides), train_records=records(), reward=PromptDependent()))
    assert run.meta["status"] == "finished" and run.steps.tolist() == list(range(1, STEPS + 1))
    np.testing.assert_array_equal(run.scalars["total_rollouts"], 4 * 4)          # P n_bar every step
    np.testing.assert_array_equal(run.scalars["compute/rollouts_generated"], 16)
    trained = run.scalars["compute/rollouts_trained"]
    assert np.all(trained <= 16) and np.all(run.scalars["compute/tokens_generated"] > 0)
    if "selector" in overrides[0]:
        assert np.any(trained < 16)  # constant groups were generated, then dropped
    else:
        np.testing.assert_array_equal(trained, 16)


def test_a_resumed_greso_knapsack_run_continues_as_the_uninterrupted_one(tmp_path: Path):
    torch.set_num_threads(1)
    overrides = ("method.allocator=knapsack", "method.selector=greso", "train.run_name=r")
    full = read_run(train.main(config(tmp_path / "full", *overrides), train_records=records(),
                               reward=PromptDependent()))

    class DiesAtStep3(PromptDependent):
        calls = 0

        def score(self, responses, answers):
            DiesAtStep3.calls += 1
            if DiesAtStep3.calls == 3:
                raise KeyboardInterrupt
            return super().score(responses, answers)

    with pytest.raises(KeyboardInterrupt):
        train.main(config(tmp_path / "cut", *overrides), train_records=records(), reward=DiesAtStep3())
    resumed = read_run(train.main(None, resume=str(tmp_path / "cut" / "r"), train_records=records(),
                                  reward=PromptDependent()))
    assert resumed.steps.tolist() == full.steps.tolist()
    for key in ("mean_reward", "compute/rollouts_trained", "select/skipped", "actor/loss", "actor/kl"):
        np.testing.assert_array_equal(resumed.scalars[key], full.scalars[key], err_msg=key)


def test_unknown_selector_and_bad_selector_fields_are_one_line_errors():
    from gdro_lab import ConfigError
    with pytest.raises(ConfigError, match="selector") as info:
        load_config("tiny-cpu", ["method.selector=dapo"])
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="SelectorConfig has no field"):
        load_config("tiny-cpu", ["method.selector=greso", "method.selector_config.p_fast=0.3"])
    with pytest.raises(ConfigError, match="KnapsackConfig has no field"):
        load_config("tiny-cpu", ["method.allocator=knapsack", "method.allocator_config.dual_lr=0.1"])
