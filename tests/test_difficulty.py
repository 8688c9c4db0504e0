"""Online difficulty classifier: window estimate, hysteresis, unassigned prompts, Bayes variant."""

from __future__ import annotations

import math

import numpy as np

from gdro_lab.difficulty import BayesDifficultyClassifier, ClassifierConfig, DifficultyClassifier
from gdro_lab.feedback import StepFeedback


def _visit(ids, counts, successes):
    counts = np.asarray(counts)
    succ_R = np.concatenate([[True] * c + [False] * (n - c) for n, c in zip(counts, successes)])
    return StepFeedback(list(ids), np.full(len(ids), -1), counts, 2.0 * succ_R - 1, succ_R)


def test_unseen_prompts_are_unassigned_then_binned():
    clf = DifficultyClassifier(ClassifierConfig(), seed=0)
    np.testing.assert_array_equal(clf.bins(["a", "b"]), [-1, -1])
    clf.update(_visit(["a"], [4], [0]))
    np.testing.assert_array_equal(clf.bins(["a", "b"]), [0, -1])
    assert np.isnan(clf.estimates(["b"])[0])


def test_window_estimate_equals_naive_mean_of_passk():
    cfg = ClassifierConfig(window=3, k=2, hysteresis=0.0)
    clf = DifficultyClassifier(cfg, seed=0)
    visits = [(4, 1), (6, 3), (2, 0), (12, 11), (3, 2)]
    history = []
    for n, c in visits:
        clf.update(_visit(["x"], [n], [c]))
        history.append(1 - math.comb(n - c, 2) / math.comb(n, 2))
        expected = np.mean(history[-3:])
        assert math.isclose(clf.estimates(["x"])[0], expected, rel_tol=1e-12)
        assert clf.bins(["x"])[0] == int(np.searchsorted(cfg.edges, expected, side="right"))


def test_running_window_sum_tracks_a_fresh_mean_and_resumes_bit_for_bit():
    """The window sum is kept as sum + (new - evicted): after 400 visits (windows wrapped many times, duplicates
    in a batch) every estimate still equals the naive mean of the last H pass@k; the sums survive state_dict
    through JSON bit for bit, and a state without them (older runs) is summed afresh."""
    import json

    from gdro_lab.runlog import decode_state, encode_state

    cfg = ClassifierConfig(window=4, k=2, hysteresis=0.0)
    clf = DifficultyClassifier(cfg, seed=0)
    rng = np.random.default_rng(3)
    history: dict[str, list[float]] = {}
    ids = [f"p{i}" for i in range(6)]
    for _ in range(400):
        pick = [ids[i] for i in rng.integers(0, 6, 3)]  # repeats within a batch happen
        counts = rng.integers(2, 9, 3)
        succ = [int(rng.integers(0, n + 1)) for n in counts]
        clf.update(_visit(pick, counts, succ))
        for pid, n, c in zip(pick, counts, succ):
            history.setdefault(pid, []).append(1 - math.comb(n - c, 2) / math.comb(n, 2))
    naive = [float(np.mean(history[pid][-4:])) for pid in ids]
    np.testing.assert_allclose(clf.estimates(ids), naive, rtol=1e-12, atol=1e-15)
    state = decode_state(json.loads(json.dumps(encode_state(clf.state_dict()))))
    resumed = DifficultyClassifier(cfg, seed=1)
    resumed.load_state_dict(state)
    assert resumed.estimates(ids).tobytes() == clf.estimates(ids).tobytes()
    state.pop("passk_sum")
    fresh = DifficultyClassifier(cfg, seed=1)
    fresh.load_state_dict(state)
    np.testing.assert_allclose(fresh.estimates(ids), naive, rtol=1e-12, atol=1e-15)


def test_duplicate_prompt_in_a_batch_counts_twice():
    clf = DifficultyClassifier(ClassifierConfig(window=5, hysteresis=0.0), seed=0)
    clf.update(_visit(["x", "x"], [4, 4], [4, 0]))
    assert math.isclose(clf.estimates(["x"])[0], 0.5)
    assert clf.state_dict()["length"][0] == 2


def test_hysteresis_stops_flapping_under_noise():
    """A prompt whose true pass@2 sits on an edge: without a margin it flaps, with one it does not."""
    p = 1 - math.sqrt(1 - 0.5)  # per-rollout success with pass@2 = 0.5, exactly on an edge
    flips = {}
    for delta in (0.0, 0.1):
        clf = DifficultyClassifier(ClassifierConfig(window=20, hysteresis=delta), seed=0)
        rng = np.random.default_rng(9)
        last, changes = None, 0
        for _ in range(600):
            c = int((rng.random(4) < p).sum())
            clf.update(_visit(["edge"], [4], [c]))
            current = clf.bins(["edge"])[0]
            changes += last is not None and current != last
            last = current
        flips[delta] = changes
    assert flips[0.0] >= 20
    assert flips[0.1] <= flips[0.0] / 5


def test_margin_rule_moves_only_past_edge_plus_delta():
    cfg = ClassifierConfig(edges=(0.5,), window=1, k=1, hysteresis=0.1)
    clf = DifficultyClassifier(cfg, seed=0)
    clf.update(_visit(["x"], [10], [4]))  # 0.4 -> bin 0
    assert clf.bins(["x"])[0] == 0
    clf.update(_visit(["x"], [10], [5]))  # 0.5: crossed the edge but not by delta
    assert clf.bins(["x"])[0] == 0
    clf.update(_visit(["x"], [10], [6]))  # 0.6 >= 0.5 + 0.1: moves up
    assert clf.bins(["x"])[0] == 1
    clf.update(_visit(["x"], [10], [5]))  # 0.5: not below 0.5 - 0.1
    assert clf.bins(["x"])[0] == 1
    clf.update(_visit(["x"], [10], [3]))  # 0.3 < 0.4: moves down
    assert clf.bins(["x"])[0] == 0


def test_bayes_variant_waits_for_evidence():
    cfg = ClassifierConfig(edges=(0.5,), window=50, k=1, credible=0.9)
    clf = BayesDifficultyClassifier(cfg, seed=0)
    clf.update(_visit(["x"], [2], [0]))  # posterior mean 0.25: bin 0
    assert clf.bins(["x"])[0] == 0
    clf.update(_visit(["x"], [2], [2]))  # mean 0.5: interval still covers the edge
    assert clf.bins(["x"])[0] == 0
    for _ in range(10):
        clf.update(_visit(["x"], [4], [4]))
    assert clf.bins(["x"])[0] == 1  # enough successes: the interval clears 0.5
