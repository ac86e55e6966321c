"""From run records to the tradeoff: curves per machine and recipe, speedups over the baseline, verdicts.

Times from different machines never meet: every curve, speedup and breakdown is keyed by
(machine, recipe). A recipe's curve is the mean over seeds at each budget of (training
seconds, top-1); the seeds' own curves give the spread of its speedups.

    >>> rows = speedup_table(records, baseline="cifar_baseline")
    >>> round(rows[-1].speedup, 2)   # cifar_mild reaches the full-budget baseline's top-1 this much faster
    2.22
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from training.tradeoff.curves import CurvePoint, Reach, accuracy_at_time, time_to_accuracy
from training.tradeoff.results import RunRecord

CurveKey = tuple[str, str]  # (machine, recipe)
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


def group_runs(records: Sequence[RunRecord]) -> dict[CurveKey, dict[float, list[RunRecord]]]:
    """Records by (machine, recipe), then by budget; keys in first-seen order, budgets sorted."""
    groups: dict[CurveKey, dict[float, list[RunRecord]]] = {}
    for record in records:
        groups.setdefault((record.machine, record.recipe), defaultdict(list))[record.budget].append(record)
    return {key: dict(sorted(by_budget.items())) for key, by_budget in groups.items()}


def mixed_curves(records: Sequence[RunRecord]) -> list[CurveKey]:
    """The (machine, recipe) curves whose runs differ in more than seed and budget (e.g. other --set values).

    Example:
        >>> mixed_curves([_record(seconds=1, top1=0.5), _record(budget=2.0, seconds=2, top1=0.6)])
        []
    """
    setups: dict[CurveKey, set[str]] = defaultdict(set)
    for record in records:
        if record.setup_hash:  # empty in records from before the field existed
            setups[(record.machine, record.recipe)].add(record.setup_hash)
    return [key for key, hashes in setups.items() if len(hashes) > 1]


def mean_curve(by_budget: dict[float, list[RunRecord]]) -> list[CurvePoint]:
    """One point per budget: the seeds' mean training seconds and mean top-1.

    Example:
        >>> runs = {1.0: [_record(seconds=10, top1=0.5), _record(seconds=12, top1=0.7)]}
        >>> mean_curve(runs)
        [CurvePoint(budget=1.0, seconds=11.0, top1=0.6)]
    """
    return [CurvePoint(budget, statistics.fmean(r.train_seconds for r in runs), statistics.fmean(r.top1 for r in runs))
            for budget, runs in by_budget.items()]


def seed_curves(by_budget: dict[float, list[RunRecord]]) -> dict[int, list[CurvePoint]]:
    """Each seed's own curve (the budgets that seed ran)."""
    curves: dict[int, list[CurvePoint]] = defaultdict(list)
    for budget, runs in by_budget.items():
        for run in runs:
            curves[run.seed].append(CurvePoint(budget, run.train_seconds, run.top1))
    return dict(sorted(curves.items()))


@dataclass(frozen=True)
class SpeedupRow:
    """A recipe against the baseline at one baseline budget, on one machine.

    speedup: baseline seconds / the recipe's interpolated seconds to the baseline's top-1; None
        when the recipe never reaches it. ``at_most`` means the recipe's cheapest point already
        beats the target, so the true speedup is at least ``speedup``.
    seed_speedups: the same against each of the recipe's seeds' curves, for those that reach it.
    top1_gain: the recipe's top-1 at the baseline's time minus the baseline's; None outside the
        recipe's measured times.
    """

    machine: str
    recipe: str
    baseline_budget: float
    target_top1: float
    baseline_seconds: float
    recipe_seconds: float | None
    at_most: bool
    speedup: float | None
    seed_speedups: tuple[float, ...]
    seeds: int
    top1_gain: float | None

    @property
    def spread(self) -> Spread | None:
        return Spread.of(self.seed_speedups) if self.seed_speedups else None


def _ratio(baseline_seconds: float, reach: Reach) -> float | None:
    return None if reach.seconds is None else baseline_seconds / reach.seconds


def speedup_table(records: Sequence[RunRecord], baseline: str) -> list[SpeedupRow]:
    """Every non-baseline recipe against ``baseline`` at each baseline budget, per machine.

    Example (hand-checkable: the recipe reaches the baseline's 60% at 5 s, not 10 s):
        >>> base = [_record("base", 1.0, seconds=10, top1=0.6)]
        >>> fast = [_record("fast", 0.5, seconds=4, top1=0.5), _record("fast", 1.0, seconds=6, top1=0.7)]
        >>> row, = speedup_table(base + fast, baseline="base")
        >>> row.speedup, row.top1_gain
        (2.0, None)
    """
    groups = group_runs(records)
    rows = []
    for (machine, recipe), by_budget in groups.items():
        reference = groups.get((machine, baseline))
        if recipe == baseline or reference is None:
            continue
        curve, per_seed = mean_curve(by_budget), seed_curves(by_budget)
        for point in mean_curve(reference):
            reach = time_to_accuracy(curve, point.top1)
            seed_reaches = [time_to_accuracy(seed_curve, point.top1) for seed_curve in per_seed.values()]
            accuracy = accuracy_at_time(curve, point.seconds)
            rows.append(SpeedupRow(
                machine=machine, recipe=recipe, baseline_budget=point.budget, target_top1=point.top1,
                baseline_seconds=point.seconds, recipe_seconds=reach.seconds, at_most=reach.at_most,
                speedup=_ratio(point.seconds, reach),
                seed_speedups=tuple(_ratio(point.seconds, r) for r in seed_reaches if r.seconds is not None),
                seeds=len(per_seed), top1_gain=None if accuracy is None else accuracy - point.top1))
    return rows


def verdicts(rows: Sequence[SpeedupRow]) -> dict[CurveKey, str]:
    """A plain sentence per (machine, recipe) saying whether and where it beats the baseline.

    Example:
        >>> row = SpeedupRow("m", "slow", 1.0, 0.6, 10.0, None, False, None, (), 1, -0.1)
        >>> verdicts([row])[("m", "slow")]
        'does not beat the baseline: it reaches none of its accuracies sooner and is not more accurate at any of its times'
    """
    by_key: dict[CurveKey, list[SpeedupRow]] = defaultdict(list)
    for row in rows:
        by_key[(row.machine, row.recipe)].append(row)
    sentences = {}
    for key, recipe_rows in by_key.items():
        wins = [row for row in recipe_rows if (row.speedup or 0) > 1 or (row.top1_gain or 0) > 0]
        if not wins:
            sentences[key] = ("does not beat the baseline: it reaches none of its accuracies sooner "
                              "and is not more accurate at any of its times")
        elif len(wins) == len(recipe_rows):
            sentences[key] = "beats the baseline at every baseline budget"
        else:
            budgets = ", ".join(f"x{row.baseline_budget:g}" for row in wins)
            sentences[key] = f"beats the baseline only at baseline budget(s) {budgets}; not at the others"
    return sentences


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


def time_breakdown(records: Sequence[RunRecord]) -> list[BreakdownRow]:
    """Per (machine, recipe), the summed phase seconds of all its runs over their summed steps.

    Example:
        >>> run = _record(seconds=1.0, phases={"data": 0.2, "forward": 0.3, "backward": 0.4, "optimizer": 0.05,
        ...                                    "methods": 0.04, "methods.sam": 0.03}, steps=10)
        >>> {k: round(v, 3) for k, v in time_breakdown([run])[0].ms_per_step.items()}
        {'data': 20.0, 'forward': 30.0, 'backward': 40.0, 'optimizer': 5.0, 'methods.sam': 3.0, 'methods (other)': 1.0, 'other': 1.0}
    """
    rows = []
    for (machine, recipe), by_budget in group_runs(records).items():
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


def _record(recipe: str = "r", budget: float = 1.0, *, seconds: float = 1.0, top1: float = 0.5, seed: int = 0,
            phases: dict | None = None, steps: int = 1) -> RunRecord:
    """A record with only what the examples above need (for the docstring examples)."""
    return RunRecord(machine="m", recipe=recipe, budget=budget, seed=seed, top1=top1, eval_loss=0.0,
                     train_seconds=seconds, first_epoch_seconds=seconds, images_per_second=0.0, steps=steps,
                     config_hash="0" * 12, phase_seconds=phases or {})
