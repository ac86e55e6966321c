"""The report's words: the analysis's findings as sentences and as tables of text, and the files that hold them.

The tables are shared by the CSV and Markdown files written here and the HTML page
(:mod:`fastcore_ops.training.tradeoff.page`).

    >>> from fastcore_ops.training.tradeoff.analysis import analyse
    >>> table = RunTable.of(records)
    >>> text = write_tables(table, analyse(table, "cifar_baseline"), out)
    >>> text.speedups[0][:3], sorted(path.name for path in out.iterdir())
    (['machine', 'recipe', 'baseline budget'], ['breakdown.csv', 'speedups.csv', 'speedups.md'])
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fastcore_ops.training.tradeoff.analysis import BaselineGap, BreakdownRow, Findings, SpeedupRow
from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.results import FINISHED, FailedRun, Run
from fastcore_ops.training.tradeoff.run_table import CurveKey, RunTable

Table = tuple[list[str], list[list[str]]]


def describe_speedup(row: SpeedupRow) -> str:
    """The speedup in words, e.g. "1.90x faster to 85.0% top-1" or "2.00x faster to 1.23 nats/token validation loss".

    Example:
        >>> from fastcore_ops.training.tradeoff.metric import TOP1
        >>> row = SpeedupRow("m", "r", 1.0, 0.85, 19.0, 10.0, False, 1.9, (), 1, None, TOP1)
        >>> describe_speedup(row)
        '1.90x faster to 85.0% top-1'
    """
    target = f"{row.metric.format(row.target)} {row.metric.quantity}"
    if row.speedup is None:
        return f"does not reach {target}"
    if row.speedup >= 1:
        return f"{'≥ ' if row.at_most else ''}{row.speedup:.2f}x faster to {target}"
    # A speedup of at least s is a slowdown of at most 1/s.
    return f"{'≤ ' if row.at_most else ''}{1 / row.speedup:.2f}x slower to {target}"


def verdicts(rows: Sequence[SpeedupRow]) -> dict[CurveKey, str]:
    """A plain sentence per (machine, recipe) saying whether and where it beats the baseline.

    Each ends with the headline: the speedup at the baseline's full budget (x1, else its largest).
    Example:
        >>> from fastcore_ops.training.tradeoff.metric import TOP1
        >>> row = SpeedupRow("m", "slow", 1.0, 0.6, 10.0, None, False, None, (), 1, -0.1, TOP1)
        >>> verdicts([row])[("m", "slow")]
        "does not beat the baseline: it reaches the baseline's top-1 sooner at no budget and is better at none of the baseline's times (at x1: does not reach 60.0% top-1)"
    """
    by_key: dict[CurveKey, list[SpeedupRow]] = defaultdict(list)
    for row in rows:
        by_key[(row.machine, row.recipe)].append(row)
    sentences = {}
    for key, recipe_rows in by_key.items():
        wins = [row for row in recipe_rows if (row.speedup or 0) > 1 or (row.gain or 0) > 0]
        if not wins:
            quantity = recipe_rows[0].metric.quantity
            sentences[key] = (f"does not beat the baseline: it reaches the baseline's {quantity} sooner at no "
                              f"budget and is better at none of the baseline's times")
        elif len(recipe_rows) == 1:
            sentences[key] = "beats the baseline at the one baseline budget measured"
        elif len(wins) == len(recipe_rows):
            sentences[key] = f"beats the baseline at each of the baseline's {len(recipe_rows)} budgets"
        else:
            budgets = ", ".join(f"x{row.baseline_budget:g}" for row in wins)
            sentences[key] = f"beats the baseline only at baseline budget(s) {budgets}; not at the others"
        headline = _headline(recipe_rows)
        sentences[key] += f" (at x{headline.baseline_budget:g}: {describe_speedup(headline)})"
    return sentences


def _headline(rows: Sequence[SpeedupRow]) -> SpeedupRow:
    """The row at the baseline's full budget (x1), the number a reader asks for first; else at its largest budget."""
    return next((row for row in rows if row.baseline_budget == 1.0), max(rows, key=lambda row: row.baseline_budget))



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
        words, spread = describe_speedup(row), _seed_spread(row)
        seconds = "" if row.recipe_seconds is None else f"{'≤ ' if row.at_most else ''}{row.recipe_seconds:.1f}"
        gain = "outside the recipe's measured times" if row.gain is None else metric.describe_gain(row.gain)
        baseline_time = f"{row.baseline_seconds:.1f}"
        if row.budget_seconds is not None:
            budget = f"x{row.baseline_budget:g}"
            baseline_time += f" (reached sooner by a shorter budget; {budget} took {row.budget_seconds:.1f})"
        body.append([row.machine, row.recipe, f"x{row.baseline_budget:g}", metric.number(row.target, precise=True),
                     baseline_time, seconds, words, spread,
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
    """Every run in the order given, as in results.csv but rounded for reading: ``runs`` as the report treats them
    (:attr:`RunTable.runs`), ``metric`` their one metric (None when no run finished usable). A run left out has its
    status and why, with its log."""
    header = ["machine", "recipe", "budget", "seed", "status", metric.label if metric else "quality", "precision",
              "train time (s)", "first epoch (s)", "throughput", "evaluation (s)", "steps", "config hash",
              "why left out"]
    body = []
    for run in runs:
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


def speedups_markdown(table: RunTable, speedups: Table, baseline: str) -> str:
    """The speedup table for a README: one line naming what was measured where, then the table.

    The machine column is dropped when every run shares one machine, which the line names instead.
    """
    metric, records = table.metric, table.records
    machines = sorted({record.machine for record in records})
    recipes = ", ".join(dict.fromkeys(record.recipe for record in records))
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    dropped = f" ({len(table.left_out)} more diverged or failed: see `results.csv`)" if table.left_out else ""
    caption = (f"{len(records)} runs{dropped} of {recipes} on {', '.join(machines)}; baseline {baseline}; "
               f"{metric.label}, {direction}; training time only (from `speedups.csv`).")
    return f"{caption}\n\n{markdown_table(*speedups, drop=['machine'] if len(machines) == 1 else [])}\n"


@dataclass(frozen=True)
class ReportText:
    """The report's words: every run as a table, and with findings the speedup and breakdown tables and a verdict
    per (machine, recipe)."""

    runs: Table
    speedups: Table | None = None
    breakdown: Table | None = None
    verdicts: dict[CurveKey, str] = field(default_factory=dict)


SPEEDUPS_CSV, SPEEDUPS_MD, BREAKDOWN_CSV = "speedups.csv", "speedups.md", "breakdown.csv"


def write_tables(table: RunTable, findings: Findings | None, out: Path) -> ReportText:
    """Put ``table`` and ``findings`` (None: no usable run) in words, and write speedups.csv, speedups.md and
    breakdown.csv of the findings to ``out``."""
    speedups = breakdown = None
    sentences = {}
    if findings is not None:
        speedups = speedup_rows(findings.speedups, table.metric, findings.gaps)
        breakdown = breakdown_rows(findings.breakdown)
        write_csv(out / SPEEDUPS_CSV, *speedups)
        (out / SPEEDUPS_MD).write_text(speedups_markdown(table, speedups, findings.baseline))
        write_csv(out / BREAKDOWN_CSV, *breakdown)
        sentences = verdicts(findings.speedups)
    return ReportText(run_rows(table.runs, table.metric), speedups, breakdown, sentences)
