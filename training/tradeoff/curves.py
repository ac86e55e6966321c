"""Tradeoff curves and the arithmetic on them: interpolation along a curve and the Pareto frontier.

A curve is a recipe's (training seconds, top-1) points on one machine, one point per budget,
sorted by time. Interpolation is piecewise linear in time (not log-time): between two measured
budgets the run length, and so the time, grows linearly with the scale-schedule ratio, and a
straight segment is the simplest reading that invents nothing. Nothing is extrapolated.

    >>> curve = [CurvePoint(1.0, 10.0, 0.50), CurvePoint(2.0, 20.0, 0.70)]
    >>> time_to_accuracy(curve, 0.60)
    Reach(seconds=15.0, at_most=False)
    >>> accuracy_at_time(curve, 12.5)
    0.55
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CurvePoint:
    """One budget of a curve: the scale-schedule ratio, its training seconds and its top-1 (0-1)."""

    budget: float
    seconds: float
    top1: float


@dataclass(frozen=True)
class Reach:
    """When a curve first reaches an accuracy.

    seconds: the interpolated training time, or None when the curve never reaches the target.
    at_most: the curve's cheapest point already beats the target, so the true time is at most
        ``seconds`` (the time of that point); we do not extrapolate below the cheapest budget.
    """

    seconds: float | None
    at_most: bool = False


def _sorted_by_time(curve: Sequence[CurvePoint]) -> list[CurvePoint]:
    if not curve:
        raise ValueError("curve must hold at least one point, got an empty sequence")
    for point in curve:
        if not (math.isfinite(point.seconds) and point.seconds > 0 and math.isfinite(point.top1)):
            raise ValueError(f"curve points need finite seconds > 0 and a finite top1, got {point}")
    return sorted(curve, key=lambda point: point.seconds)


def time_to_accuracy(curve: Sequence[CurvePoint], target: float) -> Reach:
    """The training time at which ``curve`` first reaches top-1 ``target``, walking from its cheapest point.

    A curve whose accuracy dips and rises again is read at its first crossing: the cheapest
    way to get there. Example:

        >>> curve = [CurvePoint(0.5, 4.0, 0.40), CurvePoint(1.0, 8.0, 0.60), CurvePoint(2.0, 16.0, 0.80)]
        >>> round(time_to_accuracy(curve, 0.70).seconds, 6)
        12.0
        >>> time_to_accuracy(curve, 0.30), time_to_accuracy(curve, 0.90)
        (Reach(seconds=4.0, at_most=True), Reach(seconds=None, at_most=False))
    """
    points = _sorted_by_time(curve)
    if points[0].top1 >= target:
        return Reach(points[0].seconds, at_most=True)
    for before, after in zip(points, points[1:]):
        if before.top1 < target <= after.top1:
            fraction = (target - before.top1) / (after.top1 - before.top1)
            return Reach(before.seconds + fraction * (after.seconds - before.seconds))
    return Reach(None)


def accuracy_at_time(curve: Sequence[CurvePoint], seconds: float) -> float | None:
    """The top-1 of ``curve`` interpolated at ``seconds``; None outside the curve's measured times.

    Example:
        >>> accuracy_at_time([CurvePoint(1, 10.0, 0.5), CurvePoint(2, 30.0, 0.9)], 20.0)
        0.7
    """
    points = _sorted_by_time(curve)
    if not points[0].seconds <= seconds <= points[-1].seconds:
        return None
    for before, after in zip(points, points[1:]):
        if before.seconds <= seconds <= after.seconds:
            if after.seconds == before.seconds:
                return max(before.top1, after.top1)
            fraction = (seconds - before.seconds) / (after.seconds - before.seconds)
            return before.top1 + fraction * (after.top1 - before.top1)
    return points[0].top1  # a one-point curve asked at its own time


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (seconds, top-1) points no other point beats, sorted by time.

    A point is beaten by one at most as slow and at least as accurate, and strictly better in
    one of the two. Example:

        >>> pareto_frontier([(10, 0.5), (5, 0.6), (20, 0.8), (20, 0.7)])
        [1, 2]
    """
    frontier = []
    for index, (seconds, top1) in enumerate(points):
        beaten = any(other_s <= seconds and other_a >= top1 and (other_s < seconds or other_a > top1)
                     for other_s, other_a in points)
        if not beaten:
            frontier.append(index)
    return sorted(frontier, key=lambda index: (points[index][0], points[index][1]))
