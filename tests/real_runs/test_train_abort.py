"""`gdro train` with DUET's early stopping (rollout.abort_*): aborted rollouts (weight 0) are left out of the
controllers' feedback, the advantages and the loss; a kept tail's loss is x 1 / keep_prob; the step logs it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_lab import step as core_step  # noqa: E402
from gdro_lab.allocation.duet import scored_rows  # noqa: E402
from real_runs import loss as L  # noqa: E402
from real_runs import ppo, train  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.engines.hf import HFEngine  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.step_scalars import abort_scalars  # noqa: E402
from real_runs.types import Problem, RewardResult, Rollouts  # noqa: E402

RECORDS = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(4)]


def test_scored_rows_keep_prompts_with_enough_scored_rollouts():
    counts = np.array([3, 2, 3])
    seen, rows, scored = scored_rows(counts, np.array([1, 0, 20, 0, 1, 1, 1, 1.0]), need=2)
    assert seen.tolist() == [True, False, True]
    assert rows.tolist() == [True, False, True, False, False, True, True, True]
    assert scored.tolist() == [2, 3]  # the seen prompts' scored rollouts
    seen, rows, scored = scored_rows(counts, np.array([1, 0, 20, 0, 1, 1, 1, 1.0]), need=3)
    assert seen.tolist() == [False, False, True] and rows.tolist() == [False] * 5 + [True] * 3
    assert scored.tolist() == [3]
    seen, rows, scored = scored_rows(counts, None, need=2)   # no early stopping: everything
    assert seen.all() and rows.all() and rows.size == 8 and scored.tolist() == [3, 2, 3]


def test_weights_multiply_every_loss_term_of_their_response():
    """Two responses (2 and 1 tokens), ratio 1, KL against a shifted reference: token-mean of w_b x (-A_b + beta kl)."""
    logp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    ref = logp.detach() - 0.3
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    args = dict(clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0, agg="token-mean", ref_logp_BT=ref, kl_coef=0.1)
    kl = float(np.exp(-0.3) + 0.3 - 1.0)
    loss, sums = L.policy_loss(logp, logp.detach(), torch.tensor([0.5, -1.0]), mask,
                               weights_B=torch.tensor([1.0, 20.0]), **args)
    assert float(loss.detach()) == pytest.approx((2 * (-0.5 + 0.1 * kl) + 20 * (1.0 + 0.1 * kl)) / 3, rel=1e-6)
    plain, plain_sums = L.policy_loss(logp, logp.detach(), torch.tensor([0.5, -1.0]), mask, **args)
    assert float(plain.detach()) == pytest.approx((2 * (-0.5 + 0.1 * kl) + (1.0 + 0.1 * kl)) / 3, rel=1e-6)
    assert float(sums["kl"]) == pytest.approx(float(plain_sums["kl"]))  # the metrics stay unweighted


class AbortPattern:
    """The hf engine without early stopping, then a fixed abort pattern per row (weight 0 = aborted)."""

    def __init__(self, inner, weights):
        self.inner, self.weights = inner, np.asarray(weights, float)

    def generate(self, prompts, counts, sampling):
        out = self.inner.generate(prompts, counts, dataclasses.replace(sampling, abort_horizon=0))
        out.weights_R = self.weights.copy()
        out.finish_reasons = ["abort" if w == 0 else r for w, r in zip(self.weights, out.finish_reasons)]
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


class ByPosition:
    def __init__(self, rewards):
        self.rewards = np.asarray(rewards, float)

    def score(self, responses, answers):
        return RewardResult(self.rewards.copy(), self.rewards > 0, {})


def _run(tmp_path: Path, monkeypatch, weights, rewards, *overrides: str):
    """One grpo step (2 prompts x 4 rollouts) -> (feedbacks seen by the controllers, (A, w) per loss call's
    response, the step's scalars, whether the parameters changed)."""
    torch.set_num_threads(1)
    model, tok = load_policy("tiny", seed=0)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    feedbacks, terms = [], []
    observe, policy_loss = core_step.MethodStep.observe, L.policy_loss
    monkeypatch.setattr(core_step.MethodStep, "observe", lambda self, fb, **kw: feedbacks.append(fb) or
                        observe(self, fb, **kw))

    def recording_loss(logp, old, adv, mask, **kw):
        weights_B = kw["weights_B"]
        terms.extend(zip(adv.tolist(), [1.0] * adv.numel() if weights_B is None else weights_B.tolist()))
        return policy_loss(logp, old, adv, mask, **kw)

    monkeypatch.setattr(L, "policy_loss", recording_loss)
    cfg = load_config("tiny-cpu", [f"train.out={json.dumps(str(tmp_path))}", "train.progress=false", "eval.every=0",
                                   "train.steps=1", "train.prompts_per_step=2", "train.mini_batches=1",
                                   "rollout.max_new_tokens=4", "rollout.abort_horizon=2", "rollout.abort_keep_prob=0.05",
                                   *overrides])
    engine = AbortPattern(HFEngine(model, tok), weights)
    run_dir = train.main(cfg, model=model, tokenizer=tok, train_records=RECORDS, reward=ByPosition(rewards),
                         engine=engine)
    row = json.loads((run_dir / "steps.jsonl").read_text().splitlines()[0])["scalars"]
    changed = any(not torch.equal(v, initial[k]) for k, v in model.state_dict().items())
    return feedbacks, terms, row, changed


@pytest.mark.parametrize("k", [1, 2])
def test_aborted_rollouts_are_out_of_the_feedback_the_advantages_and_the_loss(tmp_path: Path, monkeypatch, k: int):
    """(pass@k classifier k = 1 or 2: a prompt needs max(2, k) scored rollouts.) Prompt 0: weights (1, 0, 1, 20), rewards (+1, -1, +1, -1): scored (+1, +1, -1), mean 1/3, population std
    sqrt(8/9): A = (1/sqrt(2), 1/sqrt(2), -sqrt(2)), the kept tail's loss x 20. Prompt 1: one scored rollout
    (< 2): no signal, left out of the step. The aborted rows' rewards (-1) would change every number."""
    feedbacks, terms, row, changed = _run(tmp_path, monkeypatch, [1, 0, 1, 20, 0, 0, 1, 0],
                                          [1, -1, 1, -1, 1, -1, -1, -1], f"method.classifier_config.k={k}")
    (fb,) = feedbacks
    assert fb.counts_P.tolist() == [3] and fb.rewards_R.tolist() == [1, 1, -1] and fb.successes_R.tolist() == [1, 1, 0]
    a = 1 / np.sqrt(2)
    np.testing.assert_allclose(sorted(terms), sorted([(a, 1.0), (a, 1.0), (-2 * a, 20.0)]), rtol=1e-5)
    assert changed and row["total_rollouts"] == 3 and row["compute/rollouts_trained"] == 3
    assert (row["compute/rollouts_generated"], row["compute/prompts_generated"]) == (8, 2)
    assert (row["compute/rollouts_aborted"], row["compute/rollouts_kept_tail"]) == (4, 1)
    assert row["compute/rollouts_marker_stopped"] == 0 and row["compute/tokens_generated"] > 0


def test_a_prompt_needs_k_scored_rollouts_when_pass_at_k_asks_for_more_than_two(tmp_path: Path, monkeypatch):
    """Classifier k = 3 (n_min = 3): a prompt enters the step with max(2, k) = 3 scored rollouts. Prompt 0 keeps 3
    (weights 1, 0, 1, 20) and is trained as in the test above; prompt 1 keeps 2 (1, 0, 1, 0), enough for a GRPO
    group but not for its pass@3, and is left out of the feedback, the advantages and the loss."""
    feedbacks, terms, row, changed = _run(tmp_path, monkeypatch, [1, 0, 1, 20, 1, 0, 1, 0],
                                          [1, -1, 1, -1, 1, -1, -1, -1], "method.n_min=3",
                                          "method.classifier_config.k=3")
    (fb,) = feedbacks
    assert fb.counts_P.tolist() == [3] and fb.rewards_R.tolist() == [1, 1, -1]
    a = 1 / np.sqrt(2)
    np.testing.assert_allclose(sorted(terms), sorted([(a, 1.0), (a, 1.0), (-2 * a, 20.0)]), rtol=1e-5)
    assert changed and row["total_rollouts"] == 3 and row["compute/rollouts_aborted"] == 3


def test_abort_scalars_count_the_rule_and_bound_the_tokens_it_saved():
    rollouts = Rollouts(np.array([2, 2]), [[1], [2]], [[5] * 5, [5] * 16, [5] * 3, [5] * 10],
                        [np.zeros(n, np.float32) for n in (5, 16, 3, 10)], ["a"] * 4,
                        ["abort", "length", "stop", "marker"], weights_R=np.array([0.0, 20.0, 1.0, 1.0]))
    assert abort_scalars(rollouts, 16) == {
        "compute/prompts_generated": 2.0, "compute/rollouts_generated": 4.0, "compute/tokens_generated": 34.0,
        "compute/rollouts_aborted": 1.0, "compute/rollouts_marker_stopped": 1.0, "compute/rollouts_kept_tail": 1.0,
        "compute/tokens_saved_max": (16 - 5) + (16 - 10.0)}


def test_a_step_with_nothing_scored_updates_nothing(tmp_path: Path, monkeypatch):
    feedbacks, terms, row, changed = _run(tmp_path, monkeypatch, [0] * 8, [1, -1] * 4)
    assert not feedbacks and not terms and not changed
    assert row["compute/rollouts_aborted"] == 8 and "mean_reward" not in row and row["actor/loss"] == 0.0
    assert row["compute/rollouts_trained"] == row["compute/prompts_trained"] == 0.0  # the simulator's empty record


def test_tiny_cpu_with_early_stopping_finishes_and_logs_it(tmp_path: Path):
    """The real hf engine, horizon 3 + grace 2 of 16 tokens: the random model writes no \\boxed{}, so every row
    still running at token 5 is aborted (5 tokens) or kept to 16 (weight 2)."""
    torch.set_num_threads(1)
    cfg = load_config("tiny-cpu", [f"train.out={json.dumps(str(tmp_path))}", "train.progress=false", "train.steps=2",
                                   "eval.every=0", "rollout.abort_horizon=3", "rollout.abort_grace=2",
                                   "rollout.abort_keep_prob=0.5"])
    run_dir = train.main(cfg)
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "finished"
    rows = [json.loads(line)["scalars"] for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        aborted, kept = row["compute/rollouts_aborted"], row["compute/rollouts_kept_tail"]
        assert row["compute/rollouts_generated"] == 16 and aborted + kept <= 16 and aborted > 0
        assert row["compute/tokens_saved_max"] == aborted * (16 - 5)
        assert row["compute/tokens_generated"] == pytest.approx(row["response/length_mean"] * 16)
        assert row.get("total_rollouts", 0) <= 16 - aborted
