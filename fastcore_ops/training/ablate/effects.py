"""Each method's measured effect: its variant's quality and step time against the base recipe's, seed by seed.

    >>> effect, = method_effects(records, base="cifar_baseline", budget=1.0)
    >>> effect.label, round(effect.quality_change.mean, 3), round(effect.step_time_change, 3)
    ('+cutout', 0.015, 0.05)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fastcore_ops.training.figures import label_points, plt, save_figure, series_colors
from fastcore_ops.training.tradeoff.analysis import SpeedupRow, Spread
from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.results import Run, RunRecord, common_metric, split_runs
from fastcore_ops.training.tradeoff.tables import Table, describe_speedup

@dataclass(frozen=True)
class Effect:
    """One variant (base with a method added or removed) against the base, at one budget on one machine.

    quality_change: variant minus base per seed both ran, in the metric's direction (positive: better).
    step_time_change: variant / base training seconds per step - 1, over those seeds (negative: faster).
    speedup: the variant's speedup at the base's quality (from the tradeoff analysis), when the
        sweep ran several budgets; None otherwise.
    added_changes: for each metric the task's ablations add (``top1_tta``), its change as ``quality_change``'s,
        over the seeds where both runs measured it: (name, change) pairs.
    """

    machine: str
    variant: str
    label: str  # the variant's name after the base's: "+cutout", "-blurpool"
    budget: float
    quality_change: Spread
    step_time_change: float
    speedup: SpeedupRow | None
    added_changes: tuple[tuple[str, Spread], ...] = ()


def _ms_per_step(runs: Sequence[RunRecord]) -> float:
    return 1000 * sum(run.train_seconds for run in runs) / max(sum(run.steps for run in runs), 1)


def method_effects(records: Sequence[RunRecord], base: str, budget: float,
                   speedups: Sequence[SpeedupRow] = (), added: Sequence[str] = ()) -> list[Effect]:
    """Every variant's effect at ``budget``, paired with the base's runs seed by seed on each machine, on the
    runs' metric and on each metric of ``added`` (the task's ``ablation_metrics``).

    A variant with no seed in common with the base at that budget is left out, and so is every
    run that diverged (see ``judge``): :func:`runs_left_out` lists them.
    """
    records = split_runs(records)[0]
    metric = common_metric(records)
    at_budget = [record for record in records if record.budget == budget]
    by_key = {(r.machine, r.recipe, r.seed): r for r in at_budget}
    effects = []
    for machine, variant in dict.fromkeys((r.machine, r.recipe) for r in at_budget if r.recipe != base):
        pairs = [(by_key[(machine, base, seed)], by_key[(machine, variant, seed)])
                 for seed in sorted({r.seed for r in at_budget})
                 if (machine, base, seed) in by_key and (machine, variant, seed) in by_key]
        if not pairs:
            continue
        changes = [metric.sign * (mine.quality - theirs.quality) for theirs, mine in pairs]
        step_change = _ms_per_step([mine for _, mine in pairs]) / _ms_per_step([theirs for theirs, _ in pairs]) - 1
        speedup = next((row for row in speedups if (row.machine, row.recipe, row.baseline_budget)
                        == (machine, variant, budget)), None)
        added_changes = tuple((name, Spread.of(measured)) for name in added if (measured := [
            metric.sign * (mine.metrics[name] - theirs.metrics[name]) for theirs, mine in pairs
            if name in mine.metrics and name in theirs.metrics]))
        effects.append(Effect(machine, variant, variant.removeprefix(base), budget, Spread.of(changes), step_change,
                              speedup, added_changes))
    return effects


@dataclass(frozen=True)
class RunsLeftOut:
    """One variant at the ablation's budget on one machine: its runs and the base's that diverged or failed.

    runs: those runs in words ("base seed 0 diverged; seed 1 failed"), "" when none was left out.
    """

    machine: str
    variant: str
    budget: float
    runs: str


def runs_left_out(runs: Sequence[Run], base: str, budget: float) -> list[RunsLeftOut]:
    """For every variant that ran at ``budget`` (finished or not), the runs of it and of the base left out there.

    Example:
        >>> from fastcore_ops.training.tradeoff.results import FailedRun
        >>> lost = FailedRun("laptop/cpu", "cifar_baseline", 1.0, 1, "diverged", "top1 = nan")
        >>> [entry.runs for entry in runs_left_out([*records, lost], "cifar_baseline", 1.0)]
        ['base seed 1 diverged']
    """
    records, left_out = split_runs(runs)
    variants = dict.fromkeys((run.machine, run.recipe) for run in (*records, *left_out)
                             if run.budget == budget and run.recipe != base)
    return [RunsLeftOut(machine, variant, budget, "; ".join(
                f"{'base ' if run.recipe == base else ''}seed {run.seed} {run.status}" for run in left_out
                if (run.machine, run.budget) == (machine, budget) and run.recipe in (base, variant)))
            for machine, variant in variants]


def _with_unit(metric: Metric, text: str, separator: str = ", ", first: bool = False) -> str:
    """``text`` joined to the unit of a change in ``metric`` (points for a percentage), ``first`` or after it; alone
    for a metric without unit.

        >>> _with_unit(Metric("top1", True, "top-1 (%)"), "+ is better"), _with_unit(Metric("mse", False, "mse"), "up")
        ('points, + is better', 'up')
    """
    unit = "points" if metric.percent else metric.unit
    parts = (text, unit) if first else (unit, text)
    return separator.join(part for part in parts if part)


def added_metric_sentences(records: Sequence[RunRecord], base: str, budget: float, added: dict[str, str]) -> str:
    """What each metric of ``added`` (the base's task's ``ablation_metrics``: name -> what it measures) gains over
    the runs' own metric on the base's runs, in words; "" where none of them was measured.

        >>> added_metric_sentences(records, "cifar_baseline", 1.0, {"top1_tta": "Test-time augmentation"})
        "Test-time augmentation on cifar_baseline's runs: top-1 +1.00 (+1.00-+1.00) points over the plain top-1."
    """
    metric = common_metric(records)
    sentences = []
    for name, measures in added.items():
        gains = [metric.scaled(r.metrics[name] - r.metrics[metric.name]) for r in records
                 if r.recipe == base and r.budget == budget and name in r.metrics]
        if gains:
            amount = _with_unit(metric, Spread.of(gains).describe("{:+.2f}"), " ", first=True)
            sentences.append(f"{measures} on {base}'s runs: {metric.quantity} {amount} over the plain "
                             f"{metric.quantity}.")
    return " ".join(sentences)


def effect_rows(effects: Sequence[Effect], metric: Metric, left_out: Sequence[RunsLeftOut] = (),
                added: dict[str, str] | None = None) -> Table:
    """The effects as a table: change in quality (with each seed's), then in each metric of ``added`` (name -> what
    it measures: the task's ``ablation_metrics``), change in time per step, speedup, and the runs left out
    (``left_out``, from :func:`runs_left_out`); a variant there without an effect is listed as not measured,
    saying why."""
    added = added or {}

    def scaled(spread: Spread) -> Spread:
        return Spread.of([metric.scaled(value) for value in spread.values])

    header = ["machine", "variant", "budget", f"{metric.quantity} change ({_with_unit(metric, '+ is better')})",
              "per seed",
              *(f"{metric.quantity} change with {measures[:1].lower()}{measures[1:]} "
                f"({_with_unit(metric, '+ is better')})" for measures in added.values()),
              "time per step change (%)", f"speedup at the base's {metric.quantity}", "runs left out"]
    notes = {(entry.machine, entry.variant): entry.runs for entry in left_out}
    body = []
    for effect in effects:
        change = scaled(effect.quality_change)
        added_changes = dict(effect.added_changes)
        body.append([effect.machine, effect.variant, f"x{effect.budget:g}", change.describe("{:+.2f}"),
                     ", ".join(f"{value:+.2f}" for value in change.values),
                     *(scaled(added_changes[name]).describe("{:+.2f}") if name in added_changes else ""
                       for name in added),
                     f"{100 * effect.step_time_change:+.1f}",
                     "" if effect.speedup is None else describe_speedup(effect.speedup),
                     notes.get((effect.machine, effect.variant), "")])
    measured = {(effect.machine, effect.variant) for effect in effects}
    body += [[entry.machine, entry.variant, f"x{entry.budget:g}", "not measured", "", *("" for _ in added), "", "",
              entry.runs or "no seed in common with the base"]
             for entry in left_out if (entry.machine, entry.variant) not in measured]
    return header, body


def effects_figure(effects: Sequence[Effect], metric: Metric) -> plt.Figure:
    """Quality change against time-per-step change, one point per variant in a colour of its own, with its
    seeds' spread, each labelled where no other label covers it. The caller closes the figure."""
    scale = 100 if metric.percent else 1
    figure, axes = plt.subplots(figsize=(9, 6))
    colors = series_colors(len(effects))
    points = []
    for effect, color in zip(effects, colors):
        low, high = effect.quality_change.low_high
        mean = effect.quality_change.mean
        x = 100 * effect.step_time_change
        axes.errorbar(x, mean * scale, yerr=[[(mean - low) * scale], [(high - mean) * scale]], fmt="o", capsize=3,
                      color=color)
        points.append((x, mean * scale))
    axes.axhline(0, color="grey", linewidth=0.8)
    axes.axvline(0, color="grey", linewidth=0.8)
    axes.margins(0.2)  # room for the labels inside the axes
    axes.set_xlabel("time per training step against the base (%; left is faster)")
    axes.set_ylabel(f"{metric.quantity} change against the base ({_with_unit(metric, 'up is better', '; ')})")
    machines = sorted({effect.machine for effect in effects})
    axes.set_title(f"Each method alone, at budget x{effects[0].budget:g} ({', '.join(machines)})" if effects else
                   "no variant ran beside the base")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    label_points(axes, points, [effect.label for effect in effects], colors=colors)
    return figure


def plot_effects(effects: Sequence[Effect], metric: Metric, path: Path) -> None:
    """Write :func:`effects_figure` to the PNG file ``path``."""
    save_figure(effects_figure(effects, metric), path)
