"""Pure functions on verl ``DataProto`` batches: what the GDRO plugin does to verl's data.

Stable ids from ``extra_info["index"]``; a row expanded into ``counts_P[i]`` rows executes the plan;
advantages scaled per row by Eq. 16. Departs from the released code: the id is one explicit field (a
missing one is an error), not rebuilt inside a patched trainer. Detail: docs/verl-notes.md#real_runs-verl-batch.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
from verl import DataProto

from gdro_lab.controllers.feedback import StepFeedback
from real_runs.verl import VerlPluginError

ID_KEY = "index"


def prompt_ids(data: DataProto, key: str = ID_KEY) -> list[str]:
    """Stable prompt id of every row, from ``extra_info[key]`` (length len(data))."""
    extra = data.non_tensor_batch.get("extra_info")
    if extra is None:
        raise VerlPluginError("the batch has no extra_info column: write the parquet with "
                              "`python -m real_runs.verl.convert` (extra_info.index = stable prompt id)")
    ids = []
    for row, info in enumerate(extra):
        value = info.get(key) if isinstance(info, Mapping) else None
        if value is None or str(value) == "":
            raise VerlPluginError(f"row {row} has no extra_info.{key}: every prompt needs a stable id "
                                  "(convert the data with `python -m real_runs.verl.convert`)")
        ids.append(str(value))
    return ids


def check_plan(counts_P: Any, num_prompts: int, n_bar: int, n_min: int = 2, num_chosen: int | None = None
               ) -> np.ndarray:
    """Validate a rollout plan: one integer per prompt, each >= n_min, sum exactly P n_bar
    (``num_chosen`` of the P prompts n_bar each when a prompt selector passes over the others)."""
    counts = np.asarray(counts_P)
    if counts.shape != (num_prompts,) or not np.issubdtype(counts.dtype, np.integer):
        raise VerlPluginError(f"rollout plan has shape {counts.shape} and dtype {counts.dtype}: "
                              f"expected {num_prompts} integers, one per prompt")
    if num_prompts and counts.min() < n_min:
        raise VerlPluginError(f"rollout plan gives a prompt {int(counts.min())} rollouts: every prompt "
                              f"needs n_i >= n_min = {n_min} (a GRPO group of one has no baseline)")
    chosen = num_prompts if num_chosen is None else num_chosen
    if int(counts.sum()) != chosen * n_bar:
        raise VerlPluginError(f"rollout plan spends {int(counts.sum())} rollouts, not batch x rollout.n = "
                              f"{chosen} x {n_bar}: verl's equal chunks need the exact budget")
    return counts.astype(np.int64)


def check_executed(ids_P: Sequence[str] | np.ndarray, counts_P: np.ndarray, plan: Mapping[str, int]) -> None:
    """Raise unless the batch holds exactly the planned prompts with the planned rollouts each.

    The plan runs only through verl calling ``repeat`` on the batches the plugin prepared
    (:func:`install_planned_repeat`); should a verl version expand them another way, Rollout-GDRO
    would silently become uniform. This check turns that into a one-line error.
    """
    executed = {str(i): int(n) for i, n in zip(ids_P, counts_P)}
    if len(executed) != len(ids_P):
        raise VerlPluginError("a prompt id appears under two uids in one step: the batch was mixed up")
    if executed == dict(plan):
        return
    wrong = sorted(i for i in set(executed) | set(plan) if executed.get(i) != plan.get(i))
    first = wrong[0]
    raise VerlPluginError(
        f"executed rollouts differ from the Rollout-GDRO plan for {len(wrong)} prompt(s), e.g. {first}: "
        f"planned {plan.get(first, 0)}, executed {executed.get(first, 0)} (total {sum(executed.values())} vs "
        f"{sum(plan.values())}): this verl version no longer expands the batch through DataProto.repeat; "
        "use verl 0.9.1 or set gdro.allocator=uniform")


def expand(data: DataProto, counts_P: Any) -> DataProto:
    """Row i repeated counts_P[i] times, consecutively and in row order (shape R = sum counts_P);
    a row with count 0 (a candidate the prompt selector passed over) is dropped.

    The per-prompt generalisation of ``data.repeat(n, interleave=True)``.
    """
    counts = np.asarray(counts_P, np.int64)
    if counts.shape != (len(data),) or (counts.size and counts.min() < 0):
        raise VerlPluginError(f"expand needs one count >= 0 per row ({len(data)}), got shape {counts.shape}")
    return data.sample_level_repeat(counts)


def install_planned_repeat(data: DataProto, counts_P: np.ndarray, n_bar: int) -> None:
    """Make ``data.repeat(n_bar, interleave=True)`` return :func:`expand` (data, counts_P).

    verl's ``fit`` expands both the generation batch and the prompt batch with
    ``repeat(rollout.n, interleave=True)``; this instance-level override (no verl file is
    touched) lets it run the plan instead. Any other call is refused with a one-line error.
    Rows with count 0 (candidates a prompt selector passed over) are dropped by the expansion.
    """
    counts = np.asarray(counts_P)
    chosen = counts > 0 if counts.shape == (len(data),) else np.ones(len(data), bool)
    counts = check_plan(counts, len(data), n_bar, n_min=0, num_chosen=int(chosen.sum()))

    def planned_repeat(repeat_times: int = 2, interleave: bool = True) -> DataProto:
        if repeat_times != n_bar or not interleave:
            raise VerlPluginError(f"this batch carries a Rollout-GDRO plan and can only be expanded as "
                                  f"repeat({n_bar}, interleave=True), got repeat({repeat_times}, {interleave})")
        return expand(data, counts)

    data.repeat = planned_repeat


def ragged_layout(uid_R: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group rows by uid, prompts in order of first appearance.

    Returns (prompt_index_R, order_R, counts_P): the prompt of each row in the batch's own order,
    a stable permutation that puts each prompt's rows together (prompt 0 first), and rows per prompt.
    """
    uids = np.asarray(uid_R, dtype=object)
    if uids.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    _, first, inverse = np.unique(uids.astype(str), return_index=True, return_inverse=True)
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    prompt_index = rank[inverse.reshape(-1)]
    order = np.argsort(prompt_index, kind="stable")
    return prompt_index, order, np.bincount(prompt_index, minlength=first.size).astype(np.int64)


def response_tokens(data: DataProto) -> np.ndarray:
    """Generated tokens of every row (the sum of its ``response_mask``), float64; zeros without a mask."""
    if "response_mask" not in data.batch.keys():
        return np.zeros(len(data))
    return data.batch["response_mask"].sum(dim=-1).double().cpu().numpy()


def sequence_scores(data: DataProto) -> np.ndarray:
    """Outcome reward of every row: the sum of ``token_level_scores`` (verl's GRPO score), float64."""
    key = "token_level_scores" if "token_level_scores" in data.batch.keys() else "rm_scores"
    if key not in data.batch.keys():
        raise VerlPluginError("the batch has no token_level_scores/rm_scores: call after verl's reward step")
    return data.batch[key].sum(dim=-1).double().cpu().numpy()


def successes(data: DataProto, scores_R: np.ndarray, key: str = "acc") -> np.ndarray:
    """Success flag per row: the reward function's ``acc`` when it returned one, else score > 0."""
    acc = data.non_tensor_batch.get(key)
    values = scores_R if acc is None else np.asarray(acc, dtype=float)
    return np.asarray(values, float) > 0


def feedback_from_batch(data: DataProto, bins_by_id: Mapping[str, int], id_key: str = ID_KEY,
                        ) -> tuple[StepFeedback, np.ndarray]:
    """The step's :class:`StepFeedback` (prompts by uid, rows regrouped) and prompt_index_R.

    Prompts the plan never saw get bin -1 (unassigned). Raises when one uid carries two ids.
    """
    if "uid" not in data.non_tensor_batch:
        raise VerlPluginError("the batch has no uid column: call after verl has grouped rollouts by uid")
    ids_R = prompt_ids(data, id_key)
    prompt_index, order, counts = ragged_layout(data.non_tensor_batch["uid"])
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    ids_P = [ids_R[int(row)] for row in order[starts]]
    if any(ids_R[row] != ids_P[prompt_index[row]] for row in range(len(ids_R))):
        raise VerlPluginError("one uid carries two different extra_info ids: the batch was mixed up "
                              "after expansion (uids and ids must be expanded together)")
    scores = sequence_scores(data)
    feedback = StepFeedback(prompt_ids=ids_P,
                            bins_P=np.array([int(bins_by_id.get(i, -1)) for i in ids_P], np.int64),
                            counts_P=counts, rewards_R=scores[order],
                            successes_R=successes(data, scores)[order])
    return feedback, prompt_index


def scaled_advantages(data: DataProto, multipliers_P: np.ndarray, prompt_index_R: np.ndarray) -> torch.Tensor:
    """advantages_RT * m[prompt of row], in the advantages' dtype (paper Eq. 16)."""
    advantages = data.batch["advantages"]
    m_R = torch.as_tensor(np.asarray(multipliers_P, float)[prompt_index_R], dtype=advantages.dtype,
                          device=advantages.device)
    return advantages * m_R.unsqueeze(-1)



def clip_advantages(data: DataProto, bound: float) -> float:
    """Clip ``advantages`` in place to [-bound, bound] (paper App. A: 5, before Prompt-GDRO's multipliers).

    Returns the fraction of response tokens (``response_mask``; every token without one) whose
    advantage was clipped. With rewards +-1 it binds only in groups of n >= 27 rollouts
    (docs/verl-notes.md#real_runs-verl-batch).
    """
    advantages = data.batch["advantages"]
    over = advantages.abs() > bound
    if "response_mask" in data.batch.keys():
        mask = data.batch["response_mask"].bool()
        frac = float((over & mask).sum()) / max(int(mask.sum()), 1)
    else:
        frac = float(over.float().mean()) if over.numel() else 0.0
    data.batch["advantages"] = advantages.clamp(-bound, bound)
    return frac
