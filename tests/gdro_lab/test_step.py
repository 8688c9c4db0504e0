"""gdro_lab.step.MethodStep, the controller step every loop shares, and gdro_lab.methods, its table:
a state round trip continues identically, the same seed gives the same steps (another seed other
ones), every plan spends the exact budget, a plan that does not is one error message, and the
table's methods are built as it says."""

from __future__ import annotations

import json
from typing import Any, Iterator

import numpy as np
import pytest

from gdro_lab import ConfigError, PromptIndex, StepFeedback
from gdro_lab.controllers.registry import REGISTRY
from gdro_lab.methods import METHODS, MethodSpec, get_method, real_methods, register_method, resolve_method
from gdro_lab.runformat.runlog import decode_state, encode_state
from gdro_lab.step import BudgetError, MethodStep, budget_problem

NUM_PROMPTS, BATCH = 120, 12
SUCCESS_P = np.random.default_rng(4).beta(0.6, 0.6, size=NUM_PROMPTS)
BOX = {"n_bar": 4, "n_min": 2, "n_max": 8}


def configs(method: MethodSpec, **allocator: Any) -> dict[str, dict[str, Any]]:
    """The configs a loop would give: 4 bins, the box, the method's overrides."""
    return {"classifier": method.config("classifier", {"edges": (0.25, 0.5, 0.75), "window": 6}, {}),
            "weighter": method.config("weighter", {"num_bins": 4}, {}),
            "allocator": method.config("allocator", {"num_bins": 4, **BOX}, allocator),
            "selector": method.config("selector", {}, {})}


def make(name: str, seed: int = 0, **allocator: Any) -> MethodStep:
    method = resolve_method(name) if name != "bayes" else resolve_method("joint", classifier="bayes")
    return MethodStep(method, configs(method, **allocator), seed, PromptIndex(f"p{i}" for i in range(NUM_PROMPTS)))


def run(step: MethodStep, first_step: int, steps: int) -> Iterator[tuple[Any, Any, Any]]:
    """``steps`` steps of a fixed toy world from step ``first_step`` (the world's draws depend on the
    step number only): yields (plan, outcome, record)."""
    for t in range(first_step, first_step + steps):
        rng = np.random.default_rng([9, t])
        order = rng.permutation(NUM_PROMPTS)
        position = [BATCH]

        def draw(count: int) -> np.ndarray:
            start, position[0] = position[0], position[0] + count
            return order[start:position[0]]

        rows = step.choose(order[:BATCH], draw, lambda r: np.asarray(r, np.int64))
        plan = step.plan(np.asarray(rows, np.int64))
        success = rng.random(int(plan.counts_P.sum())) < np.repeat(SUCCESS_P[rows], plan.counts_P)
        feedback = StepFeedback(plan.ids_P, plan.bins_P, plan.counts_P, 2.0 * success - 1.0, success,
                                prompts=step.prompts)
        outcome = step.observe(feedback)
        yield plan, outcome, step.record(outcome)


def trace(step: MethodStep, first_step: int, steps: int) -> list[str]:
    """Each step's plan, trained mask, multipliers, metrics and record, exactly (floats by their bits)."""
    out = []
    for plan, outcome, (scalars, rows) in run(step, first_step, steps):
        out.append(json.dumps(encode_state({"ids": plan.ids_P, "bins": plan.bins_P, "counts": plan.counts_P,
                                            "train": outcome.train_P.astype(np.int64), "m": outcome.multipliers_P,
                                            "metrics": outcome.metrics, "scalars": scalars, "rows": rows}),
                              sort_keys=True))
    return out


STATEFUL = ("joint", "bayes", "knapsack", "vip", "duet", "cero", "gdro_prompt", "greso", "dynamic_sampling")


@pytest.mark.parametrize("name", STATEFUL)
def test_a_state_round_trip_continues_identically(name: str) -> None:
    """30 steps, state_dict through the JSON encoding a run directory stores, into a fresh step built
    with ANOTHER seed: the next 30 steps equal those of the uninterrupted step (plans, trained masks,
    multipliers, metrics, records), so the state holds every RNG; a fresh step without the state differs."""
    straight = make(name)
    trace(straight, 0, 30)
    saved = json.loads(json.dumps(encode_state(straight.state_dict())))
    want = trace(straight, 30, 30)
    resumed = make(name, seed=77)
    resumed.load_state_dict(decode_state(saved))
    assert set(saved) == {"classifier", "weighter", "allocator", "selector"}
    assert trace(resumed, 30, 30) == want
    assert trace(make(name, seed=77), 30, 30) != want


def test_a_rollout_gdro_state_round_trip_under_bandit_feedback() -> None:
    """Bandit feedback samples arms from the allocator's RNG: the round trip still continues exactly."""
    straight = make("rollout_gdro", feedback="bandit")
    trace(straight, 0, 20)
    state = straight.state_dict()
    want = trace(straight, 20, 20)
    resumed = make("rollout_gdro", seed=5, feedback="bandit")
    resumed.load_state_dict(state)
    assert trace(resumed, 20, 20) == want


def test_a_state_without_a_selector_loads_and_a_damaged_one_is_one_line() -> None:
    """States written before the selector family have none: the selector stays fresh; a state
    missing a controller is a one-line error naming it."""
    step = make("joint")
    trace(step, 0, 5)
    state = step.state_dict()
    fresh = make("joint")
    fresh.load_state_dict({k: v for k, v in state.items() if k != "selector"})
    assert json.dumps(encode_state(fresh.weighter.state_dict())) == json.dumps(encode_state(state["weighter"]))
    with pytest.raises(ConfigError, match="lacks weighter") as info:
        fresh.load_state_dict({k: v for k, v in state.items() if k != "weighter"})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ("rollout_gdro", "greso"))
def test_the_same_seed_gives_the_same_steps_and_another_seed_others(name: str) -> None:
    """Two steps built alike replay each other exactly; another seed changes the run (the methods
    draw from their RNGs: the allocator's arm sampling, GRESO's screening)."""
    extra = {"feedback": "bandit"} if name == "rollout_gdro" else {}
    first, again, other = (trace(make(name, seed, **extra), 0, 25) for seed in (3, 3, 4))
    assert first == again
    assert first != other


def test_the_default_seeds_are_seed_plus_family_index() -> None:
    """One seed gives the classifier, weighter, allocator and selector seed, seed+1, seed+2, seed+3
    (the layout gdro train and the verl plugin always used): the same controllers as four seeds."""
    one = make("rollout_gdro", seed=10, feedback="bandit")
    method = resolve_method("rollout_gdro")
    four = MethodStep(method, configs(method, feedback="bandit"), [10, 11, 12, 13],
                      PromptIndex(f"p{i}" for i in range(NUM_PROMPTS)))
    assert trace(one, 0, 10) == trace(four, 0, 10)
    with pytest.raises(ConfigError, match="one seed or 4 seeds"):
        MethodStep(method, configs(method), [1, 2, 3])


@pytest.mark.parametrize("name", real_methods())
def test_every_plan_spends_exactly_the_budget(name: str) -> None:
    """Every method that runs on a real model, 40 steps: each plan spends exactly B n_bar rollouts,
    every count in [n_min, n_max], int64, one per prompt; the record logs the same total."""
    for plan, outcome, (scalars, rows) in run(make(name), 0, 40):
        assert plan.counts_P.dtype == np.int64 and plan.counts_P.shape == (BATCH,)
        assert plan.counts_P.sum() == BATCH * BOX["n_bar"]
        assert BOX["n_min"] <= plan.counts_P.min() and plan.counts_P.max() <= BOX["n_max"]
        assert scalars["total_rollouts"] == BATCH * BOX["n_bar"] == outcome.metrics["compute/rollouts_generated"]


class Overspending:
    """An allocator that plans one rollout too many (or the wrong shape)."""

    def __init__(self, config: Any, extra: int = 1, shape_off: bool = False):
        self.config, self.extra, self.shape_off = config, extra, shape_off

    def plan(self, bins_P: np.ndarray, prompt_ids: Any = None) -> np.ndarray:
        counts = np.full(len(bins_P) + self.shape_off, self.config.n_bar, np.int64)
        counts[0] += self.extra
        return counts


@pytest.mark.parametrize("extra,shape_off,got", [
    (1, False, "planned 49 rollouts in [4, 5] for 12 prompts"),
    (-3, False, "planned 45 rollouts in [1, 4] for 12 prompts"),
    (-1, False, "planned 47 rollouts in [3, 4] for 12 prompts"),  # underspends, every count inside the box
    (6, False, "planned 54 rollouts in [4, 10] for 12 prompts"),
    (0, True, "planned an array of shape (13,) and dtype int64 for 12 prompts")])
def test_a_plan_off_the_budget_is_one_error_message(extra: int, shape_off: bool, got: str) -> None:
    """A plan off the budget (too many, a count under n_min, too few with every count inside [n_min, n_max]:
    the budget is exact, not a cap; one over n_max, one count too many) is a BudgetError (a ConfigError)
    whose one line names the allocator, what it planned and the budget."""
    step = make("rollout_gdro")
    step.allocator = Overspending(step.allocator.config, extra, shape_off)
    with pytest.raises(BudgetError) as info:
        step.plan(np.arange(BATCH, dtype=np.int64))
    message = str(info.value)
    assert message == (f"allocator 'gdro' {got}, not 48 in [2, 8] (n_bar = 4 per prompt, one integer each): "
                       "every step must spend exactly the budget")
    assert isinstance(info.value, ConfigError)
    assert budget_problem("gdro", np.full(BATCH, 4, np.int64), BATCH, 4, 2, 8) is None


def test_construction_checks_pass_at_k() -> None:
    """A classifier k above n_min is refused when the step is built, in one line (the box: test_methods.py)."""
    method = resolve_method("rollout_gdro")
    prompts = PromptIndex()
    bad = configs(method)
    bad["classifier"]["k"] = 3
    with pytest.raises(ConfigError, match="classifier k=3 exceeds n_min=2: pass@k needs k <= n_min"):
        MethodStep(method, bad, 0, prompts)


def prompt_gdro_by_hand(steps: list[tuple[list[int], list[int]]], n: int = 4, B: int = 4) -> list[dict[str, Any]]:
    """Prompt-GDRO's paper-mode step written from paper Eq. 12-16 (with this package's departures: debiasing by
    B q_hat floored at 0.1, the EMA starting at a bin's first value, absent bins keeping their score): per step
    (bins, successes of n rollouts per prompt), the failure rate per bin (the signal), the scores S_t after this
    step's update, the weights q_t and each prompt's multiplier min(omega_t(b), 15) from those scores."""
    eta, gamma, beta, clip, cap = 0.65, 0.01, 0.12, 5.0, 15.0
    score, seen, out = [0.0] * B, [False] * B, []
    for bins, wins in steps:
        failure = [1 - w / n for w in wins]
        signal = [float(np.mean([f for f, b in zip(failure, bins) if b == g])) if g in bins else np.nan
                  for g in range(B)]
        for g in range(B):
            if g in bins:
                x = signal[g] / max(B * bins.count(g) / len(bins), 0.1)
                score[g], seen[g] = ((1 - beta) * score[g] + beta * x) if seen[g] else x, True
        omega = [np.exp(eta * min(max(v, -clip), clip)) for v in score]
        weights = [(1 - gamma) * o / sum(omega) + gamma / B for o in omega]
        out.append({"signal": signal, "score": list(score), "weight": weights,
                    "multipliers": [min(omega[b], cap) for b in bins]})
    return out


def test_prompt_gdro_multipliers_and_record_follow_the_papers_order_by_hand() -> None:
    """Step t's multipliers come from the scores AFTER step t's signal entered them (Eq. 12, then Eq. 14, then
    Eq. 16 with omega_t: the step's own signal reweights its own advantages), never from S_{t-1}; the step
    record carries that signal, the score S_t and the weights q_t per bin. Two steps by hand, the second with
    unequal bin shares (debiasing) and the EMA on."""
    steps = [([0, 0, 1, 1, 2, 2, 3, 3], [0, 1, 2, 2, 3, 4, 4, 4]),
             ([0, 0, 0, 0, 1, 1, 2, 3], [0, 0, 1, 4, 1, 3, 2, 4])]
    expected = prompt_gdro_by_hand(steps)
    step = make("prompt_gdro")
    for (bins, wins), want in zip(steps, expected):
        counts = np.full(len(bins), 4, np.int64)
        successes = np.concatenate([np.arange(4) < w for w in wins])
        feedback = StepFeedback(np.arange(len(bins)), np.array(bins), counts, 2.0 * successes - 1.0, successes,
                                prompts=step.prompts)
        outcome = step.observe(feedback)
        np.testing.assert_allclose(outcome.multipliers_P, want["multipliers"], rtol=1e-12)
        _, rows = step.record(outcome)
        np.testing.assert_allclose(rows["signal"], want["signal"], rtol=1e-12)
        np.testing.assert_allclose(rows["score"], want["score"], rtol=1e-12)
        np.testing.assert_allclose(rows["weight"], want["weight"], rtol=1e-12)
        per_bin = [np.mean([m for m, b in zip(want["multipliers"], bins) if b == g]) for g in range(4)]
        np.testing.assert_allclose(rows["multiplier"], per_bin, rtol=1e-12)
    assert len(set(np.round(expected[0]["multipliers"], 9))) == 4  # step 1 already reweights (S_0 = 0 would not)


# ----------------------------------------------------------------------------- the table

def test_the_table_builds_what_it_says() -> None:
    """Each real method's step holds the registry classes its row names, with its overrides applied; the
    simulator's own methods (registered by simulators.simulator_methods) are no real loop's."""
    for name in real_methods():
        method = get_method(name)
        step = make(name)
        for family, controller in step.controllers().items():
            assert type(controller) is REGISTRY[family][method.controller(family)], (name, family)
        for key, value in method.weighter_overrides.items():
            assert getattr(step.weighter.config, key) == value, (name, key)
    import simulators.simulator_methods  # the simulator registers its own methods (they need its truth)

    own = {name for name, spec in METHODS.items() if spec.loop == "simulator"}
    assert own == {spec.name for spec in simulators.simulator_methods.SIMULATOR_METHODS} == {
        "class_gdro", "sqrt_oracle", "prompt_oracle", "prompt_bayes", "prompt_stale"}
    assert set(real_methods()) == set(METHODS) - own
    assert {"grpo", "prompt_gdro", "rollout_gdro", "joint"} <= set(real_methods())


def test_the_papers_methods_wire_the_papers_controllers() -> None:
    """grpo: uniform / uniform; prompt_gdro: weighter gdro; rollout_gdro: allocator gdro; joint: both."""
    wiring = {name: (get_method(name).weighter, get_method(name).allocator, get_method(name).selector)
              for name in ("grpo", "prompt_gdro", "rollout_gdro", "joint")}
    assert wiring == {"grpo": ("uniform", "uniform", "none"), "prompt_gdro": ("gdro", "uniform", "none"),
                      "rollout_gdro": ("uniform", "gdro", "none"), "joint": ("gdro", "gdro", "none")}


def test_a_users_value_wins_over_the_methods_override() -> None:
    """Config values stack as the loop's base, then the method's overrides, then the user's: a user who sets
    Prompt-GDRO's ema_beta or Knapsack-RL's objective gets that value in the built step, not the method's."""
    method = get_method("prompt_gdro")
    values = method.config("weighter", {"num_bins": 4, "ema_beta": 0.3}, {"ema_beta": 0.5})
    assert values["ema_beta"] == 0.5 and values["share_normalize"] is True and values["num_bins"] == 4
    assert method.config("weighter", {"num_bins": 4, "ema_beta": 0.3}, {})["ema_beta"] == 0.12
    built = {}
    for name, family, user in (("prompt_gdro", "weighter", {"ema_beta": 0.5}),
                               ("knapsack", "allocator", {"objective": "code"})):
        spec = get_method(name)
        chosen = configs(spec)
        chosen[family] = spec.config(family, {"num_bins": 4, **(BOX if family == "allocator" else {})}, user)
        step = MethodStep(spec, chosen, 0, PromptIndex())
        built[name] = getattr(step.controllers()[family].config, next(iter(user)))
    assert built == {"prompt_gdro": 0.5, "knapsack": "code"}


def test_resolve_method_replaces_a_family_and_drops_its_overrides() -> None:
    """A registry name set for a family replaces the method's and its overrides (they are the method's
    controller's); the other families keep theirs; ``custom`` starts from GRPO's controllers."""
    spec = resolve_method("prompt_gdro_mean1", allocator="knapsack")
    assert (spec.weighter, spec.allocator) == ("gdro", "knapsack")
    assert spec.weighter_overrides["weight_mode"] == "mean1"
    swapped = resolve_method("prompt_gdro_mean1", weighter="uniform")
    assert swapped.weighter == "uniform" and dict(swapped.weighter_overrides) == {}
    assert resolve_method("joint", weighter="gdro") is get_method("joint")   # the method's own: unchanged
    custom = resolve_method("custom", allocator="vip", selector="greso")
    assert (custom.classifier, custom.weighter, custom.allocator, custom.selector) == ("window", "uniform", "vip",
                                                                                       "greso")
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        resolve_method("nope")
    with pytest.raises(ConfigError, match="unknown family planner"):
        resolve_method("grpo", planner="exact")


def test_register_method_checks_its_controllers() -> None:
    """A user method names registry controllers (or a loop's own, passed in, with the loop named)."""
    with pytest.raises(ConfigError, match="unknown weighter 'nope'"):
        register_method(MethodSpec("x", "x", weighter="nope"))
    with pytest.raises(ConfigError, match="already exists"):
        register_method(MethodSpec("grpo", "again"))
    try:
        spec = register_method(MethodSpec("mine", "mine", allocator="local", loop="mine"),
                               controllers={"allocator": {"local": object}})
        assert METHODS["mine"] is spec and "mine" not in real_methods()
    finally:
        METHODS.pop("mine", None)


def test_the_docs_example_runs() -> None:
    """docs/core-step.md's Python block runs as written (docs are code)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "core-step.md").read_text(encoding="utf-8")
    blocks = text.split("```python\n")[1:]
    assert len(blocks) == 1
    exec(compile(blocks[0].split("```")[0], "docs/core-step.md", "exec"), {})


def test_the_docs_method_table_is_the_tables() -> None:
    """docs/core-step.md lists every method of gdro_lab.methods (the simulator's registered) with its
    selector and loop."""
    from pathlib import Path

    import simulators.simulator_methods  # noqa: F401  (registers the simulator's methods)

    text = (Path(__file__).resolve().parents[2] / "docs" / "core-step.md").read_text(encoding="utf-8")
    table = text[text.index("## The method table"):]
    rows = {line.split("|")[1].strip(" `"): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| `")}
    assert set(rows) == set(METHODS)
    for name, cells in rows.items():
        spec = METHODS[name]
        assert cells[2].split()[0] == spec.selector and cells[3] == (spec.loop or "every"), name
        assert cells[1].split()[0].rstrip(":") == spec.allocator, name


def test_feedback_keeps_the_prompts_early_stopping_scored_enough() -> None:
    """MethodStep.feedback, the one copy of early stopping's filter: a prompt enters with at least max(2, k)
    scored rollouts (weight > 0), with those rollouts only; none scored enough gives None and the empty
    step's record; without weights every prompt and rollout enters unchanged."""
    step = make("joint")
    plan = step.plan(np.arange(4))
    counts = plan.counts_P
    rewards = np.arange(int(counts.sum()), dtype=float)
    successes = rewards % 2 == 0
    whole, seen, rows = step.feedback(plan, rewards, successes)
    assert whole is not None and seen.all() and rows.all()
    np.testing.assert_array_equal(whole.counts_P, counts)
    np.testing.assert_array_equal(whole.rewards_R, rewards)
    weights = np.ones(rewards.size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    weights[starts[0]:starts[0] + counts[0] - 1] = 0.0  # prompt 0: one scored rollout, too few (k = 2)
    weights[starts[1]] = 0.0  # prompt 1: one aborted, the rest scored
    weights[starts[2]] = 2.5  # a kept tail counts as scored
    kept, seen, rows = step.feedback(plan, rewards, successes, weights)
    assert kept is not None
    np.testing.assert_array_equal(seen, [False, True, True, True])
    np.testing.assert_array_equal(kept.counts_P, [counts[1] - 1, counts[2], counts[3]])
    expected = [r for p in range(1, 4) for r in range(starts[p], starts[p] + counts[p]) if weights[r] > 0]
    np.testing.assert_array_equal(kept.rewards_R, rewards[expected])
    np.testing.assert_array_equal(kept.prompt_ids, plan.ids_P[1:])
    none, seen, rows = step.feedback(plan, rewards, successes, np.zeros(rewards.size))
    assert none is None and not seen.any() and not rows.any() and rows.size == rewards.size
    assert step.empty_record() == ({"compute/rollouts_trained": 0.0, "compute/prompts_trained": 0.0}, {})


def test_the_core_table_knows_no_simulator() -> None:
    """The core alone (a fresh interpreter importing only gdro_lab) lists no simulator method, and a
    MethodSpec has no simulator field (partition, needs_truth); the simulator adds its own on import."""
    import dataclasses
    import subprocess
    import sys

    code = ("import gdro_lab.methods as m; before = set(m.METHODS); import simulators.simulator_methods; "
            "print(len(before), all(not s.loop for s in m.METHODS.values() if s.name in before), "
            "sorted(set(m.METHODS) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "13 True ['class_gdro', 'prompt_bayes', 'prompt_oracle', 'prompt_stale', 'sqrt_oracle']"
    assert not {"partition", "needs_truth"} & {field.name for field in dataclasses.fields(MethodSpec)}
