"""The one feedback record every controller's ``update`` takes (uniform signatures).

A loop builds one :class:`StepFeedback` per step after scoring and passes it to the classifier, the
weighter and the allocator. Rollouts are flat and ragged; fields are checked once at construction;
cached per-step statistics are shared arrays: never modify them. Detail:
docs/core-controllers-notes.md#gdro_lab-controllers-feedback.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_float_array, as_int_array, check_bins
from gdro_lab.controllers.prompts import PromptIndex, is_index_array
from gdro_lab.functional.diagnostics import bin_mean
from gdro_lab.functional.grpo import RewardGroups, advantages_from_stats, check_advantage_options, computed_once


@functools.lru_cache(maxsize=16)
def _row_offsets(rows: int, width: int) -> np.ndarray:
    """width * arange(rows)[:, None] (read-only): the slot offset of each row in a 2-D bincount."""
    out = width * np.arange(rows)[:, None]
    out.flags.writeable = False
    return out


def _bins_field(owner: str, values: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """(bins as a 1-D int64 copy, bins + 1, max bin) with every bin >= -1, in one reduction: bins + 1 viewed
    as unsigned wraps a bin below -1 to above 2^63."""
    if not (isinstance(values, np.ndarray) and values.dtype.kind in "iu" and values.ndim == 1):
        values = as_int_array(owner, "bins_P", values, ndim=1)
    bins = values.astype(np.int64)  # a copy, as before: the caller may reuse its array
    shifted = bins + 1
    if not bins.size:
        return bins, shifted, -1
    top = int(np.maximum.reduce(shifted.view(np.uint64)))
    if top >= 2**63:
        check_bins(owner, "bins_P", bins, np.iinfo(np.int64).max)  # its error
    return bins, shifted, top - 1


def _int_field(owner: str, name: str, values: Any, low: int) -> tuple[np.ndarray, int, int]:
    """(1-D int64 array, min, max) with every value >= low; integral floats accepted, as as_int_array."""
    if not (isinstance(values, np.ndarray) and values.dtype.kind in "iu" and values.ndim == 1):
        values = as_int_array(owner, name, values, ndim=1)
    array = values.astype(np.int64)  # a copy, as before: the caller may reuse its array
    if not array.size:
        return array, low, low
    smallest, largest = int(np.minimum.reduce(array)), int(np.maximum.reduce(array))
    if smallest < low:
        if low >= 1:
            as_int_array(owner, name, array, low=low)
        check_bins(owner, name, array, np.iinfo(np.int64).max)
    return array, smallest, largest


@dataclass(frozen=True)
class StepFeedback(RewardGroups):
    """Outcome of one step's rollouts.

    prompt_ids: the prompts, length P: stable string ids, or int indices into ``prompts``.
    bins_P: bin of each prompt used for this step's plan and weights (-1 = unassigned).
    counts_P: rollouts generated per prompt (>= 1).
    rewards_R: reward of each rollout, flat, sum(counts_P) entries.
    successes_R: whether each rollout solved the prompt (bool), same layout.
    losses_R: optional per-rollout loss l_ij (Eq. 6) from a trainer, for the `surrogate` signal.
    variance_G: optional known per-bin variance (simulator oracle; NaN = unknown, e.g. an empty bin),
        used only by oracle allocators.
    prompts: the :class:`~gdro_lab.controllers.prompts.PromptIndex` that int ``prompt_ids`` index (required
        with ints; optional with strings).
    """

    prompt_ids: Sequence[str] | np.ndarray
    bins_P: np.ndarray
    counts_P: np.ndarray
    rewards_R: np.ndarray
    successes_R: np.ndarray
    losses_R: np.ndarray | None = None
    variance_G: np.ndarray | None = None
    prompts: PromptIndex | None = None
    total: int = field(init=False, repr=False, compare=False)
    """sum(counts_P) (set at construction, like the three below)."""
    min_count: int = field(init=False, repr=False, compare=False)
    max_count: int = field(init=False, repr=False, compare=False)
    max_bin: int = field(init=False, repr=False, compare=False)
    _per_bins: dict = field(init=False, repr=False, compare=False)
    _rows: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = "StepFeedback"
        num_prompts = len(self.prompt_ids)
        if num_prompts == 0:
            raise ConfigError(f"{owner}: prompt_ids is empty: a step's feedback must hold at least one prompt")
        if is_index_array(self.prompt_ids):
            if self.prompts is None:
                raise ConfigError(f"{owner}: prompt_ids are integer indices but prompts is None: pass the PromptIndex "
                                  "they index (prompts=...) or string ids")
            object.__setattr__(self, "prompt_ids", self.prompts.check(self.prompt_ids, owner))
        elif self.prompts is not None and not isinstance(self.prompts, PromptIndex):
            raise ConfigError(f"{owner}: prompts is a {type(self.prompts).__name__}: must be a PromptIndex or None")
        bins, shifted, self_max_bin = _bins_field(owner, self.bins_P)
        counts, min_count, max_count = _int_field(owner, "counts_P", self.counts_P, 1)
        if bins.shape != (num_prompts,) or counts.shape != (num_prompts,):
            raise ConfigError(f"{owner}: bins_P {bins.shape} and counts_P {counts.shape} must both "
                              f"have one entry per prompt ({num_prompts}) of prompt_ids")
        total = int(np.add.reduce(counts))
        for name in ("rewards_R", "successes_R", "losses_R"):
            values = getattr(self, name)
            if values is None:
                continue
            if name == "successes_R" and isinstance(values, np.ndarray) and values.dtype == bool:
                array = values  # booleans are finite
            else:
                array = self._float_field(name, values)
            if array.shape != (total,):
                raise ConfigError(f"{owner}: {name} has shape {array.shape}: must be ({total},) = sum(counts_P)")
            if name != "successes_R":
                object.__setattr__(self, name, array)
        successes = np.asarray(self.successes_R)
        if successes.dtype != bool:
            if not ((successes == 0) | (successes == 1)).all():
                raise ConfigError(f"{owner}: successes_R is invalid (values other than 0/1): must be booleans")
            successes = successes.astype(bool)
        if self.variance_G is not None:
            as_float_array(owner, "variance_G", self.variance_G, ndim=1, nonnegative=True, allow_nan=True)
        object.__setattr__(self, "bins_P", (bins))
        object.__setattr__(self, "counts_P", (counts))
        object.__setattr__(self, "successes_R", successes)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "min_count", min_count)
        object.__setattr__(self, "max_count", max_count)
        object.__setattr__(self, "max_bin", self_max_bin)
        object.__setattr__(self, "_per_bins", {})
        object.__setattr__(self, "_rows", {})
        object.__setattr__(self, "_bins_shifted", shifted)  # the computed_once value, already known

    @staticmethod
    def _float_field(name: str, values: Any) -> np.ndarray:
        """Finite float array; on a bad value the checks module words the error."""
        try:
            array = np.asarray(values, dtype=float)
            ok = math.isfinite(np.add.reduce(array, axis=None)) or bool(np.isfinite(array).all())  # a sum overflows
        except (TypeError, ValueError):
            ok = False
        if not ok:
            as_float_array("StepFeedback", name, values)
        return array

    # ------------------------------------------------------------------ prompts and bins

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_ids)

    def index_in(self, prompts: PromptIndex) -> np.ndarray:
        """Each prompt's index in ``prompts`` (int64, shared: do not modify; cached): the feedback's own
        indices when ``prompts`` is the index they come from, else the ids interned into ``prompts``."""
        given = self.prompt_ids
        indices = isinstance(given, np.ndarray) and given.dtype.kind in "iu"
        if indices and prompts is self.prompts:
            return given  # type: ignore[return-value]
        rows = self._rows.get(id(prompts))
        if rows is None:
            ids = self.prompts.ids_of(given) if indices and self.prompts else given  # type: ignore[arg-type]
            rows = self._rows[id(prompts)] = (prompts, prompts.intern(ids))  # type: ignore[arg-type]
        return rows[1]

    def check_num_bins(self, num_bins: int) -> None:
        """Raise a one-line ConfigError when a bin is >= num_bins (the controllers' B)."""
        if self.max_bin >= num_bins:
            check_bins("StepFeedback", "bins_P", self.bins_P, num_bins)

    @computed_once
    def _bins_shifted(self) -> np.ndarray:
        return self.bins_P + 1  # bin -1 (unassigned) -> slot 0, dropped by every per-bin sum

    def bin_count(self, num_bins: int) -> np.ndarray:
        """Assigned prompts per bin (int64, shape (G,); unassigned prompts are not counted)."""
        return self._bin_layout(num_bins)[0]

    def _bin_layout(self, num_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(count_G, count_G > 0, max(count_G, 1)), cached per num_bins (checks bins < num_bins once)."""
        key = ("layout", num_bins)
        out = self._per_bins.get(key)
        if out is None:
            self.check_num_bins(num_bins)
            counts = (np.bincount(self._bins_shifted, minlength=num_bins + 1)[1:])
            out = self._per_bins[key] = (counts, (counts > 0), (np.maximum(counts, 1)))
        return out

    def bin_count_list(self, num_bins: int) -> list[int]:
        """:meth:`bin_count` as a list of ints (cached)."""
        key = ("count_list", num_bins)
        out = self._per_bins.get(key)
        if out is None:
            out = self._per_bins[key] = self.bin_count(num_bins).tolist()
        return out

    def bin_sums(self, values_P: np.ndarray, num_bins: int) -> list[float]:
        """Sum of a per-prompt value within each bin, as a list (the sums :meth:`bin_mean` divides)."""
        self._bin_layout(num_bins)
        return np.bincount(self._bins_shifted, weights=values_P, minlength=num_bins + 1).tolist()[1:]

    def bin_nonempty(self, num_bins: int) -> np.ndarray:
        """Bins with at least one prompt (bool, shape (G,); = bin_share > 0)."""
        return self._bin_layout(num_bins)[1]

    @property
    def num_assigned(self) -> int:
        """Prompts with a bin (>= 0)."""
        return self._num_assigned

    @computed_once
    def _num_assigned(self) -> int:
        return int(np.count_nonzero(self._bins_shifted))

    def bin_share(self, num_bins: int) -> np.ndarray:
        """Realized share q_hat(b) over assigned prompts (zeros if none); = diagnostics.bin_share."""
        key = ("share", num_bins)
        out = self._per_bins.get(key)
        if out is None:
            counts = self.bin_count(num_bins)
            total = self.num_assigned  # = counts.sum()
            out = self._per_bins[key] = (counts / total if total > 0 else counts.astype(float))
        return out

    def bin_mean(self, values_P: np.ndarray, num_bins: int) -> np.ndarray:
        """Mean of a per-prompt value within each bin (NaN where empty); = diagnostics.bin_mean."""
        _, nonempty, denominator = self._bin_layout(num_bins)
        sums = np.bincount(self._bins_shifted, weights=values_P, minlength=num_bins + 1)[1:]
        return np.where(nonempty, sums / denominator, np.nan)

    def bin_means(self, values_KP: np.ndarray, num_bins: int) -> np.ndarray:
        """:meth:`bin_mean` of K per-prompt rows at once, shape (K, G), in one pass (same sums, same order)."""
        _, nonempty, denominator = self._bin_layout(num_bins)
        rows = values_KP.shape[0]
        width = num_bins + 1
        slots = (self._bins_shifted + _row_offsets(rows, width)).ravel()
        sums = np.bincount(slots, weights=values_KP.ravel(), minlength=rows * width).reshape(rows, width)[:, 1:]
        return np.where(nonempty, sums / denominator, np.nan)

    # ------------------------------------------------------------------ per-prompt statistics (cached)

    def successes_P(self) -> np.ndarray:
        """Successes per prompt c_i (int64, a copy; ``_successes_P`` is the shared array)."""
        return self._successes_P.copy()

    @computed_once
    def _successes_P(self) -> np.ndarray:
        return (np.add.reduceat(self.successes_R, self.starts_P, dtype=np.int64))

    @computed_once
    def success_rate_P(self) -> np.ndarray:
        """Mean success per prompt c_i / n_i."""
        return (self._successes_P / self.counts_P)

    @computed_once
    def failure_rate_P(self) -> np.ndarray:
        """1 - c_i / n_i, the ``failure_rate`` signal (computed once for the weighter and the step record)."""
        return 1.0 - self.success_rate_P

    def variance_by_bin(self, num_bins: int, copy: bool = True) -> np.ndarray:
        """Mean within-prompt reward variance (Bessel, unbiased) per bin; NaN for empty bins.

        Prompts with one rollout have no within-prompt variance and are left out of their bin's mean.
        ``copy=False`` returns the cached array (shared: do not modify).
        """
        key = ("var_by_bin", num_bins)
        out = self._per_bins.get(key)
        if out is None:
            self.check_num_bins(num_bins)
            var_P = self.reward_var_P(1)
            if self.min_count > 1:
                out = self.bin_mean(var_P, num_bins)
            else:
                keep = np.isfinite(var_P)
                out = bin_mean(var_P[keep], self.bins_P[keep], num_bins)
            out = self._per_bins[key] = (out)
        return out.copy() if copy else out

    def advantages(self, *, std: str = "population", eps: float = 1e-6, clip: float | None = None,
                   normalize_std: bool = True, singleton: str = "zero") -> tuple[np.ndarray, dict[str, float]]:
        """GRPO advantages of this step's rewards (= gdro_lab.functional.grpo.grpo_advantages, from the cached statistics)."""
        check_advantage_options(std, eps, clip, singleton)
        return advantages_from_stats(self, std, eps, clip, normalize_std, singleton)
