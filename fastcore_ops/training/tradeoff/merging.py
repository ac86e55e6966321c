"""``python -m fastcore_ops.training.tradeoff --merge FOLDER...``: the runs in, from several folders' results, as one table.

Each run is kept once (:func:`fastcore_ops.training.tradeoff.results.merge_records`), and ``--judge RECIPE=METRIC``
adds that recipe's finished runs again as a curve of its own, judged by another metric they report.

    >>> from fastcore_ops.training.tradeoff.results import write_results
    >>> write_results(records, out / "laptop")
    >>> table = merged_table([out / "laptop"], ["cifar_mild=eval_loss"])
    >>> len(table.runs), list(table.curves)[-1]
    (12, ('laptop/cpu', 'cifar_mild by eval_loss'))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.training.tradeoff.results import Run, RunRecord, merge_records, read_results
from fastcore_ops.training.tradeoff.run_table import RunTable


def judged_by(runs: Sequence[Run], recipe: str, metric: str) -> list[Run]:
    """``runs`` and, for each finished run of ``recipe``, a copy on a curve of its own, "``recipe`` by ``metric``",
    whose quality is that other metric of the run (``top1_tta``: top-1 with test-time augmentation).

    ValueError when no run is of ``recipe``, or one of its finished runs lacks ``metric``.

    Example:
        >>> mild = RunRecord.made_up("mild", quality=0.80, metrics={"top1_tta": 0.81})
        >>> [(run.recipe, run.quality) for run in judged_by([mild], "mild", "top1_tta")]
        [('mild', 0.8), ('mild by top1_tta', 0.81)]
    """
    if not any(run.recipe == recipe for run in runs):
        recipes = ", ".join(sorted({run.recipe for run in runs}))
        raise ValueError(f"--judge {recipe}={metric}: no run of {recipe!r} among the runs ({recipes})")
    copies = []
    for run in runs:
        if run.recipe != recipe or not isinstance(run, RunRecord):
            continue
        if metric not in run.metrics:
            raise ValueError(f"--judge {recipe}={metric}: run {run.label} reports no {metric!r} (it has "
                             f"{', '.join(run.metrics)}); judge by a metric its runs all report")
        copies.append(dataclasses.replace(run, recipe=f"{recipe} by {metric}",
                                          metrics={**run.metrics, run.metric: run.metrics[metric]}))
    return [*runs, *copies]


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
