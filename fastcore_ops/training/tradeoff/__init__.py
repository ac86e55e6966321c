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

from fastcore_ops.lazy import lazy_exports

# Each public name, by the module of this package that defines it: imported on first use, so that the
# command's parser (fastcore_ops.training.tradeoff.cli) loads without torch.
_PUBLIC = {
    "analysis": ["BreakdownRow", "Findings", "SpeedupRow", "analyse", "speedup_table", "time_breakdown"],
    "curves": ["CurvePoint", "Reach", "pareto_frontier", "quality_at_time", "time_to_quality"],
    "machine": ["machine_label"],
    "merging": ["merged_table"],
    "metric": ["TOP1", "Metric"],
    "planning": ["PlannedRun", "SweepRequest", "plan_sweep"],
    "report": ["build_report"],
    "results": ["FailedRun", "RunRecord", "common_metric", "merge_records", "read_results"],
    "run_table": ["RunTable"],
    "sweep": ["execute_sweep"],
    "tables": ["verdicts"],
}
__all__, __getattr__ = lazy_exports(__name__, _PUBLIC)
