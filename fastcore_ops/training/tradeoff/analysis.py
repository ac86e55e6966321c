"""From the table of runs to the tradeoff's numbers: speedups over the baseline, its gaps, the time breakdown.

Times from different machines never meet: every curve, speedup and breakdown is keyed by
(machine, recipe). A recipe's curve is the mean over seeds at each budget of (training
seconds, quality); the seeds' own curves give the spread of its speedups. Quality is the runs'
one metric (``RunTable.metric``), read in its own direction: a lower loss is a better one.
The words and tables made of these numbers are :mod:`fastcore_ops.training.tradeoff.tables`'.

    >>> findings = analyse(RunTable.of(records), baseline="cifar_baseline")
    >>> round(findings.speedups[-1].speedup, 2)   # cifar_mild reaches the full-budget baseline's top-1 this much faster
    2.22
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fastcore_ops.training.tradeoff.curves import (CurvePoint, earliest_times, pareto_keys, quality_at_time,
                                                   time_to_quality)
from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.run_table import CurveKey, RunTable

CORE_PHASES = ("data", "forward", "backward", "optimizer")


@dataclass(frozen=True)
class Spread:
    """Mean of a few seeds' values, with their spread: standard deviation from 3 seeds, min-max from 2.

    Example:
        >>> Spread.of([1.0, 3.0]).describe("{:.1f}")
        '2.0 (1.0-3.0)'
    """

    mean: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("values must hold at least one number, got none")
        return cls(statistics.fmean(values), tuple(values))

    @property
    def low_high(self) -> tuple[float, float]:
        """The error bar: mean +- sd from 3 values, min and max from 2, the mean itself from 1."""
        if len(self.values) >= 3:
            sd = statistics.stdev(self.values)
            return self.mean - sd, self.mean + sd
        return min(self.values), max(self.values)

    def describe(self, number: str) -> str:
        text = number.format(self.mean)
        if len(self.values) >= 3:
            return f"{text} ± {number.format(statistics.stdev(self.values))}"
        if len(self.values) == 2:
            return f"{text} ({number.format(min(self.values))}-{number.format(max(self.values))})"
        return text


def mixed_curves(records: Sequence[RunRecord]) -> list[CurveKey]:
    """The (machine, recipe) curves whose runs differ in more than seed and budget: other --set values,
    or a precision ("amp") that resolved differently on the CPUs behind one machine label.

    Example:
        >>> mixed_curves([RunRecord.made_up(seconds=1, quality=0.5), RunRecord.made_up(budget=2.0, seconds=2, quality=0.6)])
        []
    """
    setups: dict[CurveKey, set[str]] = defaultdict(set)
    precisions: dict[CurveKey, set[str]] = defaultdict(set)
    for record in records:
        key = (record.machine, record.recipe)
        if record.setup_hash:  # empty in records from before the field existed
            setups[key].add(record.setup_hash)
        if record.precision:  # likewise
            precisions[key].add(record.precision)
    return [key for key in dict.fromkeys([*setups, *precisions])
            if len(setups[key]) > 1 or len(precisions[key]) > 1]


def mean_curve(by_budget: dict[float, list[RunRecord]]) -> list[CurvePoint]:
    """One point per budget: the seeds' mean training seconds and mean quality.

    Example:
        >>> runs = {1.0: [RunRecord.made_up(seconds=10, quality=0.5), RunRecord.made_up(seconds=12, quality=0.7)]}
        >>> mean_curve(runs)
        [CurvePoint(budget=1.0, seconds=11.0, quality=0.6)]
    """
    return [CurvePoint(budget, statistics.fmean(r.train_seconds for r in runs),
                       statistics.fmean(r.quality for r in runs))
            for budget, runs in by_budget.items()]


def seed_curves(by_budget: dict[float, list[RunRecord]]) -> dict[int, list[CurvePoint]]:
    """Each seed's own curve (the budgets that seed ran)."""
    curves: dict[int, list[CurvePoint]] = defaultdict(list)
    for budget, runs in by_budget.items():
        for run in runs:
            curves[run.seed].append(CurvePoint(budget, run.train_seconds, run.quality))
    return dict(sorted(curves.items()))


@dataclass(frozen=True)
class SpeedupRow:
    """A recipe against the baseline at one baseline budget, on one machine.

    target: the baseline's quality at that budget (mean over its seeds), in ``metric``.
    baseline_seconds: the baseline's earliest time to ``target``: that budget's own time, unless a
        shorter budget of the baseline already reached ``target`` (past its plateau, where a longer
        budget ends no better), then where the baseline's curve first crosses it.
    budget_seconds: that budget's own time when it differs from ``baseline_seconds``, else None.
    speedup: baseline seconds / the recipe's interpolated seconds to ``target``; None when the
        recipe never reaches it. ``at_most`` means the recipe's cheapest point already reaches
        the target, so the true speedup is at least ``speedup``.
    seed_speedups: the same against each of the recipe's seeds' curves, for those that reach it.
    gain: how much better the recipe's quality is at the baseline's time than the baseline's,
        positive when better (a lower loss counts as a gain); None outside the recipe's
        measured times.
    """

    machine: str
    recipe: str
    baseline_budget: float
    target: float
    baseline_seconds: float
    recipe_seconds: float | None
    at_most: bool
    speedup: float | None
    seed_speedups: tuple[float, ...]
    seeds: int
    gain: float | None
    metric: Metric
    budget_seconds: float | None = None

    @property
    def spread(self) -> Spread | None:
        return Spread.of(self.seed_speedups) if self.seed_speedups else None


def speedup_table(table: RunTable, baseline: str) -> list[SpeedupRow]:
    """Every non-baseline recipe of ``table`` against ``baseline`` at each baseline budget, per machine.

    Example (hand-checkable: the recipe reaches the baseline's 60% at 5 s, not 10 s):
        >>> base = [RunRecord.made_up("base", 1.0, seconds=10, quality=0.6)]
        >>> fast = [RunRecord.made_up("fast", 0.5, seconds=4, quality=0.5), RunRecord.made_up("fast", 1.0, seconds=6, quality=0.7)]
        >>> row, = speedup_table(RunTable.of(base + fast), baseline="base")
        >>> row.speedup, row.gain
        (2.0, None)

    Lower is better reads the same way (the recipe reaches the baseline's loss of 2.0 at 5 s):
        >>> loss = Metric("eval_loss", higher_is_better=False, label="validation loss (nats/token)")
        >>> base = [RunRecord.made_up("base", 1.0, seconds=10, quality=2.0, metric=loss)]
        >>> fast = [RunRecord.made_up("fast", 0.5, seconds=4, quality=2.5, metric=loss),
        ...         RunRecord.made_up("fast", 1.0, seconds=6, quality=1.5, metric=loss)]
        >>> speedup_table(RunTable.of(base + fast), baseline="base")[0].speedup
        2.0
    """
    metric = table.metric
    means = {key: mean_curve(by_budget) for key, by_budget in table.curves.items()}
    per_seed = {key: seed_curves(by_budget) for key, by_budget in table.curves.items()}
    rows = []
    for (machine, recipe), curve in means.items():
        base = means.get((machine, baseline))
        if recipe == baseline or base is None:
            continue
        # A budget the baseline wasted gives a recipe no speed-up (see SpeedupRow.baseline_seconds).
        for point, seconds in zip(base, earliest_times(base, metric.higher_is_better)):
            reach = time_to_quality(curve, point.quality, metric.higher_is_better)
            seed_reaches = [time_to_quality(seed_curve, point.quality, metric.higher_is_better)
                            for seed_curve in per_seed[machine, recipe].values()]
            quality = quality_at_time(curve, seconds, metric.higher_is_better)
            rows.append(SpeedupRow(
                machine=machine, recipe=recipe, baseline_budget=point.budget, target=point.quality,
                baseline_seconds=seconds, recipe_seconds=reach.seconds, at_most=reach.at_most,
                speedup=reach.speedup(seconds),
                seed_speedups=tuple(r.speedup(seconds) for r in seed_reaches if r.seconds is not None),
                seeds=len(per_seed[machine, recipe]),
                gain=None if quality is None else metric.sign * (quality - point.quality),
                metric=metric, budget_seconds=None if seconds == point.seconds else point.seconds))
    return rows


@dataclass(frozen=True)
class BaselineGap:
    """A baseline budget on one machine where every baseline run was left out, so no recipe has a speedup there.

    status: how those runs ended ("diverged", "failed", or "diverged or failed").
    recipes: the recipes on that machine that go without a speedup at that budget.
    """

    machine: str
    baseline: str
    budget: float
    status: str
    recipes: tuple[str, ...]

    def describe(self) -> str:
        """The gap in words, e.g. "no speedup: every run of cifar_baseline at x1 diverged"."""
        return f"no speedup: every run of {self.baseline} at x{self.budget:g} {self.status}"


def baseline_gaps(table: RunTable, baseline: str) -> list[BaselineGap]:
    """The baseline budgets, per machine, whose runs all diverged or failed (see :class:`BaselineGap`).

    Example:
        >>> from fastcore_ops.training.tradeoff.results import FailedRun
        >>> lost = FailedRun("m", "base", 2.0, 0, "diverged", "eval_loss is nan")
        >>> table = RunTable.of([RunRecord.made_up("base"), RunRecord.made_up("fast"), lost])
        >>> baseline_gaps(table, "base")[0].describe()
        'no speedup: every run of base at x2 diverged'
    """
    records = table.records
    usable = {(record.machine, record.budget) for record in records if record.recipe == baseline}
    statuses: dict[tuple[str, float], set[str]] = defaultdict(set)
    for run in table.left_out:
        if run.recipe == baseline and (run.machine, run.budget) not in usable:
            statuses[(run.machine, run.budget)].add(run.status)
    compared = {machine: tuple(dict.fromkeys(run.recipe for run in records
                                             if run.machine == machine and run.recipe != baseline))
                for machine, _ in statuses}
    return [BaselineGap(machine, baseline, budget, " or ".join(sorted(found)), compared[machine])
            for (machine, budget), found in sorted(statuses.items())]


@dataclass(frozen=True)
class BreakdownRow:
    """Where a recipe's training time goes on one machine: milliseconds per step by phase.

    ms_per_step: phase name -> ms, in order: data, forward, backward, optimizer, each method's
        own timed work (``methods.<name>``, e.g. SAM's second pass), the rest of the methods'
        event time, and ``other`` (the loop's own bookkeeping).
    first_epoch_share: mean fraction of training time spent in the first epoch, whose start-up
        costs (worker start, compilation, caches) are paid once.
    """

    machine: str
    recipe: str
    ms_per_step: dict[str, float]
    first_epoch_seconds: float
    first_epoch_share: float

    @property
    def total_ms(self) -> float:
        return sum(self.ms_per_step.values())


def time_breakdown(table: RunTable) -> list[BreakdownRow]:
    """Per (machine, recipe), the summed phase seconds of all its runs over their summed steps.

    Example:
        >>> run = RunRecord.made_up(seconds=1.0, phases={"data": 0.2, "forward": 0.3, "backward": 0.4, "optimizer": 0.05,
        ...                                    "methods": 0.04, "methods.sam": 0.03}, steps=10)
        >>> {k: round(v, 3) for k, v in time_breakdown(RunTable.of([run]))[0].ms_per_step.items()}
        {'data': 20.0, 'forward': 30.0, 'backward': 40.0, 'optimizer': 5.0, 'methods.sam': 3.0, 'methods (other)': 1.0, 'other': 1.0}
    """
    rows = []
    for (machine, recipe), by_budget in table.curves.items():
        runs = [run for group in by_budget.values() for run in group]
        steps = sum(run.steps for run in runs)
        if steps == 0:
            continue
        totals: dict[str, float] = defaultdict(float)
        for run in runs:
            for name, seconds in run.phase_seconds.items():
                totals[name] += seconds
        named_methods = sorted(name for name in totals if name.startswith("methods."))
        seconds = {name: totals[name] for name in (*CORE_PHASES, *named_methods)}
        # The named methods' time is part of the "methods" total the trainer keeps.
        seconds["methods (other)"] = max(0.0, totals["methods"] - sum(totals[n] for n in named_methods))
        train_total = sum(run.train_seconds for run in runs)
        seconds["other"] = max(0.0, train_total - sum(seconds.values()))
        rows.append(BreakdownRow(
            machine=machine, recipe=recipe, ms_per_step={name: 1000 * s / steps for name, s in seconds.items()},
            first_epoch_seconds=statistics.fmean(run.first_epoch_seconds for run in runs),
            first_epoch_share=statistics.fmean(run.first_epoch_seconds / max(run.train_seconds, 1e-12)
                                               for run in runs)))
    return rows


def mean_points(table: RunTable) -> dict[str, dict[tuple[str, float], tuple[float, float]]]:
    """Per machine, each (recipe, budget) point's seed-mean training seconds and quality, the quality in the unit the
    tradeoff figure shows (:meth:`Metric.scaled`), so that the Pareto frontier of these is that of the points drawn.

    Example:
        >>> mean_points(RunTable.of(records))["laptop/cpu"][("cifar_mild", 0.5)]
        (50.0, 52.5)
    """
    points: dict[str, dict[tuple[str, float], tuple[float, float]]] = defaultdict(dict)
    for (machine, recipe), by_budget in table.curves.items():
        for budget, runs in by_budget.items():
            points[machine][(recipe, budget)] = (statistics.fmean([run.train_seconds for run in runs]),
                                                 statistics.fmean([table.metric.scaled(run.quality) for run in runs]))
    return dict(points)


@dataclass(frozen=True)
class Findings:
    """What the analysis finds in a table of runs, before any of it is put in words.

    mixed: the curves whose runs differ in more than seed and budget (:func:`mixed_curves`).
    frontier: per machine, the (recipe, budget) points on the Pareto frontier of :func:`mean_points`, sorted by time.
    """

    baseline: str
    speedups: list[SpeedupRow]
    gaps: list[BaselineGap]
    breakdown: list[BreakdownRow]
    mixed: list[CurveKey]
    frontier: dict[str, list[tuple[str, float]]]


def analyse(table: RunTable, baseline: str) -> Findings:
    """Everything the report states about ``table``'s usable runs against ``baseline``; ``table`` needs one.

    Example:
        >>> findings = analyse(RunTable.of(records), "cifar_baseline")
        >>> [row.recipe for row in findings.breakdown], findings.gaps, findings.mixed
        (['cifar_baseline', 'cifar_mild'], [], [])
    """
    if not table.records:
        raise ValueError("table must hold at least one usable run to analyse, got none")
    means = mean_points(table)
    return Findings(baseline, mixed=mixed_curves(table.records), gaps=baseline_gaps(table, baseline),
                    breakdown=time_breakdown(table), speedups=speedup_table(table, baseline),
                    frontier={machine: pareto_keys(points, table.metric.higher_is_better)
                              for machine, points in means.items()})
