"""The quality-versus-cost tradeoff tool: sweep recipes over budgets and seeds, then compare their curves.

``python -m fastcore_ops.training.tradeoff`` trains every recipe at every budget (scale-schedule ratio) and
seed, resuming an interrupted sweep, and writes a self-contained HTML report: the tradeoff
curves with their Pareto frontier, speedups over the baseline at equal quality, quality gains
at equal time, and where each step's time goes. Quality is the metric the runs name in their
summaries (top-1, higher is better; validation loss, lower is better); one report holds one
metric. A run that diverges or fails is listed with why and its log and left out of the curves
(``FailedRun``). ``--merge`` rebuilds the report from several machines' results, never mixing
their times in one curve.

    >>> from fastcore_ops.training.tradeoff import speedup_table, time_to_quality, CurvePoint
    >>> time_to_quality([CurvePoint(1, 10.0, 0.5), CurvePoint(2, 20.0, 0.7)], 0.6, higher_is_better=True).seconds
    15.0
    >>> time_to_quality([CurvePoint(1, 10.0, 2.0), CurvePoint(2, 20.0, 1.0)], 1.5, higher_is_better=False).seconds
    15.0
"""

from fastcore_ops.training.tradeoff.analysis import BreakdownRow, SpeedupRow, speedup_table, time_breakdown, verdicts
from fastcore_ops.training.tradeoff.curves import CurvePoint, Reach, pareto_frontier, quality_at_time, time_to_quality
from fastcore_ops.training.tradeoff.metric import TOP1, Metric
from fastcore_ops.training.tradeoff.planning import PlannedRun, SweepRequest, plan_sweep
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import (FailedRun, RunRecord, common_metric, machine_label, merge_records,
                                                    read_results)
from fastcore_ops.training.tradeoff.sweep import execute_sweep

__all__ = [
    "TOP1", "BreakdownRow", "CurvePoint", "FailedRun", "Metric", "PlannedRun", "Reach", "RunRecord", "SpeedupRow",
    "SweepRequest", "build_report", "common_metric", "execute_sweep", "machine_label", "merge_records",
    "pareto_frontier", "plan_sweep", "quality_at_time", "read_results", "speedup_table", "time_breakdown",
    "time_to_quality", "verdicts",
]
