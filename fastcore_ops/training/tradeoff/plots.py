"""The report's two figures as PNG files: the tradeoff (Pareto) plot and the per-step time breakdown.

One panel per machine in each, since times from different machines never share an axis.

    >>> from fastcore_ops.training.tradeoff.analysis import analyse
    >>> table = RunTable.of(records)
    >>> [path.name for path in plot_report(table, analyse(table, "cifar_baseline"), out)]
    ['pareto.png', 'breakdown.png']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from fastcore_ops.training.figures import label_points, plt, save_figure, series_colors
from fastcore_ops.training.tradeoff.analysis import BreakdownRow, Findings, Spread
from fastcore_ops.training.tradeoff.run_table import RunTable

PARETO_PNG, BREAKDOWN_PNG = "pareto.png", "breakdown.png"


def _panels(count: int, width: float, height: float):
    figure, axes = plt.subplots(count, 1, figsize=(width, height * count), squeeze=False)
    return figure, [row[0] for row in axes]


def _straight_in_linear_time(x: list[float], y: list[float], steps: int = 24) -> tuple[list[float], list[float]]:
    """The curve through (x, y) drawn as the speedup table reads it: straight in linear time.

    Matplotlib draws straight segments on the axis's log scale; densifying each segment makes
    the drawn line bow there exactly as the table's linear-in-time interpolation does.
    """
    fractions = [step / steps for step in range(1, steps + 1)]
    dense_x, dense_y = x[:1], y[:1]
    for (x0, y0), (x1, y1) in zip(zip(x, y), zip(x[1:], y[1:])):
        dense_x += [x0 + f * (x1 - x0) for f in fractions]
        dense_y += [y0 + f * (y1 - y0) for f in fractions]
    return dense_x, dense_y


def tradeoff_figure(table: RunTable, frontier: dict[str, list[tuple[str, float]]]) -> plt.Figure:
    """Quality against training time per recipe of ``table``: seed means with their spread, and ``frontier``'s points
    (per machine, the (recipe, budget) points on the Pareto frontier:
    :attr:`~fastcore_ops.training.tradeoff.analysis.Findings.frontier`) marked.

    The quality axis is the runs' metric, labelled from its label: top-1 in percent, a loss as
    its raw value with "lower is better". The caller closes the figure.

    Example:
        >>> from fastcore_ops.training.tradeoff.analysis import analyse
        >>> table = RunTable.of(records)
        >>> figure = tradeoff_figure(table, analyse(table, "cifar_baseline").frontier)
        >>> figure.axes[0].get_ylabel()
        'top-1 (%)'
        >>> plt.close(figure)
    """
    if not table.records:
        raise ValueError("table must hold at least one usable run to plot, got none")
    metric, groups, machines = table.metric, table.curves, table.machines
    figure, axes = _panels(len(machines), 8.0, 5.0)
    budget_labels = []
    for machine, ax in zip(machines, axes):
        points, labels = {}, []
        curves = [(recipe, by_budget) for (run_machine, recipe), by_budget in groups.items() if run_machine == machine]
        for (recipe, by_budget), color in zip(curves, series_colors(len(curves))):
            seconds = [Spread.of([r.train_seconds for r in runs]) for runs in by_budget.values()]
            quality = [Spread.of([metric.scaled(r.quality) for r in runs]) for runs in by_budget.values()]
            x, y = [s.mean for s in seconds], [q.mean for q in quality]
            xerr = [[s.mean - s.low_high[0] for s in seconds], [s.low_high[1] - s.mean for s in seconds]]
            yerr = [[q.mean - q.low_high[0] for q in quality], [q.low_high[1] - q.mean for q in quality]]
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, marker="o", capsize=3, linestyle="none", label=recipe,
                        color=color, zorder=3)
            ax.plot(*_straight_in_linear_time(x, y), color=color, zorder=2)
            labels += [((px, py), f"x{budget:g}") for budget, px, py in zip(by_budget, x, y)]
            points.update(((recipe, budget), point) for budget, point in zip(by_budget, zip(x, y)))
        on_frontier = [points[key] for key in frontier[machine]]
        ax.plot(*zip(*on_frontier), color="black", linestyle="--", linewidth=1, drawstyle="steps-post", zorder=1)
        # Under the recipes' markers, so a marker on the frontier still shows its colour.
        ax.scatter(*zip(*on_frontier), s=160, facecolors="none", edgecolors="black", linewidths=1, zorder=2.5,
                   label="Pareto frontier")
        ax.set_xscale("log")  # budgets are ratios: equal factors look equally far apart
        ax.margins(x=0.08, y=0.12)
        _readable_log_ticks(ax)
        ax.set_xlabel("training time (s, evaluation and checkpoints excluded; log scale)")
        ax.set_ylabel(metric.axis_label)
        title = metric.quantity[:1].upper() + metric.quantity[1:]
        # Two lines: a machine's full name (a CPU model, its threads) ran past the figure's edge on one.
        ax.set_title(f"{title} against training time\non {machine} (mean and spread over seeds)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        budget_labels.append((ax, labels))
    figure.tight_layout()
    for ax, labels in budget_labels:  # last: labels are placed around what is drawn
        label_points(ax, [point for point, _ in labels], [text for _, text in labels], fontsize=7)
    return figure


def _readable_log_ticks(ax) -> None:
    """Label a log time axis at 4 to 8 round values (1-2-5, or finer over a narrow range), written plainly."""
    low, high = ax.get_xlim()
    for steps in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [step * 10 ** power for power in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
                 for step in steps if low <= step * 10 ** power <= high]
        if len(ticks) >= 4:
            break
    if len(ticks) < 2:  # a range narrower than 1.1x: five values across it, to three significant digits
        rounded = {float(f"{low + (high - low) * k / 4:.3g}") for k in range(5)}
        ticks = sorted(value for value in rounded if low <= value <= high)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.4g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(low, high)


def plot_report(table: RunTable, findings: Findings, out: Path) -> list[Path]:
    """Write the report's figures to ``out``: :func:`tradeoff_figure` of ``table`` and the findings' frontier as
    pareto.png and :func:`breakdown_figure` of their breakdown as breakdown.png; their paths.
    """
    pareto, breakdown_bars = tradeoff_figure(table, findings.frontier), breakdown_figure(findings.breakdown)
    save_figure(pareto, out / PARETO_PNG, dpi=110)
    save_figure(breakdown_bars, out / BREAKDOWN_PNG, dpi=110, tight=True)  # the legends sit beside the panels
    return [out / PARETO_PNG, out / BREAKDOWN_PNG]


def breakdown_figure(rows: Sequence[BreakdownRow]) -> plt.Figure:
    """Milliseconds per training step by phase, one stacked horizontal bar per recipe; the caller closes it."""
    if not rows:
        raise ValueError("rows must hold at least one recipe's breakdown, got none")
    machines = list(dict.fromkeys(row.machine for row in rows))
    phases = list(dict.fromkeys(name for row in rows for name in row.ms_per_step))
    colors = dict(zip(phases, series_colors(len(phases))))
    figure, axes = _panels(len(machines), 9.0, 1.2 + 0.6 * max(
        sum(1 for row in rows if row.machine == machine) for machine in machines))
    for machine, ax in zip(machines, axes):
        mine = [row for row in rows if row.machine == machine]
        labels = [row.recipe for row in mine]
        left = [0.0] * len(mine)
        for phase in phases:
            widths = [row.ms_per_step.get(phase, 0.0) for row in mine]
            ax.barh(labels, widths, left=left, color=colors[phase], label=phase)
            left = [a + b for a, b in zip(left, widths)]
        ax.invert_yaxis()  # recipes top to bottom in the order they were given
        ax.set_xlabel("milliseconds per training step")
        ax.set_title(f"Where a training step's time goes on {machine}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure
