"""The table a report is made from: every run judged once, the usable ones grouped into curves, and their one metric.

Each mode of the tradeoff tool hands its runs on as one table (a sweep's runs, a merge's, a cost pass's runs
priced on one machine); the analysis (:func:`fastcore_ops.training.tradeoff.analysis.analyse`) and the report
(:func:`fastcore_ops.training.tradeoff.report.build_report`) read only the table.

    >>> table = RunTable.of(records)
    >>> table.metric.name, list(table.curves)
    ('top1', [('laptop/cpu', 'cifar_baseline'), ('laptop/cpu', 'cifar_mild')])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.results import FailedRun, Run, RunRecord, common_metric, judge

CurveKey = tuple[str, str]  # (machine, recipe): times from different machines never share a curve


@dataclass(frozen=True)
class RunTable:
    """The runs of one report.

    runs: every run as the report treats it (:func:`fastcore_ops.training.tradeoff.results.judge`), in the order given.
    records, left_out: the usable runs, and the runs left out of curves, speedups and figures, each in that order.
    metric: the usable runs' one metric; None when no run is usable.
    curves: the usable runs by (machine, recipe), then by budget: keys in first-seen order, budgets sorted.
    """

    runs: list[Run]
    records: list[RunRecord]
    left_out: list[FailedRun]
    metric: Metric | None
    curves: dict[CurveKey, dict[float, list[RunRecord]]]

    @classmethod
    def of(cls, runs: Iterable[Run]) -> RunTable:
        """The table of ``runs``; ValueError when the usable ones do not share one metric.

            >>> RunTable.of([RunRecord.made_up(), FailedRun("m", "r", 2.0, 0, "failed", "exit 1")]).left_out[0].budget
            2.0
        """
        judged = [judge(run) for run in runs]
        records = [run for run in judged if isinstance(run, RunRecord)]
        curves: dict[CurveKey, dict[float, list[RunRecord]]] = {}
        for record in records:
            curves.setdefault((record.machine, record.recipe), defaultdict(list))[record.budget].append(record)
        return cls(judged, records, [run for run in judged if isinstance(run, FailedRun)],
                   common_metric(records) if records else None,
                   {key: dict(sorted(by_budget.items())) for key, by_budget in curves.items()})

    @property
    def machines(self) -> list[str]:
        """The machines of the usable runs, in first-seen order."""
        return list(dict.fromkeys(machine for machine, _ in self.curves))
