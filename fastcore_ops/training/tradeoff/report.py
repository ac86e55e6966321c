"""The report stage of every mode: runs in, one table of them, its analysis, and the files that say what it found.

A sweep's runs, a merge's or a cost pass's priced runs pass through the same four steps, each in its own module:
the table (:mod:`~fastcore_ops.training.tradeoff.run_table`), the analysis
(:mod:`~fastcore_ops.training.tradeoff.analysis`), the words and tables (:mod:`~fastcore_ops.training.tradeoff.tables`)
with the figures (:mod:`~fastcore_ops.training.tradeoff.plots`), and the page
(:mod:`~fastcore_ops.training.tradeoff.page`).

    >>> outputs = build_report(records, out, baseline="cifar_baseline")
    >>> sorted(path.name for path in outputs)
    ['breakdown.csv', 'breakdown.png', 'pareto.png', 'report.html', 'results.csv', 'results.json', 'speedups.csv',
     'speedups.md']
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.training.tradeoff.analysis import analyse
from fastcore_ops.training.tradeoff.page import write_page
from fastcore_ops.training.tradeoff.plots import plot_report
from fastcore_ops.training.tradeoff.results import RESULTS_CSV, RESULTS_JSON, Run, write_results
from fastcore_ops.training.tradeoff.run_table import RunTable
from fastcore_ops.training.tradeoff.tables import BREAKDOWN_CSV, SPEEDUPS_CSV, SPEEDUPS_MD, write_tables


def build_report(runs: Sequence[Run], out: Path, baseline: str, sections: Sequence[str] = ()) -> list[Path]:
    """Write results.{csv,json}, speedups.{csv,md}, breakdown.csv, pareto.png, breakdown.png and report.html to ``out``.

    runs: finished runs and runs left out (FailedRun, or records that diverged: see ``judge``). Every run
        is listed with its status; the curves, speedups and figures hold the usable ones, and with none
        usable only results.{csv,json} and report.html are written.
    baseline: the recipe the others are measured against (on each machine separately).
    sections: HTML sections of the caller's own, shown first (the ablation's table of effects).
    Returns the paths written. Raises ValueError, before writing anything, when the usable runs do
    not share one metric.
    """
    if not runs:
        raise ValueError("runs must hold at least one run, got none")
    table = RunTable.of(runs)
    findings = analyse(table, baseline) if table.records else None
    out.mkdir(parents=True, exist_ok=True)
    write_results(table.runs, out)
    text = write_tables(table, findings, out)
    files = []
    if findings is not None:
        files = [out / name for name in (SPEEDUPS_CSV, SPEEDUPS_MD, BREAKDOWN_CSV)]
        files += plot_report(table, findings, out)
    page = write_page(table, findings, text, out, baseline, sections)
    return [out / RESULTS_JSON, out / RESULTS_CSV, *files, page]
