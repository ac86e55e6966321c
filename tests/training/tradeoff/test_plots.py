"""The tradeoff plot draws each curve the way the speedup table reads it, on an axis named after the metric."""

import matplotlib.pyplot as plt
import pytest

from fastcore_ops.training.tradeoff.analysis import analyse
from fastcore_ops.training.tradeoff.curves import CurvePoint, quality_at_time
from fastcore_ops.training.tradeoff.plots import _straight_in_linear_time, tradeoff_figure
from fastcore_ops.training.tradeoff.run_table import RunTable
from tests.training.tradeoff.test_analysis import BASE, FAST, LM_BASE, LM_HALF


def test_the_drawn_curve_passes_through_the_table_s_interpolation_between_and_at_the_budgets():
    seconds, top1 = [10.0, 20.0, 40.0], [60.0, 70.0, 75.0]
    curve = [CurvePoint(budget, s, a) for budget, s, a in zip([0.5, 1.0, 2.0], seconds, top1)]

    drawn_x, drawn_y = _straight_in_linear_time(seconds, top1)

    assert len(drawn_x) > len(seconds)  # densified, so a log axis cannot straighten it
    assert drawn_x[0] == seconds[0] and drawn_x[-1] == pytest.approx(seconds[-1])
    for x, y in zip(drawn_x, drawn_y):
        # e.g. 72.5% at 30 s: straight in time
        assert y == pytest.approx(quality_at_time(curve, x, higher_is_better=True))


@pytest.fixture
def figure_of():
    figures = []

    def draw(records):
        table = RunTable.of(records)
        figures.append(tradeoff_figure(table, analyse(table, records[0].recipe).frontier))
        return figures[-1].axes[0]

    yield draw
    for figure in figures:
        plt.close(figure)


def _frontier(ax):
    """The points circled as the Pareto frontier, flattened to x0, y0, x1, y1, ... (pytest.approx takes no nesting)."""
    circles, = [collection for collection in ax.collections if collection.get_label() == "Pareto frontier"]
    return [float(value) for point in circles.get_offsets() for value in point]


def test_a_top1_plot_is_in_percent_with_its_label(figure_of):
    ax = figure_of(BASE + FAST)
    assert ax.get_ylabel() == "top-1 (%)"
    assert ax.get_title().startswith("Top-1 against training time\non m1")
    # fast's two budgets (4 s at 60%, 8 s at 72%) beat both of the baseline's, in percent.
    assert _frontier(ax) == pytest.approx([4.0, 60.0, 8.0, 72.0])


def test_a_loss_plot_shows_raw_nats_and_says_lower_is_better(figure_of):
    ax = figure_of(LM_BASE + LM_HALF)
    assert ax.get_ylabel() == "validation loss (nats/token), lower is better"
    assert ax.get_title().startswith("Validation loss against training time\non m1")
    # The frontier is the fast recipe's three points, falling: raw losses, never x100.
    assert _frontier(ax) == pytest.approx([25.0, 2.5, 50.0, 2.0, 100.0, 1.5])
    low, high = ax.get_ylim()
    assert low < 1.5 and high < 5


def test_a_plot_of_two_metrics_is_refused(figure_of):
    with pytest.raises(ValueError, match="do not share one metric"):
        figure_of(BASE + LM_BASE)
