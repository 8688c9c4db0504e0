"""Evaluation metrics against hand-computed values, brute force and naive bootstrap loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from real_runs.eval_metrics import (bootstrap_stratum_sums, evaluation_metrics, per_prompt_scores, sample_metrics,
                                    worst_names)


def _brute_pass_at_k(outcomes: list[bool], k: int) -> float:
    """Fraction of all k-subsets of the samples that contain a correct one."""
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_per_prompt_scores_against_brute_force() -> None:
    rng = np.random.default_rng(0)
    counts_P = np.array([4, 6, 5, 8, 4])
    successes_R = rng.random(counts_P.sum()) < 0.4
    scores = per_prompt_scores(successes_R, counts_P, k=3)
    start = 0
    for i, n in enumerate(counts_P):
        own = successes_R[start:start + n].tolist()
        assert scores[i, 0] == pytest.approx(sum(own) / n)
        assert scores[i, 1] == pytest.approx(_brute_pass_at_k(own, 3))
        start += n


def test_per_prompt_scores_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="k=8 is larger than the 4 samples"):
        per_prompt_scores(np.zeros(8, bool), np.array([4, 4]), k=8)
    with pytest.raises(ValueError, match="7 outcomes for sum"):
        per_prompt_scores(np.zeros(7, bool), np.array([4, 4]), k=2)


def test_hand_computed_metrics() -> None:
    # Two benchmarks, k = n = 2. "a": prompts (1/2, 2/2) in groups g1, g2; "b": (0/2, 1/2).
    successes_R = np.array([1, 0, 1, 1, 0, 0, 0, 1], bool)
    counts_P = np.array([2, 2, 2, 2])
    metrics = evaluation_metrics(successes_R, counts_P, ["a", "a", "b", "b"], ["g1", "g2", "b", "b"],
                                 k=2, num_boot=200, seed=1)
    assert metrics["a/mean@2"] == pytest.approx(0.75)
    assert metrics["a/pass@2"] == pytest.approx(1.0)
    assert metrics["b/mean@2"] == pytest.approx(0.25)
    assert metrics["b/pass@2"] == pytest.approx(0.5)
    assert metrics["pooled/mean@2"] == pytest.approx(0.5)
    assert metrics["pooled/pass@2"] == pytest.approx(0.75)
    assert metrics["group/g1/mean@2"] == pytest.approx(0.5)
    assert metrics["group/g2/mean@2"] == pytest.approx(1.0)
    assert metrics["group/b/mean@2"] == pytest.approx(0.25)
    assert metrics["worst_group/mean@2"] == pytest.approx(0.25)
    assert metrics["worst_benchmark/mean@2"] == pytest.approx(0.25)
    assert metrics["a/num_prompts"] == 2 and metrics["pooled/num_prompts"] == 4
    # A one-prompt group has no interval (it would be zero-width: the prompt resamples to itself);
    # benchmark "a" is two one-prompt groups, resampled together: its interval has width.
    for group in ("g1", "g2"):
        assert np.isnan(metrics[f"group/{group}/mean@2_lo"]) and np.isnan(metrics[f"group/{group}/mean@2_hi"])
    assert 0.5 <= metrics["a/mean@2_lo"] < 0.75 < metrics["a/mean@2_hi"] <= 1.0
    assert 0.0 <= metrics["b/mean@2_lo"] <= 0.25 <= metrics["b/mean@2_hi"] <= 0.5
    assert worst_names(metrics, 2) == ("b", "b")
    for name in [n for n in metrics if n.endswith("_lo") and not np.isnan(metrics[n])]:
        assert metrics[name] <= metrics[name[:-3]] + 1e-12 or "worst" in name
        assert metrics[name] <= metrics[name[:-3] + "_hi"]


def test_one_prompt_intervals_are_undefined_and_the_rest_unchanged() -> None:
    """NaN for every metric of one prompt; a worst group of one prompt has no interval; strata of
    several prompts get exactly the draws they got before one-prompt groups were pooled."""
    one = evaluation_metrics(np.array([1, 0], bool), np.array([2]), ["a"], ["g"], k=1, num_boot=50)
    for name in ("a/mean@1", "a/pass@1", "pooled/mean@1", "group/g/mean@1", "worst_group/mean@1",
                 "worst_benchmark/mean@1"):
        assert one[name] == 0.5 and np.isnan(one[f"{name}_lo"]) and np.isnan(one[f"{name}_hi"]), name
    rng = np.random.default_rng(2)
    successes_R = rng.random(40) < 0.5
    groups = ["big"] * 9 + ["lone"]
    mixed = evaluation_metrics(successes_R, np.full(10, 4), ["m"] * 10, groups, k=2, num_boot=200, seed=4)
    lone = successes_R[36:].mean()
    if lone < mixed["group/big/mean@2"]:
        assert np.isnan(mixed["worst_group/mean@2_lo"])
    # the 9-prompt stratum is resampled alone, with the same generator draws as on its own
    alone = evaluation_metrics(successes_R[:36], np.full(9, 4), ["m"] * 9, ["big"] * 9, k=2, num_boot=200, seed=4)
    assert mixed["group/big/mean@2_lo"] == alone["group/big/mean@2_lo"]
    assert mixed["group/big/mean@2_hi"] == alone["group/big/mean@2_hi"]


def test_sample_metrics_are_shares_and_counts() -> None:
    stats = sample_metrics(num_samples=8, tokens=40.0, truncated=2.0, reward_timeouts=1.0, reward_errors=0.0,
                           seconds=3.5)
    assert stats == {"eval/samples": 8.0, "eval/mean_response_tokens": 5.0, "eval/truncated": 0.25,
                     "eval/reward/timeouts": 1.0, "eval/reward/errors": 0.0, "time/eval": 3.5}


def test_shared_group_labels_are_prefixed_by_benchmark() -> None:
    metrics = evaluation_metrics(np.ones(4, bool), np.array([2, 2]), ["x", "y"], ["algebra:L3"] * 2, k=1,
                                 num_boot=10)
    assert "group/x:algebra:L3/mean@1" in metrics and "group/y:algebra:L3/mean@1" in metrics


def test_bootstrap_matches_a_naive_loop() -> None:
    rng_data = np.random.default_rng(3)
    values_PM = rng_data.random((30, 2))
    strata_P = rng_data.integers(0, 3, size=30)
    fast = bootstrap_stratum_sums(values_PM, strata_P, 3, 50, np.random.default_rng(9))
    # Naive: the same draws (one (B, n_s) block per stratum, in stratum order), summed in loops.
    rng = np.random.default_rng(9)
    naive = np.zeros_like(fast)
    for stratum in range(3):
        members = [i for i in range(30) if strata_P[i] == stratum]
        draws = rng.integers(0, len(members), size=(50, len(members)))
        for b in range(50):
            for d in draws[b]:
                naive[b, stratum] += values_PM[members[d]]
    np.testing.assert_allclose(fast, naive)


def test_bootstrap_interval_coverage() -> None:
    """Over 200 simulated evaluations the 95% interval of mean@k covers the truth ~95% of times."""
    rng = np.random.default_rng(11)
    covered = 0
    trials = 200
    p_P = rng.beta(1, 2, size=60)
    truth = p_P.mean()  # expected mean@k of this fixed prompt set
    for trial in range(trials):
        counts_P = np.full(60, 8)
        successes_R = rng.random(480) < np.repeat(p_P, 8)
        metrics = evaluation_metrics(successes_R, counts_P, ["m"] * 60, ["m"] * 60, k=8,
                                     num_boot=300, seed=trial)
        covered += metrics["m/mean@8_lo"] <= truth <= metrics["m/mean@8_hi"]
    # Resampling prompts also covers prompt-to-prompt spread, so coverage is conservative here.
    assert 0.88 <= covered / trials <= 1.0


def test_worst_group_interval_brackets_the_minimum() -> None:
    rng = np.random.default_rng(5)
    groups = [f"g{i % 4}" for i in range(80)]
    p_P = np.array([0.2, 0.5, 0.6, 0.8])[[i % 4 for i in range(80)]]
    successes_R = rng.random(80 * 4) < np.repeat(p_P, 4)
    metrics = evaluation_metrics(successes_R, np.full(80, 4), ["m"] * 80, groups, k=4, num_boot=500)
    direct = min(np.mean(successes_R.reshape(80, 4)[[i for i in range(80) if i % 4 == g]]) for g in range(4))
    assert metrics["worst_group/mean@4"] == pytest.approx(direct)
    assert metrics["worst_group/mean@4_lo"] < direct < metrics["worst_group/mean@4_hi"]
    assert worst_names(metrics, 4)[0] == "g0"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_metric_invariants(data) -> None:
    """pooled = size-weighted mean of benchmarks; worst <= every member; lo <= hi; pass@k >= mean@k."""
    num = data.draw(st.integers(2, 25))
    k = data.draw(st.integers(1, 3))
    counts_P = np.array(data.draw(st.lists(st.integers(k, 5), min_size=num, max_size=num)))
    successes_R = np.array(data.draw(st.lists(st.booleans(), min_size=int(counts_P.sum()),
                                              max_size=int(counts_P.sum()))))
    benches = data.draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=num, max_size=num))
    groups = [f"{b}{data.draw(st.integers(0, 2))}" for b in benches]
    m = evaluation_metrics(successes_R, counts_P, benches, groups, k, num_boot=50, seed=1)
    names = sorted(set(benches))
    sizes = {b: benches.count(b) for b in names}
    pooled = sum(m[f"{b}/mean@{k}"] * sizes[b] for b in names) / num
    assert m[f"pooled/mean@{k}"] == pytest.approx(pooled)
    assert m[f"worst_benchmark/mean@{k}"] == pytest.approx(min(m[f"{b}/mean@{k}"] for b in names))
    group_values = [v for n, v in m.items() if n.startswith("group/") and n.endswith(f"/mean@{k}")]
    assert len(group_values) == len(set(groups))
    assert m[f"worst_group/mean@{k}"] == pytest.approx(min(group_values))
    for b in names + ["pooled"]:
        assert m[f"{b}/pass@{k}"] >= m[f"{b}/mean@{k}"] - 1e-12
    for name in [n for n in m if n.endswith("_lo")]:
        lo, hi = m[name], m[name[:-3] + "_hi"]
        assert np.isnan(lo) == np.isnan(hi)
        assert np.isnan(lo) or lo <= hi + 1e-12
    single = {g for g in set(groups) if groups.count(g) == 1}
    for name in [n for n in m if n.startswith("group/") and n.endswith(f"/mean@{k}_lo")]:
        assert np.isnan(m[name]) == (name[len("group/"):-len(f"/mean@{k}_lo")] in single)


def _grouped_data(seed: int, one_prompt_groups: bool = True):
    """Two benchmarks, groups of 2-12 prompts at success rates from 0.05 to 0.95 (and, optionally,
    two one-prompt groups), 4 samples each: (successes_R, counts_P, benchmarks_P, groups_P)."""
    rng = np.random.default_rng(seed)
    benchmarks, groups, rates = [], [], []
    for g, (bench, rate) in enumerate(zip("aabbab", (0.05, 0.3, 0.5, 0.7, 0.95, 0.6))):
        size = int(rng.integers(2, 13))
        benchmarks += [f"bench_{bench}"] * size
        groups += [f"g{g}"] * size
        rates += [rate] * size
    if one_prompt_groups:
        benchmarks += ["bench_a", "bench_b"]
        groups += ["lone_a", "lone_b"]
        rates += [0.5, 0.9]
    counts_P = np.full(len(groups), 4)
    successes_R = rng.random(4 * len(groups)) < np.repeat(rates, 4)
    return successes_R, counts_P, benchmarks, groups


@pytest.mark.parametrize("seed", range(6))
def test_worst_interval_never_lies_above_any_group_or_benchmark(seed: int) -> None:
    """In every bootstrap replicate the worst group's mean is the minimum over the groups, so it lies
    below each group's replicate: the worst group's bounds can exceed no group's bounds (a one-prompt
    group enters at its observed value, so no bound can exceed that value); the same for benchmarks.
    An interval taken over the wrong axis (minima over replicates, percentiles over groups) breaks this."""
    successes_R, counts_P, benchmarks, groups = _grouped_data(seed)
    m = evaluation_metrics(successes_R, counts_P, benchmarks, groups, k=4, num_boot=400, seed=seed)
    lo, hi = m["worst_group/mean@4_lo"], m["worst_group/mean@4_hi"]
    assert np.isfinite(lo) and lo <= hi
    for group in sorted(set(groups)):
        name = f"group/{group}/mean@4"
        if groups.count(group) == 1:
            assert np.isnan(m[name + "_hi"]) and hi <= m[name] + 1e-12
        else:
            assert hi <= m[name + "_hi"] + 1e-12 and lo <= m[name + "_lo"] + 1e-12, group
    for bench in sorted(set(benchmarks)):
        assert m["worst_benchmark/mean@4_hi"] <= m[f"{bench}/mean@4_hi"] + 1e-12
        assert m["worst_benchmark/mean@4_lo"] <= m[f"{bench}/mean@4_lo"] + 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_worst_group_interval_matches_a_naive_bootstrap(seed: int) -> None:
    """The worst group's 95% interval against a loop written out: per replicate, resample each
    (benchmark, group) stratum's prompts with replacement (the same generator and draw order as
    ``bootstrap_stratum_sums``: strata in sorted order, one (num_boot, n_s) block each), take each
    group's mean accuracy, keep the smallest; then the 2.5 and 97.5 percentiles over replicates."""
    successes_R, counts_P, benchmarks, groups = _grouped_data(seed, one_prompt_groups=False)
    num_boot = 200
    m = evaluation_metrics(successes_R, counts_P, benchmarks, groups, k=4, num_boot=num_boot, seed=seed)
    accuracy_P = successes_R.reshape(-1, 4).mean(axis=1)
    strata = sorted(set(zip(benchmarks, groups)))
    rng = np.random.default_rng(seed)
    draws = {}
    for stratum in strata:
        members = [i for i, pair in enumerate(zip(benchmarks, groups)) if pair == stratum]
        draws[stratum] = (members, rng.integers(0, len(members), size=(num_boot, len(members))))
    worst = []
    for b in range(num_boot):
        means = []
        for stratum in strata:
            members, picks = draws[stratum]
            means.append(sum(accuracy_P[members[j]] for j in picks[b]) / len(members))
        worst.append(min(means))
    expected = np.percentile(worst, [2.5, 97.5])
    np.testing.assert_allclose([m["worst_group/mean@4_lo"], m["worst_group/mean@4_hi"]], expected, atol=1e-12)
    assert m["worst_group/mean@4"] == pytest.approx(min(
        accuracy_P[[i for i, g in enumerate(groups) if g == group]].mean() for group in set(groups)))


def test_summary_lines_name_pooled_worst_and_every_benchmark() -> None:
    from real_runs.eval_metrics import summary_lines
    successes_R, counts_P, benchmarks, groups = _grouped_data(1)
    m = evaluation_metrics(successes_R, counts_P, benchmarks, groups, k=4, num_boot=100, seed=1)
    head, cells = summary_lines(m, 6)
    assert head == (f"eval at step 6: pooled mean@4 {100 * m['pooled/mean@4']:.2f}% [{100 * m['pooled/mean@4_lo']:.2f}, "
                    f"{100 * m['pooled/mean@4_hi']:.2f}], pass@4 {100 * m['pooled/pass@4']:.2f}%, "
                    f"{len(groups)} prompts; worst group g0 {100 * m['worst_group/mean@4']:.2f}%, worst benchmark "
                    f"{worst_names(m, 4)[1]} {100 * m['worst_benchmark/mean@4']:.2f}%")
    assert cells == (f"  bench_a {100 * m['bench_a/mean@4']:.2f} / {100 * m['bench_a/pass@4']:.2f} | bench_b "
                     f"{100 * m['bench_b/mean@4']:.2f} / {100 * m['bench_b/pass@4']:.2f}   (mean@4 / pass@4, %)")
    one = evaluation_metrics(np.array([True, False]), np.array([2]), ["m"], ["g"], k=2, num_boot=10)
    assert summary_lines(one, 3)[0].startswith("eval at step 3: pooled mean@2 50.00%, pass@2 100.00%, 1 prompts")
    assert summary_lines({"loss": 0.5}, 2) == ["eval at step 2: loss 0.5"]


def test_the_trainer_sinks_print_each_evaluation(tmp_path, capsys) -> None:
    """The trainer logs each evaluation through ``Sinks.log_eval``: it now prints the summary to
    stderr (before, only timings were printed); ``console=False`` keeps it quiet."""
    from real_runs.eval_metrics import summary_lines
    from real_runs.sinks import Sinks
    successes_R, counts_P, benchmarks, groups = _grouped_data(2)
    m = evaluation_metrics(successes_R, counts_P, benchmarks, groups, k=4, num_boot=100, seed=1)
    sinks = Sinks(tmp_path)
    sinks.log_eval(50, m)
    sinks.close()
    err = capsys.readouterr().err
    assert err == "".join(f"gdro train: {line}\n" for line in summary_lines(m, 50))
    quiet = Sinks(tmp_path, console=False)
    quiet.log_eval(50, m)
    assert capsys.readouterr().err == ""


def test_summary_lines_never_fail_on_metrics_without_group_or_benchmark_names():
    """The LM study logs a worst group under other names: the printed line says "-" for what it cannot
    name (it crashed the quick LM arena once: printing must never stop a run)."""
    from real_runs.eval_metrics import summary_lines

    metrics = {"pooled/mean@2": 0.5, "pooled/pass@2": 0.75, "pooled/num_prompts": 4.0,
               "worst_group/mean@2": 0.25, "worst_benchmark/mean@2": 0.25, "skill/add/mean@2": 0.25}
    head = summary_lines(metrics, 3)[0]
    assert "worst group - 25.00%" in head and "worst benchmark - 25.00%" in head
