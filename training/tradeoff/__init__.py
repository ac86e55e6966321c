"""The quality-versus-cost tradeoff tool: sweep recipes over budgets and seeds, then compare their curves.

``python -m training.tradeoff`` trains every recipe at every budget (scale-schedule ratio) and
seed, resuming an interrupted sweep, and writes a self-contained HTML report: the tradeoff
curves with their Pareto frontier, speedups over the baseline at equal accuracy, accuracy
gains at equal time, and where each step's time goes. ``--merge`` rebuilds the report from
several machines' results, never mixing their times in one curve.

    >>> from training.tradeoff import speedup_table, time_to_accuracy, CurvePoint
    >>> time_to_accuracy([CurvePoint(1, 10.0, 0.5), CurvePoint(2, 20.0, 0.7)], 0.6).seconds
    15.0
"""

from training.tradeoff.analysis import BreakdownRow, SpeedupRow, speedup_table, time_breakdown, verdicts
from training.tradeoff.curves import CurvePoint, Reach, accuracy_at_time, pareto_frontier, time_to_accuracy
from training.tradeoff.report import build_report
from training.tradeoff.results import RunRecord, machine_label, merge_records, read_results
from training.tradeoff.sweep import PlannedRun, plan_sweep, run_sweep

__all__ = [
    "BreakdownRow", "CurvePoint", "PlannedRun", "Reach", "RunRecord", "SpeedupRow", "accuracy_at_time",
    "build_report", "machine_label", "merge_records", "pareto_frontier", "plan_sweep", "read_results",
    "run_sweep", "speedup_table", "time_breakdown", "time_to_accuracy", "verdicts",
]
