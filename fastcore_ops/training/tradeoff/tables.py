"""The report's tables as rows of text, shared by the CSV files and the HTML report.

    >>> from fastcore_ops.training.tradeoff.analysis import speedup_table
    >>> from fastcore_ops.training.tradeoff.metric import TOP1
    >>> header, rows = speedup_rows(speedup_table(records, "cifar_baseline"), TOP1)
    >>> write_csv(out / "speedups.csv", header, rows)
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.training.tradeoff.analysis import BaselineGap, BreakdownRow, SpeedupRow, describe_speedup
from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.results import FINISHED, FailedRun, Run, judge

Table = tuple[list[str], list[list[str]]]


def _seed_spread(row: SpeedupRow) -> str:
    if row.seeds <= 1 or row.spread is None:
        return "" if row.seeds <= 1 else f"reached by 0 of {row.seeds} seeds"
    reached = "" if len(row.seed_speedups) == row.seeds else f" (reached by {len(row.seed_speedups)} of {row.seeds} seeds)"
    return row.spread.describe("{:.2f}") + "x" + reached


def speedup_rows(rows: Sequence[SpeedupRow], metric: Metric, gaps: Sequence[BaselineGap] = ()) -> Table:
    """The speedup table: per recipe and baseline budget, the time to the baseline's quality and the gain at equal time.

    metric: the rows' metric, which names the columns (also when there are no rows).
    gaps: baseline budgets whose runs all diverged or failed; each recipe gets a row saying so.
    Example:
        >>> header, _ = speedup_rows([], Metric("eval_loss", False, "validation loss (nats/token)"))
        >>> header[3], header[-1]
        ('baseline validation loss (nats/token)', 'validation loss gain at baseline time (nats/token)')
    """
    strangers = {row.metric for row in rows} - {metric}
    if strangers:
        raise ValueError(f"metric: the rows measure {', '.join(m.describe() for m in strangers)}, not "
                         f"{metric.describe()}; pass the metric the rows were computed in")
    gain_unit = f" ({metric.gain_unit})" if metric.gain_unit else ""
    header = ["machine", "recipe", "baseline budget", f"baseline {metric.label}", "baseline time (s)",
              f"recipe time to that {metric.quantity} (s)", "speedup", "speedup over seeds", "speedup per seed",
              f"{metric.quantity} gain at baseline time{gain_unit}"]
    body = []
    for row in rows:
        seconds = "" if row.recipe_seconds is None else f"{'≤ ' if row.at_most else ''}{row.recipe_seconds:.1f}"
        gain = "outside the recipe's measured times" if row.gain is None else metric.describe_gain(row.gain)
        baseline_time = f"{row.baseline_seconds:.1f}"
        if row.budget_seconds is not None:
            budget = f"x{row.baseline_budget:g}"
            baseline_time += f" (reached sooner by a shorter budget; {budget} took {row.budget_seconds:.1f})"
        body.append([row.machine, row.recipe, f"x{row.baseline_budget:g}", metric.number(row.target, precise=True),
                     baseline_time, seconds, describe_speedup(row), _seed_spread(row),
                     ", ".join(f"{speedup:.2f}x" for speedup in row.seed_speedups), gain])
    for gap in gaps:
        body += [[gap.machine, recipe, f"x{gap.budget:g}", "", "", "", gap.describe(), "", "", ""]
                 for recipe in gap.recipes]
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


def left_out_note(run: FailedRun) -> str:
    """Why a run is left out, with its log.

    Example:
        >>> left_out_note(FailedRun("m", "r", 1.0, 0, "failed", "training exited with code 1", "runs/r/err.log"))
        'training exited with code 1 (log: runs/r/err.log)'
    """
    return f"{run.reason} (log: {run.log})" if run.log else run.reason


def run_rows(runs: Sequence[Run], metric: Metric | None) -> Table:
    """Every run in the order given, as in results.csv but rounded for reading; ``metric`` is the runs' one
    metric (None when no run finished usable). A run left out has its status and why, with its log."""
    header = ["machine", "recipe", "budget", "seed", "status", metric.label if metric else "quality", "precision",
              "train time (s)", "first epoch (s)", "throughput", "evaluation (s)", "steps", "config hash",
              "why left out"]
    body = []
    for run in map(judge, runs):
        cells = [run.machine, run.recipe, f"x{run.budget:g}", str(run.seed)]
        if isinstance(run, FailedRun):
            body.append([*cells, run.status, "", "", "", "", "", "", "", "", left_out_note(run)])
        else:
            body.append([*cells, FINISHED, metric.number(run.quality, precise=True), run.precision or "unrecorded",
                         f"{run.train_seconds:.1f}", f"{run.first_epoch_seconds:.1f}",
                         f"{run.samples_per_second:.0f} {run.sample_unit}/s",
                         f"{run.eval_seconds:.1f}" if run.eval_seconds else "unrecorded",
                         str(run.steps), run.config_hash, ""])
    return header, body


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """Write one table as CSV."""
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)


def markdown_table(header: list[str], rows: list[list[str]], drop: Sequence[str] = ()) -> str:
    """One table as GitHub Markdown (for a README), without the columns named in ``drop``.

    Example:
        >>> print(markdown_table(["machine", "recipe", "speedup"], [["m", "fast", "2.00x"]], drop=["machine"]))
        | recipe | speedup |
        |---|---|
        | fast | 2.00x |
    """
    keep = [index for index, name in enumerate(header) if name not in drop]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells[index].replace("|", "\\|") for index in keep) + " |"

    return "\n".join([line(header), "|" + "---|" * len(keep), *(line(row) for row in rows)])
