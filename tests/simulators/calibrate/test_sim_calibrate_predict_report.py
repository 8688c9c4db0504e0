"""What `gdro predict` prints: the screen's and report.md's intervals are the widened ones, and report.md's
verdict column judges each method against tuned GRPO, read from the tables as a user reads them."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from simulators.calibrate import predict
from simulators.calibrate.predict_report import screen, verdict, write_report

SETTINGS = predict.Settings(draws=20, seeds=2, steps=10, batch=8, lr_scale=1.0, optimizer="sgd", workers=1,
                            out=Path("unused"), threshold=0.05)
GAIN = np.linspace(0.02, 0.04, 20)   # over GRPO at the planned lr; tuned GRPO ends 10 pp higher


def summary_of(prediction_table) -> dict:
    return predict.summarize(prediction_table(GAIN, 0.1), 20, [], threshold=SETTINGS.threshold)


def by_hand(values: np.ndarray) -> tuple[str, str]:
    """(widened, central) '+m [+lo, +hi]' in pp: the median and the central 95% of the worlds (order statistics,
    independent of predict: 20 worlds put no world outside either end), that interval widened x WIDENING."""
    v = np.sort(values)
    median, lo, hi = float(np.median(v)), float(v[0]), float(v[-1])
    wide = (median - predict.WIDENING * (median - lo), median + predict.WIDENING * (hi - median))
    return tuple(f"{100 * median:+.1f} [{100 * a:+.1f}, {100 * b:+.1f}]" for a, b in (wide, (lo, hi)))


def test_the_screen_prints_the_widened_interval(prediction_table) -> None:
    summary = summary_of(prediction_table)
    text = screen(summary, SETTINGS, SimpleNamespace(fit=None), 1.0)
    wide_grpo, central_grpo = by_hand(GAIN)
    wide_tuned, central_tuned = by_hand(GAIN - 0.1)
    assert wide_grpo != central_grpo and wide_tuned != central_tuned
    rows = [line for line in text.splitlines() if line.startswith("  Prompt-GDRO ") and "[" in line]
    assert len(rows) == 1 and wide_grpo in rows[0] and wide_tuned in rows[0]
    assert central_grpo not in text and central_tuned not in text


def table_rows(report: str, heading: str) -> dict[str, list[str]]:
    """The markdown table under ``heading``: method -> its cells."""
    rows = report.split(f"## {heading} (pp)\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["method", "vs GRPO at the planned lr", "> 0 / < 0", "vs tuned GRPO", "> 0 / < 0",
                      "verdict vs tuned GRPO"]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]
    return {row[0]: row[1:] for row in cells}


def test_report_md_tables_show_widened_intervals_and_the_verdict_vs_tuned_grpo(prediction_table,
                                                                               tmp_path: Path) -> None:
    """Every method beats GRPO at the planned lr by 2..4 pp (within the 5 pp threshold) and trails tuned GRPO by
    6..8 pp: its verdict vs tuned GRPO is 'worse by more than 5 pp in 20 of 20', not the within-threshold verdict
    it has against GRPO at the planned lr."""
    summary = summary_of(prediction_table)
    path = write_report(summary, SETTINGS, "screen", tmp_path)
    report = path.read_text(encoding="utf-8")
    wide_grpo, central_grpo = by_hand(GAIN)
    wide_tuned, _ = by_hand(GAIN - 0.1)
    worse = "worse by more than 5 pp in 20 of 20 worlds the data allow"
    assert verdict(summary["methods"]["joint"]["test/accuracy"]["vs_grpo"], 0.05).startswith("within ±5 pp")
    for metric, heading in predict.METRICS:
        rows = table_rows(report, heading)
        assert set(rows) == {predict.LABELS[m] for m in summary["methods"]}
        for cells in rows.values():
            assert cells == [wide_grpo, "20/0", wide_tuned, "0/20", worse], (heading, cells)
    assert central_grpo not in report
    assert math.isclose(summary["threshold"], 0.05)
