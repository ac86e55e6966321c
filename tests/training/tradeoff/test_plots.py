"""The tradeoff plot draws each curve the way the speedup table reads it."""

import pytest

from training.tradeoff.curves import CurvePoint, accuracy_at_time
from training.tradeoff.plots import _straight_in_linear_time


def test_the_drawn_curve_passes_through_the_table_s_interpolation_between_and_at_the_budgets():
    seconds, top1 = [10.0, 20.0, 40.0], [60.0, 70.0, 75.0]
    curve = [CurvePoint(budget, s, a) for budget, s, a in zip([0.5, 1.0, 2.0], seconds, top1)]

    drawn_x, drawn_y = _straight_in_linear_time(seconds, top1)

    assert len(drawn_x) > len(seconds)  # densified, so a log axis cannot straighten it
    assert drawn_x[0] == seconds[0] and drawn_x[-1] == pytest.approx(seconds[-1])
    for x, y in zip(drawn_x, drawn_y):
        assert y == pytest.approx(accuracy_at_time(curve, x))  # e.g. 72.5% at 30 s: straight in time
