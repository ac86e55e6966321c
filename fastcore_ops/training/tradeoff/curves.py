"""Tradeoff curves and the arithmetic on them: interpolation along a curve and the Pareto frontier.

A curve is a recipe's (training seconds, quality) points on one machine, one point per budget,
sorted by time. Quality is whatever the runs' metric is (top-1, validation loss); every
function takes ``higher_is_better`` and compares through its sign (``direction``), so both
directions share one implementation. Interpolation is piecewise linear in time (not log-time):
between two measured budgets the run length, and so the time, grows linearly with the
scale-schedule ratio, and a straight segment is the simplest reading that invents nothing.
Nothing is extrapolated.

    >>> curve = [CurvePoint(1.0, 10.0, 0.50), CurvePoint(2.0, 20.0, 0.70)]
    >>> time_to_quality(curve, 0.60, higher_is_better=True)
    Reach(seconds=15.0, at_most=False)
    >>> quality_at_time(curve, 12.5, higher_is_better=True)
    0.55
    >>> loss = [CurvePoint(1.0, 10.0, 2.0), CurvePoint(2.0, 20.0, 1.0)]
    >>> time_to_quality(loss, 1.5, higher_is_better=False)
    Reach(seconds=15.0, at_most=False)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

Key = TypeVar("Key")



def direction(higher_is_better: bool) -> int:
    """+1 when higher values are better, -1 when lower ones are: multiplied in, it makes "better" mean "larger".

    Example:
        >>> direction(True), direction(False)
        (1, -1)
    """
    # A bool check, not truthiness: a direction read from JSON as "false" would otherwise mean True.
    if not isinstance(higher_is_better, bool):
        raise TypeError(f"higher_is_better must be True or False, got {higher_is_better!r}")
    return 1 if higher_is_better else -1


@dataclass(frozen=True)
class CurvePoint:
    """One budget of a curve: the scale-schedule ratio, its training seconds and its quality (the metric's value)."""

    budget: float
    seconds: float
    quality: float


@dataclass(frozen=True)
class Reach:
    """When a curve first reaches a target quality.

    seconds: the interpolated training time, or None when the curve never reaches the target.
    at_most: the curve's cheapest point already reaches the target, so the true time is at most
        ``seconds`` (the time of that point); we do not extrapolate below the cheapest budget.
    """

    seconds: float | None
    at_most: bool = False

    def speedup(self, baseline_seconds: float) -> float | None:
        """How many times faster than ``baseline_seconds`` the target is reached; None when it never is.

            >>> Reach(5.0).speedup(10.0), Reach(None).speedup(10.0)
            (2.0, None)
        """
        return None if self.seconds is None else baseline_seconds / self.seconds


def _sorted_by_time(curve: Sequence[CurvePoint]) -> list[CurvePoint]:
    if not curve:
        raise ValueError("curve must hold at least one point, got an empty sequence")
    for point in curve:
        if not (math.isfinite(point.seconds) and point.seconds > 0 and math.isfinite(point.quality)):
            raise ValueError(f"curve points need finite seconds > 0 and a finite quality, got {point}")
    return sorted(curve, key=lambda point: point.seconds)


def time_to_quality(curve: Sequence[CurvePoint], target: float, higher_is_better: bool) -> Reach:
    """The training time at which ``curve`` first reaches quality ``target``, walking from its cheapest point.

    Reaching means at least ``target`` when higher is better, at most when lower is. A curve
    whose quality dips and recovers is read at its first crossing: the cheapest way to get
    there. Example (a validation loss falling from 3.0 to 1.0):

        >>> curve = [CurvePoint(0.5, 4.0, 3.0), CurvePoint(1.0, 8.0, 2.0), CurvePoint(2.0, 16.0, 1.0)]
        >>> time_to_quality(curve, 1.5, higher_is_better=False).seconds
        12.0
        >>> time_to_quality(curve, 3.5, False), time_to_quality(curve, 0.5, False)
        (Reach(seconds=4.0, at_most=True), Reach(seconds=None, at_most=False))
    """
    sign = direction(higher_is_better)
    points = _sorted_by_time(curve)
    # Signed, "reached" is always "at least the goal": one walk for both directions.
    goal, values = sign * target, [sign * point.quality for point in points]
    if values[0] >= goal:
        return Reach(points[0].seconds, at_most=True)
    for before, after, low, high in zip(points, points[1:], values, values[1:]):
        if low < goal <= high:
            fraction = (goal - low) / (high - low)
            return Reach(before.seconds + fraction * (after.seconds - before.seconds))
    return Reach(None)


def quality_at_time(curve: Sequence[CurvePoint], seconds: float, higher_is_better: bool) -> float | None:
    """The quality of ``curve`` interpolated at ``seconds``; None outside the curve's measured times.

    Two points at the same time (budgets that took equally long) answer with the better one.
    Example:
        >>> quality_at_time([CurvePoint(1, 10.0, 0.5), CurvePoint(2, 30.0, 0.9)], 20.0, higher_is_better=True)
        0.7
        >>> quality_at_time([CurvePoint(1, 10.0, 2.5), CurvePoint(2, 10.0, 2.0)], 10.0, higher_is_better=False)
        2.0
    """
    sign = direction(higher_is_better)
    points = _sorted_by_time(curve)
    if not points[0].seconds <= seconds <= points[-1].seconds:
        return None
    for before, after in zip(points, points[1:]):
        if before.seconds <= seconds <= after.seconds:
            if after.seconds == before.seconds:
                return max(before.quality, after.quality, key=lambda quality: sign * quality)
            fraction = (seconds - before.seconds) / (after.seconds - before.seconds)
            return before.quality + fraction * (after.quality - before.quality)
    return points[0].quality  # a one-point curve asked at its own time


def pareto_frontier(points: Sequence[tuple[float, float]], higher_is_better: bool) -> list[int]:
    """Indices of the (seconds, quality) points no other point beats, sorted by time.

    A point is beaten by one at most as slow and at least as good, and strictly better in one
    of the two. Example:

        >>> pareto_frontier([(10, 0.5), (5, 0.6), (20, 0.8), (20, 0.7)], higher_is_better=True)
        [1, 2]
        >>> pareto_frontier([(10, 2.0), (5, 1.9), (20, 1.2), (20, 1.3)], higher_is_better=False)
        [1, 2]
    """
    sign = direction(higher_is_better)
    signed = [(seconds, sign * quality) for seconds, quality in points]
    frontier = []
    for index, (seconds, value) in enumerate(signed):
        beaten = any(other_s <= seconds and other_v >= value and (other_s < seconds or other_v > value)
                     for other_s, other_v in signed)
        if not beaten:
            frontier.append(index)
    return sorted(frontier, key=lambda index: signed[index])


def pareto_keys(points: dict[Key, tuple[float, float]], higher_is_better: bool) -> list[Key]:
    """The keys of the (seconds, quality) ``points`` on their Pareto frontier (:func:`pareto_frontier`), sorted by time.

        >>> pareto_keys({"slow": (10, 0.5), "fast": (5, 0.6)}, higher_is_better=True)
        ['fast']
    """
    keys = list(points)
    return [keys[index] for index in pareto_frontier(list(points.values()), higher_is_better)]


def earliest_times(curve: Sequence[CurvePoint], higher_is_better: bool) -> list[float]:
    """For each point of ``curve``, in its order, the earliest time the curve reaches that point's quality.

    A point on the curve's Pareto frontier is its own earliest time; a point past a plateau (88.6% after
    88.7%) is timed where the curve first reached its quality: a longer budget that ends no better wasted time.
    Example:
        >>> earliest_times([CurvePoint(1, 10.0, 0.5), CurvePoint(2, 20.0, 0.7), CurvePoint(4, 40.0, 0.6)], True)
        [10.0, 20.0, 15.0]
    """
    frontier = set(pareto_frontier([(point.seconds, point.quality) for point in curve], higher_is_better))
    return [point.seconds if index in frontier else time_to_quality(curve, point.quality, higher_is_better).seconds
            for index, point in enumerate(curve)]
