"""The report's tables as rows of text, shared by the CSV files and the HTML report.

    >>> from training.tradeoff.analysis import speedup_table
    >>> header, rows = speedup_rows(speedup_table(records, "cifar_baseline"))
    >>> write_csv(out / "speedups.csv", header, rows)
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from training.tradeoff.analysis import BreakdownRow, SpeedupRow
from training.tradeoff.results import RunRecord

Table = tuple[list[str], list[list[str]]]


def describe_speedup(row: SpeedupRow) -> str:
    """The speedup in words, e.g. "1.90x faster to 85.0%".

    Example:
        >>> row = SpeedupRow("m", "r", 1.0, 0.85, 19.0, 10.0, False, 1.9, (), 1, None)
        >>> describe_speedup(row)
        '1.90x faster to 85.0%'
    """
    target = f"{100 * row.target_top1:.1f}%"
    if row.speedup is None:
        return f"does not reach {target}"
    bound = "≥ " if row.at_most else ""
    if row.speedup >= 1:
        return f"{bound}{row.speedup:.2f}x faster to {target}"
    return f"{bound}{1 / row.speedup:.2f}x slower to {target}"


def _seed_spread(row: SpeedupRow) -> str:
    if row.seeds <= 1 or row.spread is None:
        return "" if row.seeds <= 1 else f"reached by 0 of {row.seeds} seeds"
    reached = "" if len(row.seed_speedups) == row.seeds else f" (reached by {len(row.seed_speedups)} of {row.seeds} seeds)"
    return row.spread.describe("{:.2f}") + "x" + reached


def speedup_rows(rows: Sequence[SpeedupRow]) -> Table:
    """The speedup table: per recipe and baseline budget, the time to the baseline's top-1 and the gain at equal time."""
    header = ["machine", "recipe", "baseline budget", "baseline top-1 (%)", "baseline time (s)",
              "recipe time to that top-1 (s)", "speedup", "speedup over seeds", "top-1 gain at baseline time (pp)"]
    body = []
    for row in rows:
        seconds = "" if row.recipe_seconds is None else f"{'≤ ' if row.at_most else ''}{row.recipe_seconds:.1f}"
        gain = "outside the recipe's measured times" if row.top1_gain is None else f"{100 * row.top1_gain:+.2f}"
        body.append([row.machine, row.recipe, f"x{row.baseline_budget:g}", f"{100 * row.target_top1:.2f}",
                     f"{row.baseline_seconds:.1f}", seconds, describe_speedup(row), _seed_spread(row), gain])
    return header, body


def breakdown_rows(rows: Sequence[BreakdownRow]) -> Table:
    """Milliseconds per step by phase per recipe, with the largest phase named (the one worth attacking)."""
    phases = list(dict.fromkeys(name for row in rows for name in row.ms_per_step))
    header = ["machine", "recipe", *[f"{name} (ms/step)" for name in phases], "total (ms/step)", "largest phase",
              "first epoch (s)", "first epoch share of training time (%)"]
    body = []
    for row in rows:
        largest = max(row.ms_per_step, key=row.ms_per_step.get)
        share = 100 * row.ms_per_step[largest] / max(row.total_ms, 1e-12)
        body.append([row.machine, row.recipe, *[f"{row.ms_per_step.get(name, 0.0):.2f}" for name in phases],
                     f"{row.total_ms:.2f}", f"{largest} ({share:.0f}%)", f"{row.first_epoch_seconds:.1f}",
                     f"{100 * row.first_epoch_share:.0f}"])
    return header, body


def run_rows(records: Sequence[RunRecord]) -> Table:
    """Every run, as in results.csv but rounded for reading."""
    header = ["machine", "recipe", "budget", "seed", "top-1 (%)", "train time (s)", "first epoch (s)", "images/s",
              "steps", "config hash"]
    body = [[r.machine, r.recipe, f"x{r.budget:g}", str(r.seed), f"{100 * r.top1:.2f}", f"{r.train_seconds:.1f}",
             f"{r.first_epoch_seconds:.1f}", f"{r.images_per_second:.0f}", str(r.steps), r.config_hash]
            for r in records]
    return header, body


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """Write one table as CSV."""
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)
