"""Optional metric sinks next to steps.jsonl: TensorBoard (torch.utils.tensorboard) and W&B offline.

steps.jsonl (gdro_lab.runlog) stays the source of truth; sinks mirror the scalars for people
who already watch TensorBoard or W&B. W&B runs in offline mode (files under RUN_DIR/wandb, sent
later with ``wandb sync``) so a run never needs the network. A resumed run purges TensorBoard
events after the resumed step and re-attaches to the same W&B run id, so neither shows duplicates.
Evaluation metrics (eval.jsonl) are mirrored too, under ``eval/`` (``math500/mean@8`` ->
``eval/math500/mean@8``; names that already start with ``eval/`` are kept), at the step they
were taken; NaN values (an undefined interval) are not sent. Each evaluation is also printed to
stderr in two short lines (pooled and worst, then each benchmark: ``real_runs.evaluate.summary_lines``;
``console=False`` silences them).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

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

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        """Write one step's finite scalars to every enabled sink."""
        finite = {k: float(v) for k, v in scalars.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")}
        if self._tb is not None:
            for name, value in finite.items():
                self._tb.add_scalar(name, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(finite, step=step)

    def log_eval(self, step: int, metrics: Mapping[str, float]) -> None:
        """Mirror one evaluation record under ``eval/`` and print its summary (see the module docstring)."""
        if self.console:
            from real_runs.evaluate import summary_lines
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
