"""Optional metric sinks next to steps.jsonl: TensorBoard (torch.utils.tensorboard) and W&B offline.

steps.jsonl stays the source of truth; sinks mirror the scalars, evaluation metrics under ``eval/``
(NaN not sent) and per-bin arrays as TensorBoard histograms ``bins/<name>`` (signed arrays as scalars
``bins/<name>/<b>``). W&B runs offline; a resumed run leaves no duplicates in either. Detail:
docs/train-notes.md#real_runs-sinks.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from gdro_lab._validate import ConfigError


def check_sinks(tensorboard: bool, wandb: bool) -> None:
    """Fail early (before a run directory exists) when an enabled sink's package is missing."""
    import importlib.util
    if tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise ConfigError("log.tensorboard=true needs the tensorboard package: "
                          "pip install tensorboard (or set log.tensorboard=false)")
    if wandb and importlib.util.find_spec("wandb") is None:
        raise ConfigError("log.wandb=true needs the wandb package: pip install wandb (or set log.wandb=false)")


class Sinks:
    """Fan out per-step scalars to the enabled sinks."""

    def __init__(self, run_dir: str | Path, *, tensorboard: bool = False, wandb: bool = False,
                 project: str = "gdro-lab", config: Mapping[str, Any] | None = None, start_step: int = 0,
                 console: bool = True):
        self.run_dir = Path(run_dir)
        self.console = console
        self._tb = None
        self._wandb = None
        self._signed = {"bins/reward"}   # per-bin arrays sent as scalars (signed, or had a negative value)
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise ConfigError("log.tensorboard=true needs the tensorboard package: "
                                  "pip install tensorboard (or set log.tensorboard=false)") from None
            self._tb = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=start_step + 1)
        if wandb:
            try:
                import wandb as wandb_module
            except ImportError:
                raise ConfigError("log.wandb=true needs the wandb package: pip install wandb "
                                  "(or set log.wandb=false)") from None
            self._wandb = wandb_module.init(project=project, dir=str(self.run_dir), mode="offline",
                                            id=self.run_dir.name, name=self.run_dir.name, resume="allow",
                                            config=dict(config or {}))

    def log(self, step: int, scalars: Mapping[str, float],
            per_bin: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> None:
        """Write one step's finite scalars to every enabled sink (and its per-bin arrays to TensorBoard)."""
        if per_bin and self._tb is not None:
            for name, values in per_bin.items():
                self._log_bins(step, f"bins/{name}", np.asarray(values, float))
        finite = {k: float(v) for k, v in scalars.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")}
        if self._tb is not None:
            for name, value in finite.items():
                self._tb.add_scalar(name, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(finite, step=step)

    def _log_bins(self, step: int, tag: str, values_G: np.ndarray) -> None:
        """One per-bin array: a histogram over the bin index, or per-bin scalars once it was signed."""
        assert self._tb is not None
        if tag in self._signed or (values_G < 0).any():
            self._signed.add(tag)
            for b, value in enumerate(values_G):
                if np.isfinite(value):
                    self._tb.add_scalar(f"{tag}/{b}", float(value), step)
            return
        counts_G = np.where(np.isfinite(values_G), values_G, 0.0)
        index_G = np.arange(counts_G.size, dtype=float)
        if counts_G.size == 0 or counts_G.sum() <= 0 or not np.isfinite(counts_G.sum()):
            return  # nothing to draw (every bin empty)
        self._tb.add_histogram_raw(tag, min=-0.5, max=counts_G.size - 0.5, num=float(counts_G.sum()),
                                   sum=float(index_G @ counts_G), sum_squares=float(index_G ** 2 @ counts_G),
                                   bucket_limits=(index_G + 0.5).tolist(), bucket_counts=counts_G.tolist(),
                                   global_step=step)

    def log_eval(self, step: int, metrics: Mapping[str, float]) -> None:
        """Mirror one evaluation record under ``eval/`` and print its summary (see the module docstring)."""
        if self.console:
            from real_runs.eval_metrics import summary_lines
            text = "\n".join(f"gdro train: {line}" for line in summary_lines(dict(metrics), step))
            try:
                from tqdm import tqdm
            except ImportError:
                print(text, file=sys.stderr, flush=True)
            else:  # clears the step progress bar, prints, redraws it (no line glued to the bar)
                tqdm.write(text, file=sys.stderr)
        self.log(step, {name if name.startswith("eval/") else f"eval/{name}": value for name, value in metrics.items()})

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
