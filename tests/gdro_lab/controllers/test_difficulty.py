"""Online difficulty classifier: window estimate, hysteresis, unassigned prompts, Bayes variant."""

from __future__ import annotations

import math

import numpy as np

from gdro_lab.controllers.difficulty import BayesDifficultyClassifier, ClassifierConfig, DifficultyClassifier
from gdro_lab.controllers.feedback import StepFeedback


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

    from gdro_lab.runformat.runlog import decode_state, encode_state

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


# ---------------------------------------------------------------- exclude_extremes (the released 3-bin runs)

class _NaiveExtremes:
    """Reference for exclude_extremes, one prompt at a time from the rule's words: the window (last H
    visits) mean of per-visit pass@k; all 0 or all 1 -> the extra class len(edges) + 1; otherwise the margin
    rule against the previous regular bin, a new prompt or one leaving the extra class binned by its mean."""

    def __init__(self, edges, window, k, delta):
        self.edges, self.window, self.k, self.delta = list(edges), window, k, delta
        self.history: dict[str, list[float]] = {}
        self.bin: dict[str, int] = {}

    def visit(self, pid, n, c):
        values = self.history.setdefault(pid, [])
        values.append(1 - math.comb(n - c, self.k) / math.comb(n, self.k))
        window = values[-self.window:]
        extra = len(self.edges) + 1
        if all(v == 0 for v in window) or all(v == 1 for v in window):
            self.bin[pid] = extra
            return
        mean = sum(window) / len(window)
        raw = sum(mean >= e for e in self.edges)
        prev = self.bin.get(pid, extra)
        if prev == extra:
            self.bin[pid] = raw
        elif raw > prev and mean >= self.edges[prev] + self.delta:
            self.bin[pid] = sum(mean - self.delta >= e for e in self.edges)
        elif raw < prev and mean < self.edges[prev - 1] - self.delta:
            self.bin[pid] = sum(mean + self.delta >= e for e in self.edges)


def test_exclude_extremes_adds_one_class_and_matches_a_naive_reference():
    """The released 3-bin classifier (edges 0.4, 0.75, H 50 shortened to 4, delta 0.03, k 2): 600 random
    visits of 6 prompts, ragged counts 2..8, success odds that put many windows at exactly 0 or 1."""
    cfg = ClassifierConfig(edges=(0.4, 0.75), window=4, k=2, hysteresis=0.03, exclude_extremes=True)
    assert cfg.num_bins == 4 and ClassifierConfig(edges=(0.4, 0.75)).num_bins == 3
    clf = DifficultyClassifier(cfg, seed=0)
    ref = _NaiveExtremes(cfg.edges, 4, 2, 0.03)
    rng = np.random.default_rng(7)
    ids = [f"p{i}" for i in range(6)]
    odds = [0.0, 0.05, 0.5, 0.9, 1.0, 0.7]
    seen_classes = set()
    for _ in range(200):
        pick = list(rng.choice(6, 3, replace=False))
        counts = rng.integers(2, 9, 3)
        succ = [int(rng.binomial(n, odds[i])) for i, n in zip(pick, counts)]
        clf.update(_visit([ids[i] for i in pick], counts, succ))
        for i, n, c in zip(pick, counts, succ):
            ref.visit(ids[i], int(n), c)
        got = clf.bins(ids)
        want = [ref.bin.get(pid, -1) for pid in ids]
        np.testing.assert_array_equal(got, want)
        seen_classes.update(int(b) for b in got)
    assert seen_classes >= {0, 1, 2, 3}  # every regular bin and the extra class were used


def test_exclude_extremes_is_decided_on_exact_values_not_the_running_sum():
    """After visits with fractional pass@k have left the window, the running sum carries rounding (~1e-17);
    a window of only failures is still the extra class (a test on the mean > 0 would call it bin 0)."""
    cfg = ClassifierConfig(edges=(0.4, 0.75), window=3, k=2, hysteresis=0.0, exclude_extremes=True)
    clf = DifficultyClassifier(cfg, seed=0)
    for n, c in [(8, 3), (6, 5), (9, 4)]:
        clf.update(_visit(["x"], [n], [c]))
    for _ in range(3):
        clf.update(_visit(["x"], [4], [0]))
    assert clf._history.sums[0] != 0.0  # the rounding this test is about is there
    assert clf.bins(["x"])[0] == 3


def test_exclude_extremes_state_round_trips_and_a_mismatched_classifier_refuses_it():
    import pytest

    from gdro_lab import ConfigError

    cfg = ClassifierConfig(edges=(0.4, 0.75), window=4, exclude_extremes=True)
    clf = DifficultyClassifier(cfg, seed=0)
    clf.update(_visit(["a", "b"], [4, 4], [0, 1]))
    assert list(clf.bins(["a", "b"])) == [3, 1]
    again = DifficultyClassifier(cfg, seed=1)
    again.load_state_dict(clf.state_dict())
    assert list(again.bins(["a", "b"])) == [3, 1]
    with pytest.raises(ConfigError, match="exclude_extremes"):
        DifficultyClassifier(ClassifierConfig(edges=(0.4, 0.75), window=4), seed=0).load_state_dict(clf.state_dict())
    with pytest.raises(ConfigError, match="exclude_extremes"):
        ClassifierConfig(exclude_extremes="yes")


def test_exclude_extremes_reaches_the_simulator_and_gdro_train_configs(tmp_path):
    """Through their existing classifier plumbing: the simulator (run.num_bins counts the extra class, edges
    split [0, 1] into the rest) runs joint GDRO with it and puts prompts in the extra class; gdro train's
    method config accepts the released 3-bin classifier as 4 bins and names the count when it does not fit."""
    import dataclasses

    import pytest

    from gdro_lab import ConfigError
    from gdro_lab.runformat.runlog import read_run
    from real_runs.config import MethodConfig
    from simulated_run import tiny_config
    from simulators.loop import run_simulation

    config = dataclasses.replace(tiny_config(steps=40), num_bins=4, classifier={"exclude_extremes": True})
    assert np.allclose(config.controller_configs()["classifier"]["edges"], (1 / 3, 2 / 3))
    run = read_run(run_simulation(config, tmp_path / "sim"))
    shares = run.bins["share"]
    assert run.num_bins == 4 and shares.shape[1] == 4 and np.nanmax(shares[:, 3]) > 0
    released = {"edges": [0.4, 0.75], "exclude_extremes": True, "window": 50, "hysteresis": 0.03}
    assert MethodConfig(name="prompt_gdro", num_bins=4, classifier_config=released).controller_configs()[0].num_bins == 4
    with pytest.raises(ConfigError, match=r"2 edges for method.num_bins = 4 \(exclude_extremes adds one class\)"):
        MethodConfig(name="prompt_gdro", num_bins=4, classifier_config={**released, "edges": [0.5]})
