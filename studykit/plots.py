"""Matplotlib helpers shared by the study reports of the simulator and of the real-run studies
(here so that neither imports the other).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from studykit.stats import mean_ci  # noqa: E402

__all__ = ["band", "save_figure"]


def save_figure(fig: Any, path: Path) -> str:
    """Save ``fig`` as a PNG at 110 dpi, close it, and return the file name (for the report's link)."""
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path).name


def band(ax: Any, x: np.ndarray, values_SX: np.ndarray, label: str, color: Any = None) -> None:
    """Seed mean of ``values_SX`` (S x X) with its 95% t-interval as a shaded band."""
    mean, half = mean_ci(values_SX, axis=0)
    line, = ax.plot(x, mean, label=label, color=color, lw=1.4)
    if np.any(np.isfinite(half)):
        ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.2, lw=0)
