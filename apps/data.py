"""Plain pandas views of run directories: what the app's pages and ``gdro report`` plot.

No Streamlit here, so every function is testable on its own. This module gathers the public
names of four cohesive modules, so pages, reports and tests can keep writing ``data.X``:

* :mod:`apps.loading`    finding runs, reading them (:mod:`apps.fastread`), the run cache,
                         one-line errors, status facts and torn-line captions;
* :mod:`apps.curriculum` bins and scalars, traveling-wave heatmaps and snapshots, lead-lag
                         (Eq. 32), long frames;
* :mod:`apps.budget`     rollout budget, budget frontier (Fig. 7-9) and SE proxy (Eq. 33);
* :mod:`apps.results`    outcomes, evaluations, comparisons across runs, flat configs.

Runs are read with ``gdro_lab.runformat.runlog``'s format and the paper's diagnostics (§5: Eq. 32
lead-lag gap, Eq. 33 SE proxy, Fig. 1 tail averages, Fig. 5 snapshots, effective support,
worst group) come from ``gdro_lab.functional.diagnostics``, the same pure functions the producers use.
"""

from __future__ import annotations

from apps.budget import (PAPER_ROLLOUTS, ROLLOUT_KEYS, SE_COLUMNS, BudgetCheck, RolloutSettings, budget_check,
                         prompt_counts, frontier_frame, frontier_split, mean_reduction, rollout_settings, se_frame)
from apps.curriculum import (HEATMAP_MAX_COLUMNS, TAIL_LABEL, TAIL_QUANTILE, bin_labels, bins_at_step, has_bins,
                             has_scalar, heatmap_block, heatmap_frame, lead_lag_frame, reward_field, scalars_long,
                             snapshot_frame, step_index, to_long)
from apps.loading import (RUN_CACHE, SKIPPED_FOLDERS, RunCache, RunEntry, RunLoadError, assigned_counts,
                          discover_runs, eval_tail_torn, find_run_dirs, in_warmup, folder_problem, load_run, mask_unassigned,
                          run_label, run_signature, summary, torn_notes, unassigned_steps, warm_runs)
from apps.results import (COMPARE_DEFAULTS, COMPARE_NEXT, accuracy_metrics, allocator_of, compare_frame, compare_table,
                          config_rows, evals_frame, headline_metrics, is_bound, latest_evals, metric_series, outcomes_frame, pass_at_k_metrics,
                          scalar_names, uniform_weights, with_bounds)

__all__ = [
    "PAPER_ROLLOUTS", "ROLLOUT_KEYS", "SE_COLUMNS", "BudgetCheck", "RolloutSettings", "budget_check", "prompt_counts",
    "frontier_frame", "frontier_split", "mean_reduction", "rollout_settings", "se_frame",
    "HEATMAP_MAX_COLUMNS", "TAIL_LABEL", "TAIL_QUANTILE", "bin_labels", "bins_at_step", "has_bins", "has_scalar",
    "heatmap_block", "heatmap_frame", "lead_lag_frame", "reward_field", "scalars_long", "snapshot_frame",
    "step_index", "to_long",
    "RUN_CACHE", "SKIPPED_FOLDERS", "RunCache", "RunEntry", "RunLoadError", "assigned_counts", "discover_runs",
    "eval_tail_torn", "find_run_dirs", "in_warmup", "folder_problem", "load_run", "mask_unassigned", "run_label",
    "run_signature", "summary", "torn_notes", "unassigned_steps", "warm_runs",
    "COMPARE_DEFAULTS", "COMPARE_NEXT", "accuracy_metrics", "allocator_of", "compare_frame", "compare_table", "config_rows",
    "evals_frame", "headline_metrics", "is_bound", "latest_evals", "metric_series", "outcomes_frame", "pass_at_k_metrics", "scalar_names",
    "uniform_weights", "with_bounds",
]
