"""Interpolation along a tradeoff curve and the Pareto frontier, against hand-computed numbers.

Top-1 (higher is better) first, then validation loss (lower is better).
"""

import pytest

from fastcore_ops.training.tradeoff.curves import CurvePoint, Reach, pareto_frontier, quality_at_time, time_to_quality


def reach_top1(curve, target):
    """Top-1 is higher-is-better; the helpers keep the top-1 tests short."""
    return time_to_quality(curve, target, higher_is_better=True)


def top1_at(curve, seconds):
    return quality_at_time(curve, seconds, higher_is_better=True)


# Budgets 0.5, 1, 2: 10 s -> 60%, 20 s -> 70%, 40 s -> 75%.
CURVE = [CurvePoint(1.0, 20.0, 0.70), CurvePoint(0.5, 10.0, 0.60), CurvePoint(2.0, 40.0, 0.75)]


@pytest.mark.parametrize("target, seconds", [
    (0.65, 15.0),  # half way from 60% to 70%: half way from 10 s to 20 s
    (0.70, 20.0),  # exactly a measured point
    (0.72, 28.0),  # 2/5 of the way from 70% to 75%: 20 + 0.4 * 20
    (0.75, 40.0),
])
def test_time_to_top1_interpolates_linearly_between_budgets(target, seconds):
    reach = reach_top1(CURVE, target)
    assert reach.seconds == pytest.approx(seconds)
    assert not reach.at_most


def test_a_target_above_the_curve_is_not_reached_and_one_below_is_bounded_by_the_cheapest_point():
    assert reach_top1(CURVE, 0.76) == Reach(None)
    assert reach_top1(CURVE, 0.50) == Reach(10.0, at_most=True)


def test_a_curve_that_dips_is_read_at_its_first_crossing():
    dipping = [CurvePoint(1, 10.0, 0.5), CurvePoint(2, 20.0, 0.8), CurvePoint(3, 30.0, 0.6), CurvePoint(4, 40.0, 0.9)]
    assert reach_top1(dipping, 0.7).seconds == pytest.approx(10 + 20 / 3)  # 0.2 of 0.3 up, not 35 s


@pytest.mark.parametrize("seconds, top1", [(10.0, 0.60), (15.0, 0.65), (30.0, 0.725), (40.0, 0.75)])
def test_top1_at_time_interpolates_and_never_extrapolates(seconds, top1):
    assert top1_at(CURVE, seconds) == pytest.approx(top1)
    assert top1_at(CURVE, 9.9) is None and top1_at(CURVE, 40.1) is None


def test_a_one_point_curve_answers_only_at_its_own_time():
    single = [CurvePoint(1.0, 5.0, 0.4)]
    assert top1_at(single, 5.0) == 0.4
    assert reach_top1(single, 0.4) == Reach(5.0, at_most=True)
    assert reach_top1(single, 0.5) == Reach(None)


def test_empty_and_non_positive_curves_are_refused():
    with pytest.raises(ValueError, match="at least one point"):
        reach_top1([], 0.5)
    with pytest.raises(ValueError, match="seconds > 0"):
        top1_at([CurvePoint(1.0, 0.0, 0.5)], 0.0)


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
    assert pareto_frontier(points, higher_is_better=True) == [6, 0, 2, 5]


def test_pareto_frontier_keeps_both_copies_of_a_tie():
    assert pareto_frontier([(1.0, 0.5), (1.0, 0.5), (2.0, 0.4)], higher_is_better=True) == [0, 1]


# A validation loss falling with the budget: 10 s -> 3.0, 20 s -> 2.0, 40 s -> 1.5 nats/token.
LOSS_CURVE = [CurvePoint(1.0, 20.0, 2.0), CurvePoint(2.0, 40.0, 1.5), CurvePoint(0.5, 10.0, 3.0)]


@pytest.mark.parametrize("target, seconds", [
    (2.5, 15.0),  # half way down from 3.0 to 2.0: half way from 10 s to 20 s
    (2.0, 20.0),  # exactly a measured point
    (1.8, 28.0),  # 2/5 of the way down from 2.0 to 1.5: 20 + 0.4 * 20
    (1.5, 40.0),
])
def test_time_to_a_lower_loss_interpolates_linearly_between_budgets(target, seconds):
    reach = time_to_quality(LOSS_CURVE, target, higher_is_better=False)
    assert reach.seconds == pytest.approx(seconds)
    assert not reach.at_most


def test_a_loss_below_the_curve_is_not_reached_and_one_above_is_bounded_by_the_cheapest_point():
    assert time_to_quality(LOSS_CURVE, 1.4, higher_is_better=False) == Reach(None)
    assert time_to_quality(LOSS_CURVE, 3.5, higher_is_better=False) == Reach(10.0, at_most=True)
    # Read the wrong way round, the same numbers would answer differently.
    assert time_to_quality(LOSS_CURVE, 3.5, higher_is_better=True) == Reach(None)


def test_a_loss_curve_that_rises_again_is_read_at_its_first_crossing():
    bumpy = [CurvePoint(1, 10.0, 3.0), CurvePoint(2, 20.0, 1.0), CurvePoint(3, 30.0, 2.5), CurvePoint(4, 40.0, 0.5)]
    assert time_to_quality(bumpy, 2.0, higher_is_better=False).seconds == pytest.approx(15.0)  # not 32 s


def test_loss_at_time_interpolates_and_picks_the_lower_of_two_points_at_one_time():
    assert quality_at_time(LOSS_CURVE, 30.0, higher_is_better=False) == pytest.approx(1.75)
    assert quality_at_time(LOSS_CURVE, 45.0, higher_is_better=False) is None
    tie = [CurvePoint(1.0, 10.0, 2.5), CurvePoint(2.0, 10.0, 2.0)]
    assert quality_at_time(tie, 10.0, higher_is_better=False) == 2.0
    assert quality_at_time(tie, 10.0, higher_is_better=True) == 2.5


def test_both_directions_are_one_computation_mirrored():
    # Negating every quality and the direction must give the same times, for every target.
    mirrored = [CurvePoint(p.budget, p.seconds, -p.quality) for p in LOSS_CURVE]
    for target in (3.5, 3.0, 2.5, 2.0, 1.8, 1.5, 1.4):
        assert time_to_quality(LOSS_CURVE, target, False) == time_to_quality(mirrored, -target, True)


def test_pareto_frontier_with_lower_is_better_keeps_exactly_the_undominated_points():
    points = [
        (10.0, 2.00),  # 0: frontier (fastest of the rest)
        (12.0, 2.10),  # 1: beaten by 0 (slower and a higher loss)
        (20.0, 1.50),  # 2: frontier
        (20.0, 1.60),  # 3: beaten by 2 (same time, higher loss)
        (30.0, 1.50),  # 4: beaten by 2 (slower, only as low)
        (40.0, 1.20),  # 5: frontier (lowest loss)
        (5.0, 3.00),   # 6: frontier (fastest of all)
    ]
    assert pareto_frontier(points, higher_is_better=False) == [6, 0, 2, 5]
    # Read as if higher were better, the frontier is the fastest point and the high losses.
    assert pareto_frontier(points, higher_is_better=True) == [6]


def test_the_direction_must_be_a_bool():
    with pytest.raises(TypeError, match="higher_is_better must be True or False, got 'false'"):
        time_to_quality(LOSS_CURVE, 2.0, "false")
