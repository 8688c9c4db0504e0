"""What RL changed: how often a policy gives the right answer, and how often the demonstrator's slip.

For each model it decodes every held-out problem greedily and counts, per group, the share answered
right and, among problems whose slip (:data:`tasks.SLIPS`) differs from the right answer, the share
answered with the slip. Why: docs/lm-study-notes.md#real_runs-lmstudy-slips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from real_runs.lmstudy import tasks
from real_runs.types import Problem


@torch.no_grad()
def greedy_responses(model: Any, tokenizer: Any, problems: Sequence[Problem], batch_size: int = 500) -> list[str]:
    """The greedy response (special tokens removed, stripped) to each problem, in order."""
    was_training = model.training
    model.eval()
    texts: list[str] = []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start:start + batch_size]
        enc = tokenizer([p.problem for p in chunk], return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=16, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
        texts += [t.strip() for t in tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:],
                                                            skip_special_tokens=True)]
    model.train(was_training)
    return texts


def shares(problems: Sequence[Problem], responses: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per group: ``right`` (share of problems answered ``\\boxed{answer}`` exactly) and ``slip``
    (share answered ``\\boxed{slip}``, over the problems whose slip differs from the answer)."""
    right: dict[str, list[bool]] = {}
    slip: dict[str, list[bool]] = {}
    for p, text in zip(problems, responses, strict=True):
        right.setdefault(p.group, []).append(text == tasks.boxed(p.answer))
        slipped = tasks.slipped_answer(p)
        if slipped != p.answer:
            slip.setdefault(p.group, []).append(text == tasks.boxed(slipped))
    return {g: {"right": float(np.mean(right[g])), "slip": float(np.mean(slip[g])) if slip.get(g) else float("nan")}
            for g in right}


def model_shares(model: Any, tokenizer: Any, problems: Sequence[Problem]) -> dict[str, dict[str, float]]:
    return shares(problems, greedy_responses(model, tokenizer, problems))


def final_checkpoint(run_dir: Path) -> Path:
    """The folder of a run's newest complete checkpoint (its model: ``checkpoint.restore_model``)."""
    from real_runs.checkpoint import checkpoint_steps, step_folder

    steps = checkpoint_steps(run_dir)
    if not steps:
        raise FileNotFoundError(f"{run_dir} has no complete checkpoint: rerun the study to finish it")
    return step_folder(run_dir, steps[-1])


def measure_study(warm_paths: dict[int, Path], runs: dict[str, dict[int, Path]], problems: Sequence[Problem],
                  load: Callable[[Path], tuple[Any, Any]]) -> dict[str, Any]:
    """``{"warm": {seed: shares}, "runs": {method: {seed: shares}}}`` for each seed's warm start and every
    run, on ``problems``. ``load(warm_path)`` gives (model, tokenizer) (the caller's warm-start loader,
    so this module does not import the warm start's); one model per warm start, each run of that
    seed loads its final weights into it in turn."""
    from real_runs.checkpoint import restore_model

    out: dict[str, Any] = {"warm": {}, "runs": {method: {} for method in runs}}
    for seed, warm_path in sorted(warm_paths.items()):
        model, tokenizer = load(warm_path)
        out["warm"][int(seed)] = model_shares(model, tokenizer, problems)
        for method, by_seed in runs.items():
            if seed in by_seed:
                restore_model(model, final_checkpoint(by_seed[seed]))
                out["runs"][method][int(seed)] = model_shares(model, tokenizer, problems)
    return out


def pooled(table: dict[str, dict[str, float]], key: str) -> float:
    """Mean over groups of one share (every group has the same number of held-out problems)."""
    return float(np.nanmean([row[key] for row in table.values()]))


def markdown(measured: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """The report's section: pooled right / slip shares per method (95% t-intervals over seeds) and
    the paired change in slip share against GRPO."""
    from studykit.stats import mean_ci
    from studykit.tables import fmt, markdown_table

    warm = {k: np.array([pooled(t, k) for _, t in sorted(measured["warm"].items())]) for k in ("right", "slip")}
    rows = [["warm starts", fmt(*mean_ci(warm["right"]), 1, 100), fmt(*mean_ci(warm["slip"]), 1, 100), ""]]
    by_method = {m: {k: np.array([pooled(t, k) for _, t in sorted(seeds.items())]) for k in ("right", "slip")}
                 for m, seeds in measured["runs"].items() if seeds}
    for method, values in by_method.items():
        change = ""
        if method != "grpo" and "grpo" in by_method and values["slip"].size == by_method["grpo"]["slip"].size:
            change = fmt(*mean_ci(values["slip"] - by_method["grpo"]["slip"]), 1, 100)
        rows.append([labels.get(method, method), fmt(*mean_ci(values["right"]), 1, 100),
                     fmt(*mean_ci(values["slip"]), 1, 100), change])
    return ["", "## What RL changed: right answers and the demonstrator's slips (greedy, held-out test half)", "",
            "Greedy decoding of every held-out test problem by each seed's warm start and by each run's final checkpoint. "
            "*slip*: share answered with the skill's systematic slip, over the problems where the slip differs "
            "from the right answer (mean over groups). A fall in the slip share is the demonstrator's error "
            "unlearned from the reward alone.", "",
            markdown_table(["model", "right (%)", "slip (%)", "slip − GRPO's (pp, paired)"], rows)]
