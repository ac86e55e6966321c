"""The quality a run is judged by: a named metric, the direction that is better, and how to write its values.

Every run's ``summary.json`` names its metric (``"metric": "eval_loss"``), says whether higher
is better and gives a label of the form ``"quantity (unit)"``. The label is the only source of
wording: ``"top-1 (%)"`` is written "85.0% top-1", ``"validation loss (nats/token)"`` is written
"1.23 nats/token validation loss". A unit of ``%`` marks a fraction (the trainer's top-1 is 0-1)
shown in percent; any other unit is shown as the raw value.

    >>> loss = Metric("eval_loss", higher_is_better=False, label="validation loss (nats/token)")
    >>> f"to {loss.format(1.2345)} {loss.quantity}", loss.describe_gain(0.05)
    ('to 1.23 nats/token validation loss', 'lower by 0.050')
    >>> f"to {TOP1.format(0.85)} {TOP1.quantity}", TOP1.describe_gain(0.15)
    ('to 85.0% top-1', '+15.00')
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fastcore_ops.training.tradeoff.curves import direction

_LABEL = re.compile(r"^(?P<quantity>.*?)\s*\((?P<unit>[^()]*)\)$")  # "validation loss (nats/token)"


@dataclass(frozen=True)
class Metric:
    """A run's quality measure: its name in ``summary.json``'s metrics, its direction and its label.

    Example:
        >>> Metric("perplexity", False, "perplexity").format(3.4172)
        '3.42'
    """

    name: str
    higher_is_better: bool
    label: str

    def __post_init__(self):
        direction(self.higher_is_better)

    @property
    def sign(self) -> int:
        """+1 or -1: ``sign * value`` grows as the metric gets better."""
        return direction(self.higher_is_better)

    @property
    def quantity(self) -> str:
        """The label without its unit: "top-1", "validation loss"."""
        match = _LABEL.match(self.label)
        return match["quantity"] if match else self.label

    @property
    def unit(self) -> str:
        """The label's unit in brackets ("%", "nats/token"), or "" when it has none."""
        match = _LABEL.match(self.label)
        return match["unit"] if match else ""

    @property
    def percent(self) -> bool:
        """Whether values are fractions shown in percent (a label whose unit is %)."""
        return self.unit == "%"

    @property
    def axis_label(self) -> str:
        """The label for a plot's quality axis, saying which way is better when it is not up.

        Example:
            >>> Metric("eval_loss", False, "validation loss (nats/token)").axis_label
            'validation loss (nats/token), lower is better'
        """
        return self.label if self.higher_is_better else f"{self.label}, lower is better"

    def scaled(self, value: float) -> float:
        """``value`` in the unit shown: percent for a % metric, unchanged otherwise."""
        return 100 * value if self.percent else value

    def number(self, value: float, precise: bool = False) -> str:
        """``value`` as shown, without unit: one decimal of a percent or two of a raw value (one more if ``precise``).

        Example:
            >>> TOP1.number(0.6125, precise=True), Metric("eval_loss", False, "loss").number(1.2345)
            ('61.25', '1.23')
        """
        decimals = (1 if self.percent else 2) + int(precise)
        return f"{self.scaled(value):.{decimals}f}"

    def format(self, value: float, precise: bool = False) -> str:
        """``value`` with its unit: "85.0%", "1.23 nats/token", or the bare number for a label without unit."""
        number = self.number(value, precise)
        if self.percent or not self.unit:
            return f"{number}{self.unit}"
        return f"{number} {self.unit}"

    @property
    def gain_unit(self) -> str:
        """The unit of a difference of two values: percentage points for a % metric."""
        return "pp" if self.percent else self.unit

    def describe_gain(self, gain: float) -> str:
        """A difference from the baseline, ``gain`` > 0 meaning better: "+1.50" when higher is better, else in words.

        A signed number reads right only when up is better; for a loss "+0.05" would leave the
        reader guessing whether the loss or the quality went up, so it says "lower by 0.050".

        Example:
            >>> loss = Metric("eval_loss", False, "validation loss (nats/token)")
            >>> TOP1.describe_gain(-0.015), loss.describe_gain(-0.02), loss.describe_gain(0.0)
            ('-1.50', 'higher by 0.020', 'unchanged')
        """
        size = self.number(abs(gain), precise=True)
        if self.higher_is_better:
            return f"{'-' if gain < 0 else '+'}{size}"
        if gain == 0:
            return "unchanged"
        return f"{'lower' if gain > 0 else 'higher'} by {size}"

    def describe(self) -> str:
        """The metric in a few words, for error messages: "eval_loss (validation loss (nats/token), lower is better)"."""
        return f"{self.name} ({self.label}, {'higher' if self.higher_is_better else 'lower'} is better)"


# What every run measured before summaries named their metric.
TOP1 = Metric("top1", higher_is_better=True, label="top-1 (%)")


def one_metric(recipe_metrics: Iterable[tuple[str, Metric]]) -> Metric:
    """The one metric of all (recipe, metric) pairs; a report cannot compare recipes measured differently.

    Raises ValueError naming each metric's recipes. Example:
        >>> loss = Metric("eval_loss", False, "validation loss (nats/token)")
        >>> one_metric([("cifar_baseline", TOP1), ("cifar_mild", TOP1)]).name
        'top1'
        >>> one_metric([("cifar_baseline", TOP1), ("gpt_baseline", loss)])
        Traceback (most recent call last):
        ...
        ValueError: the runs do not share one metric, so their qualities cannot be compared: cifar_baseline measure top1 (top-1 (%), higher is better); gpt_baseline measure eval_loss (validation loss (nats/token), lower is better). Sweep or merge the recipes of one task (one metric) per report, each with its own --out
    """
    recipes: dict[Metric, list[str]] = {}
    for recipe, metric in recipe_metrics:
        names = recipes.setdefault(metric, [])
        if recipe not in names:
            names.append(recipe)
    if not recipes:
        raise ValueError("recipe_metrics must hold at least one run's metric, got none")
    if len(recipes) > 1:
        found = "; ".join(f"{', '.join(names)} measure {metric.describe()}" for metric, names in recipes.items())
        raise ValueError(f"the runs do not share one metric, so their qualities cannot be compared: {found}. "
                         f"Sweep or merge the recipes of one task (one metric) per report, each with its own --out")
    return next(iter(recipes))
