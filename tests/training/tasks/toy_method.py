"""A method of a user's own, defined here and nowhere else: ``weight_clamp`` clamps every weight after each step.

It registers as this module loads, as a user's own package would register it; the commands load it with
``--import tests.training.tasks.toy_method`` (test_toy_task.py runs them), after the configuration's methods
section was built, which then gains its field.
"""

from dataclasses import dataclass

import torch

from fastcore_ops.training.methods.base import Method
from fastcore_ops.training.methods.registry import register_method


@register_method("weight_clamp", stage="step", order=299, try_with={"limit": 2.0})
@dataclass(frozen=True)
class WeightClampOptions:
    """Clamp every weight into [-limit, limit] after each step; ``methods.weight_clamp``."""

    limit: float = 1.0

    def __post_init__(self) -> None:
        if not self.limit > 0:
            raise ValueError(f"limit must be > 0, got {self.limit!r}")

    def attach(self, config) -> Method:
        return WeightClamp(self.limit)


class WeightClamp(Method):
    """After each optimizer step, clamps ``state.model``'s parameters into [-limit, limit]."""

    def __init__(self, limit: float):
        self.limit = limit

    def on_step_end(self, state) -> None:
        with torch.no_grad():
            for parameter in state.model.parameters():
                parameter.clamp_(-self.limit, self.limit)
