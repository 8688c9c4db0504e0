"""Evaluation metrics as in the paper's Table 1, with 95% bootstrap intervals (pure functions).

Per prompt i with n_i samples of which c_i are correct:
    mean@k_i = c_i / n_i                      (average accuracy; with n_i = k it is exactly the
                                               paper's mean@k, with n_i > k an unbiased estimate)
    pass@k_i = 1 - C(n_i - c_i, k) / C(n_i, k)  (unbiased, Chen et al. 2021; gdro_lab.functional.estimators)
A benchmark's metric is the mean over its prompts; ``pooled`` the mean over all prompts;
``worst_group`` / ``worst_benchmark`` the minima of the stratum means. Names: ``{bench}/mean@{k}``,
``{bench}/pass@{k}``, ``pooled/...``, ``worst_group/mean@{k}``, ``group/{group}/mean@{k}``, each with
``_lo`` / ``_hi``. Intervals of one-prompt strata are NaN. Departures:
- the worst group uses mean@k, not the code's first-sample pass@1: same expectation, k times less variance;
- intervals (the paper reports none) by a bootstrap over prompts within each (benchmark, group) stratum.
Detail: docs/eval-notes.md#real_runs-eval_metrics.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gdro_lab.functional.estimators import pass_at_k


def per_prompt_scores(successes_R: np.ndarray, counts_P: np.ndarray, k: int) -> np.ndarray:
    """Per-prompt (mean accuracy, unbiased pass@k), shape (P, 2), from flat ragged successes.

    Prompt i owns the next counts_P[i] entries of successes_R (as in :class:`Rollouts`).
    """
    counts = np.asarray(counts_P, np.int64)
    success = np.asarray(successes_R, dtype=np.int64)
    if success.size != counts.sum():
        raise ValueError(f"{success.size} outcomes for sum(counts_P) = {counts.sum()} samples")
    if counts.size and counts.min() < k:
        raise ValueError(f"k={k} is larger than the {counts.min()} samples of some prompt: "
                         "use k <= samples per prompt")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    correct_P = np.add.reduceat(success, starts) if success.size else np.zeros(0, np.int64)
    return np.stack([correct_P / counts, pass_at_k(counts, correct_P, k)], axis=1)


def bootstrap_stratum_sums(values_PM: np.ndarray, strata_P: np.ndarray, num_strata: int,
                           num_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Sums of M per-prompt values per stratum over ``num_boot`` stratified resamples.

    Stratum s (n_s prompts) is resampled n_s times with replacement in every replicate.
    Returns sums_BSM of shape (num_boot, num_strata, M).
    """
    sums = np.zeros((num_boot, num_strata, values_PM.shape[1]))
    for stratum in range(num_strata):
        members = np.flatnonzero(strata_P == stratum)
        draws = rng.integers(0, members.size, size=(num_boot, members.size))
        sums[:, stratum] = values_PM[members[draws]].sum(axis=1)
    return sums


def _strata(benchmarks_P: Sequence[str], groups_P: Sequence[str]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Sorted (benchmark, group) strata and each prompt's stratum index."""
    pairs = list(zip(benchmarks_P, groups_P))
    strata = sorted(set(pairs))
    index = {pair: i for i, pair in enumerate(strata)}
    return strata, np.array([index[p] for p in pairs], dtype=np.int64)


def _group_names(strata: list[tuple[str, str]]) -> list[str]:
    """A group's name is its label, or "bench:label" when two benchmarks share the label."""
    labels = [group for _, group in strata]
    return [g if labels.count(g) == 1 else f"{b}:{g}" for b, g in strata]


def _resampling_strata(strata: list[tuple[str, str]], sizes_S: np.ndarray) -> np.ndarray:
    """Resampling stratum of each (benchmark, group) stratum: its own, except that the one-prompt
    strata of a benchmark share one (see the module docstring). Identity when none has one prompt."""
    index: dict[object, int] = {}
    out = np.empty(len(strata), np.int64)
    for s, (bench, _) in enumerate(strata):
        key: object = s if sizes_S[s] > 1 else ("one-prompt groups", bench)
        out[s] = index.setdefault(key, len(index))
    return out


def _with_interval(out: dict[str, float], name: str, point: float, replicates: np.ndarray,
                   defined: bool = True) -> None:
    """``name`` and its 95% percentile bounds; NaN bounds when the interval rests on one prompt."""
    out[name] = float(point)
    if defined:
        out[f"{name}_lo"], out[f"{name}_hi"] = (float(v) for v in np.percentile(replicates, [2.5, 97.5]))
    else:
        out[f"{name}_lo"] = out[f"{name}_hi"] = float("nan")


def evaluation_metrics(successes_R: np.ndarray, counts_P: np.ndarray, benchmarks_P: Sequence[str],
                       groups_P: Sequence[str], k: int, num_boot: int = 1000,
                       seed: int = 0) -> dict[str, float]:
    """All metrics of one evaluation (see the module docstring for names and formulas)."""
    if len(benchmarks_P) != len(counts_P) or len(groups_P) != len(counts_P):
        raise ValueError("give one benchmark name and one group per prompt")
    if len(counts_P) == 0:
        raise ValueError("no prompts to evaluate")
    values_PM = per_prompt_scores(successes_R, counts_P, k)
    strata, strata_P = _strata(benchmarks_P, groups_P)
    sizes_S = np.bincount(strata_P, minlength=len(strata)).astype(float)
    sums_SM = np.zeros((len(strata), 2))
    np.add.at(sums_SM, strata_P, values_PM)
    resample_S = _resampling_strata(strata, sizes_S)
    boot_BRM = bootstrap_stratum_sums(values_PM, resample_S[strata_P], int(resample_S.max()) + 1, num_boot,
                                      np.random.default_rng(seed))
    bench_of_S = [bench for bench, _ in strata]
    bench_of_R = {int(r): bench for r, bench in zip(resample_S, bench_of_S)}
    benches = sorted(set(bench_of_S))
    group_names = _group_names(strata)

    out: dict[str, float] = {}
    bench_means, bench_boot, bench_sizes = [], [], []
    for bench in benches:
        mask = np.array([b == bench for b in bench_of_S])
        size = sizes_S[mask].sum()
        point = sums_SM[mask].sum(axis=0) / size
        boot = boot_BRM[:, [bench_of_R[r] == bench for r in range(boot_BRM.shape[1])]].sum(axis=1) / size
        _with_interval(out, f"{bench}/mean@{k}", point[0], boot[:, 0], size > 1)
        _with_interval(out, f"{bench}/pass@{k}", point[1], boot[:, 1], size > 1)
        out[f"{bench}/num_prompts"] = float(size)
        bench_means.append(point[0])
        bench_boot.append(boot[:, 0])
        bench_sizes.append(size)
    total = sizes_S.sum()
    _with_interval(out, f"pooled/mean@{k}", sums_SM[:, 0].sum() / total, boot_BRM[:, :, 0].sum(axis=1) / total,
                   total > 1)
    _with_interval(out, f"pooled/pass@{k}", sums_SM[:, 1].sum() / total, boot_BRM[:, :, 1].sum(axis=1) / total,
                   total > 1)
    out["pooled/num_prompts"] = float(total)
    group_means_S = sums_SM[:, 0] / sizes_S
    group_boot_BS = np.where(sizes_S > 1, boot_BRM[:, resample_S, 0] / sizes_S, group_means_S)
    for name, point, boot, size in zip(group_names, group_means_S, group_boot_BS.T, sizes_S):
        _with_interval(out, f"group/{name}/mean@{k}", point, boot, size > 1)
    _with_interval(out, f"worst_group/mean@{k}", group_means_S.min(), group_boot_BS.min(axis=1),
                   sizes_S[int(np.argmin(group_means_S))] > 1)
    _with_interval(out, f"worst_benchmark/mean@{k}", min(bench_means),
                   np.min(np.stack(bench_boot, axis=1), axis=1), bench_sizes[int(np.argmin(bench_means))] > 1)
    return out


def sample_metrics(num_samples: int, tokens: float, truncated: float, reward_timeouts: float,
                   reward_errors: float, seconds: float) -> dict[str, float]:
    """The sample statistics of one evaluation (one definition for ``gdro eval`` and the trainer):

    ``eval/samples`` responses scored; ``eval/mean_response_tokens`` generated tokens per response;
    ``eval/truncated`` the SHARE of responses cut at max_new_tokens; ``eval/reward/timeouts`` and
    ``eval/reward/errors`` COUNTS of responses the reward could not score (each scored -1);
    ``time/eval`` seconds of generation and scoring.
    """
    share = 1.0 / num_samples if num_samples else float("nan")
    return {"eval/samples": float(num_samples), "eval/mean_response_tokens": tokens * share,
            "eval/truncated": truncated * share, "eval/reward/timeouts": float(reward_timeouts),
            "eval/reward/errors": float(reward_errors), "time/eval": float(seconds)}


def worst_names(metrics: dict[str, float], k: int) -> tuple[str, str]:
    """Names of the worst group and the worst benchmark in ``metrics`` (for the printed table)."""
    groups = {n[len("group/"):-len(f"/mean@{k}")]: v for n, v in metrics.items()
              if n.startswith("group/") and n.endswith(f"/mean@{k}")}
    benches = {n[: -len(f"/mean@{k}")]: v for n, v in metrics.items()
               if n.endswith(f"/mean@{k}") and "/" not in n[: -len(f"/mean@{k}")]
               and n.split("/")[0] not in ("pooled", "worst_group", "worst_benchmark")}
    # a producer with other metric names (the LM study's skills) has none of them: "-", never a crash
    return (min(groups, key=groups.__getitem__, default="-"), min(benches, key=benches.__getitem__, default="-"))


def summary_lines(metrics: dict[str, float], step: int) -> list[str]:
    """Two short lines of one evaluation for a log: pooled mean@k with interval, pass@k, prompts, worst
    group and benchmark; then each benchmark's mean@k / pass@k. Metrics without a pooled mean@k give one
    line of names and values.
    """
    pooled = [n for n in metrics if n.startswith("pooled/mean@") and not n.endswith(("_lo", "_hi"))]
    if not pooled:
        return [f"eval at step {step}: " + ", ".join(f"{n} {v:.4g}" for n, v in sorted(metrics.items()))]
    k = int(pooled[0][len("pooled/mean@"):])

    def percent(name: str, bounds: bool = False) -> str:
        lo, hi = metrics.get(f"{name}_lo", float("nan")), metrics.get(f"{name}_hi", float("nan"))
        interval = f" [{100 * lo:.2f}, {100 * hi:.2f}]" if bounds and lo == lo and hi == hi else ""
        return f"{100 * metrics[name]:.2f}%{interval}"

    head = (f"eval at step {step}: pooled mean@{k} {percent(f'pooled/mean@{k}', True)}, pass@{k} "
            f"{percent(f'pooled/pass@{k}')}, {int(metrics['pooled/num_prompts'])} prompts")
    if f"worst_group/mean@{k}" in metrics:
        group, bench = worst_names(metrics, k)
        head += (f"; worst group {group} {percent(f'worst_group/mean@{k}')}, worst benchmark {bench} "
                 f"{percent(f'worst_benchmark/mean@{k}')}")
    benches = [n[:-len("/num_prompts")] for n in metrics if n.endswith("/num_prompts") and n != "pooled/num_prompts"]
    cells = [f"{b} {100 * metrics[f'{b}/mean@{k}']:.2f} / {100 * metrics[f'{b}/pass@{k}']:.2f}" for b in benches]
    return [head] + (["  " + " | ".join(cells) + f"   (mean@{k} / pass@{k}, %)"] if cells else [])


def stats_metrics(stats: dict[str, float], num_samples: int, seconds: float) -> dict[str, float]:
    """:func:`sample_metrics` of :func:`real_runs.eval_scoring.generate_and_score`'s counters."""
    return sample_metrics(num_samples, stats["tokens"], stats["truncated"], stats["reward/timeouts"],
                          stats["reward/errors"], seconds)
