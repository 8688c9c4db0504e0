"""Fixtures shared by the view tests."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import pytest

from apps.views import uicharts


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> dict[str, pd.DataFrame]:
    """Every chart's CSV the page offers, as read back from the bytes a download would give."""
    frames: dict[str, pd.DataFrame] = {}
    original = uicharts.export_button

    def record(charts: Any, name: str, key: str) -> None:
        table = pd.read_csv(io.BytesIO(uicharts.csv_bytes(charts)))
        for title, rows in table.groupby("chart", sort=False):
            frames[str(title)] = rows.reset_index(drop=True)
        original(charts, name, key)

    monkeypatch.setattr(uicharts, "export_button", record)
    return frames
