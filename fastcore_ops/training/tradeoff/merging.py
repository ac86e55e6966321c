"""``python -m fastcore_ops.training.tradeoff --merge FOLDER...``: several folders' runs in, as one table, and its report
out (:func:`merge_command`).

Each run is kept once (:func:`fastcore_ops.training.tradeoff.results.merge_records`), and ``--judge RECIPE=METRIC``
adds that recipe's finished runs again as a curve of its own, judged by another metric they report
(:func:`fastcore_ops.training.tradeoff.results.judged_by`).

    >>> from fastcore_ops.training.tradeoff.results import write_results
    >>> write_results(records, out / "laptop")
    >>> table = merged_table([out / "laptop"], ["cifar_mild=eval_loss"])
    >>> len(table.runs), list(table.curves)[-1]
    (12, ('laptop/cpu', 'cifar_mild by eval_loss'))
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.cli import refuse
from fastcore_ops.training.tradeoff.options import choose_baseline, claim_out
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import judged_by, merge_records, read_results
from fastcore_ops.training.tradeoff.run_table import RunTable


def merged_table(folders: Sequence[Path], judges: Sequence[str] = ()) -> RunTable:
    """The runs of every folder's ``results.json``, each once (:func:`merge_records`), plus each ``RECIPE=METRIC``
    of ``judges`` as a curve of its own (:func:`judged_by`), as one table; ValueError when there is no run, a judge is
    not of that form, or the finished runs do not share one metric.
    """
    runs = merge_records(read_results(folder) for folder in folders)
    if not runs:
        raise ValueError(f"--merge {' '.join(map(str, folders))}: the folders hold no runs")
    for judge in judges:
        recipe, separator, metric = judge.partition("=")
        if not (separator and recipe and metric):
            raise ValueError(f"--judge expects RECIPE=METRIC (cifar_mild=top1_tta), got {judge!r}")
        runs = judged_by(runs, recipe, metric)
    return RunTable.of(runs)


def merge_command(args: argparse.Namespace) -> int:
    """``--merge FOLDER...`` of a parsed command line: the folders' runs as one table (:func:`merged_table`), then its
    report in ``--out``; the exit code (2 with one ``error:`` line, nothing written, when an input cannot work)."""
    try:
        table = merged_table(args.merge, args.judge)
        baseline = choose_baseline(args.baseline, list(dict.fromkeys(run.recipe for run in table.runs)))
        claim_out(args.out, "tradeoff")  # the last check: it marks --out
    except (ValueError, OSError) as error:
        return refuse(error)
    written = build_report(table.runs, args.out, baseline)
    print(f"report: {written[-1]} ({len(table.runs)} runs; tables and figures next to it)")
    return 0
