"""Interpolation along a tradeoff curve and the Pareto frontier, against hand-computed numbers."""

import pytest

from training.tradeoff.curves import CurvePoint, Reach, accuracy_at_time, pareto_frontier, time_to_accuracy

# Budgets 0.5, 1, 2: 10 s -> 60%, 20 s -> 70%, 40 s -> 75%.
CURVE = [CurvePoint(1.0, 20.0, 0.70), CurvePoint(0.5, 10.0, 0.60), CurvePoint(2.0, 40.0, 0.75)]


@pytest.mark.parametrize("target, seconds", [
    (0.65, 15.0),  # half way from 60% to 70%: half way from 10 s to 20 s
    (0.70, 20.0),  # exactly a measured point
    (0.72, 28.0),  # 2/5 of the way from 70% to 75%: 20 + 0.4 * 20
    (0.75, 40.0),
])
def test_time_to_accuracy_interpolates_linearly_between_budgets(target, seconds):
    reach = time_to_accuracy(CURVE, target)
    assert reach.seconds == pytest.approx(seconds)
    assert not reach.at_most


def test_a_target_above_the_curve_is_not_reached_and_one_below_is_bounded_by_the_cheapest_point():
    assert time_to_accuracy(CURVE, 0.76) == Reach(None)
    assert time_to_accuracy(CURVE, 0.50) == Reach(10.0, at_most=True)


def test_a_curve_that_dips_is_read_at_its_first_crossing():
    dipping = [CurvePoint(1, 10.0, 0.5), CurvePoint(2, 20.0, 0.8), CurvePoint(3, 30.0, 0.6), CurvePoint(4, 40.0, 0.9)]
    assert time_to_accuracy(dipping, 0.7).seconds == pytest.approx(10 + 20 / 3)  # 0.2 of 0.3 up, not 35 s


@pytest.mark.parametrize("seconds, top1", [(10.0, 0.60), (15.0, 0.65), (30.0, 0.725), (40.0, 0.75)])
def test_accuracy_at_time_interpolates_and_never_extrapolates(seconds, top1):
    assert accuracy_at_time(CURVE, seconds) == pytest.approx(top1)
    assert accuracy_at_time(CURVE, 9.9) is None and accuracy_at_time(CURVE, 40.1) is None


def test_a_one_point_curve_answers_only_at_its_own_time():
    single = [CurvePoint(1.0, 5.0, 0.4)]
    assert accuracy_at_time(single, 5.0) == 0.4
    assert time_to_accuracy(single, 0.4) == Reach(5.0, at_most=True)
    assert time_to_accuracy(single, 0.5) == Reach(None)


def test_empty_and_non_positive_curves_are_refused():
    with pytest.raises(ValueError, match="at least one point"):
        time_to_accuracy([], 0.5)
    with pytest.raises(ValueError, match="seconds > 0"):
        accuracy_at_time([CurvePoint(1.0, 0.0, 0.5)], 0.0)


def test_pareto_frontier_keeps_exactly_the_undominated_points():
    points = [
        (10.0, 0.60),  # 0: frontier (fastest)
        (12.0, 0.58),  # 1: beaten by 0 (slower and less accurate)
        (20.0, 0.70),  # 2: frontier
        (20.0, 0.69),  # 3: beaten by 2 (same time, less accurate)
        (30.0, 0.70),  # 4: beaten by 2 (slower, only as accurate)
        (40.0, 0.80),  # 5: frontier (most accurate)
        (5.0, 0.40),   # 6: frontier (fastest of all)
    ]
    assert pareto_frontier(points) == [6, 0, 2, 5]


def test_pareto_frontier_keeps_both_copies_of_a_tie():
    assert pareto_frontier([(1.0, 0.5), (1.0, 0.5), (2.0, 0.4)]) == [0, 1]
