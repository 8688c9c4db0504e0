"""The verl plugin's GDROController is an adapter around gdro_lab.step.MethodStep: its controllers are
the step's, a plan off the budget is the step's one-line message (as a VerlPluginError), and its state
is the step's plus the run's prompt numbering (the gdro_ctrl.json layout)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")

from gdro_lab.step import budget_problem  # noqa: E402
from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl.controller import GDROController, GDROSettings  # noqa: E402


def controller(**values) -> GDROController:
    settings = GDROSettings.from_mapping({"classifier_config": {"edges": [0.3, 0.7]}, **values})
    return GDROController(settings, 4, batch_size=6)


def test_the_controllers_are_the_method_steps_and_the_state_keeps_its_layout() -> None:
    """gdro.weighter / allocator / selector name the step's controllers; the state holds the four
    controllers and the prompt numbering, and a state without selector and prompts still loads."""
    gdro = controller(allocator="knapsack", selector="dynamic_sampling")
    assert gdro.method_step.controllers() == {"classifier": gdro.classifier, "weighter": gdro.weighter,
                                       "allocator": gdro.allocator, "selector": gdro.selector}
    assert (type(gdro.allocator).__name__, type(gdro.selector).__name__) == ("KnapsackAllocator", "DynamicSampling")
    gdro.plan([f"toy:train:{i}" for i in range(6)])
    state = gdro.state_dict()
    assert list(state) == ["classifier", "weighter", "allocator", "selector", "prompts"]
    fresh = controller(allocator="knapsack", selector="dynamic_sampling")
    fresh.load_state_dict({k: v for k, v in state.items() if k not in ("selector", "prompts")})
    with pytest.raises(VerlPluginError, match="lacks allocator"):
        fresh.load_state_dict({"classifier": state["classifier"], "weighter": state["weighter"]})


def test_a_plan_off_the_budget_is_the_method_steps_one_message() -> None:
    """An allocator planning one rollout too many: plan() raises a VerlPluginError whose message is
    MethodStep's budget line, the one the simulator and gdro train give."""
    gdro = controller()
    plan = gdro.allocator.plan
    gdro.allocator.plan = lambda bins, ids=None: plan(bins, ids) + np.eye(len(bins), dtype=np.int64)[0]
    with pytest.raises(VerlPluginError) as info:
        gdro.plan([f"toy:train:{i}" for i in range(6)])
    counts = np.array([5, 4, 4, 4, 4, 4])
    assert str(info.value) == budget_problem("gdro", counts, 6, 4, 2, 12)
    assert str(info.value).startswith("allocator 'gdro' planned 25 rollouts in [4, 5] for 6 prompts, not 24 in [2, 12]")


def test_token_counts_follow_each_row_to_its_prompt_when_verl_reorders_rows(tmp_path) -> None:
    """verl hands observe() its rows in any order (its balancing shuffles them); the tokens of each row must be
    counted for the prompt that row belongs to. Dynamic sampling drops the prompts whose rollouts all scored
    the same, so compute/tokens_trained is the tokens of the kept prompts' rows: counted here row by row in
    verl's order, each row by its own prompt (independent of the plugin's reordering)."""
    import torch
    from verl import DataProto

    from real_runs.verl import batch as vb

    gdro = controller(selector="dynamic_sampling", weighter="uniform", allocator="uniform",
                      run_dir=str(tmp_path / "run"))
    gdro.open_run()
    ids = [f"toy:train:{i}" for i in range(6)]
    data = DataProto.from_single_dict({"prompt_row": torch.arange(6),
                                       "extra_info": np.array([{"index": i} for i in ids], dtype=object),
                                       "uid": np.array([f"u{r}" for r in range(6)], dtype=object)})
    expanded = vb.expand(data, gdro.plan(ids))
    prompt_R = expanded.batch["prompt_row"].numpy()
    # prompts 0, 2, 4 solve every rollout (no signal: dropped); 1, 3, 5 solve their first rollout only
    first = np.r_[True, prompt_R[1:] != prompt_R[:-1]]
    scores = np.where((prompt_R % 2 == 0) | first, 1.0, -1.0)
    length = 1 + (np.arange(len(expanded)) * 7) % 10      # distinct token counts, up to 10
    mask = (torch.arange(10)[None, :] < torch.as_tensor(length)[:, None]).float()
    level = torch.zeros(len(expanded), 10)
    level[torch.arange(len(expanded)), torch.as_tensor(length - 1)] = torch.as_tensor(scores).float()
    expanded.batch["response_mask"] = mask
    expanded.batch["token_level_scores"] = level
    expanded.batch["advantages"] = level.clone()
    order = np.random.default_rng(5).permutation(len(expanded))
    shuffled = expanded.select_idxs(order)
    metrics = gdro.observe(shuffled, 1)
    gdro.close()
    kept = [prompt_R[row] % 2 == 1 for row in order]
    trained = sum(int(length[row]) for row, keep in zip(order, kept) if keep)
    assert 0 < trained < int(length.sum())
    got = {k.rsplit("/", 1)[-1]: v for k, v in metrics.items() if k.endswith(("/tokens_trained", "/tokens_generated"))}
    assert got == {"tokens_trained": trained, "tokens_generated": int(length.sum())}
