"""The methods an ablation can add to or remove from a recipe: every registered method that trains.

A method is on when its ``methods.<name>`` is not None; the ablation removes it from a base that
has it, and adds it, with the options it registered to be tried with, to a base that has not.
Evaluation-stage methods (TTA) are not in the catalog: the ablation scores every run with them.

    >>> from fastcore_ops.training.recipes import get_recipe
    >>> METHODS["cutout"].toggle(get_recipe("cifar_baseline"))
    ('added', ("methods.cutout={'holes': 1, 'side_fraction': 0.5}",))
    >>> METHODS["blurpool"].toggle(get_recipe("cifar_mild"))
    ('removed', ('methods.blurpool=None',))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.registry import RegisteredMethod, all_methods, on_registration
from fastcore_ops.training.tasks.registry import task_named


@dataclass(frozen=True)
class MethodSwitch:
    """How to add one registered method to a configuration and how to remove it."""

    method: RegisteredMethod

    @property
    def field(self) -> str:
        return f"methods.{self.method.name}"

    def applies_to(self, config: TrainConfig) -> bool:
        """Whether the method can be added to or removed from ``config``'s task."""
        return self.method.applies_to(task_named(config.task))

    def present(self, config: TrainConfig) -> bool:
        """Whether ``config`` uses the method."""
        return getattr(config.methods, self.method.name) is not None

    def toggle(self, config: TrainConfig) -> tuple[str, tuple[str, ...]]:
        """("added" or "removed", the --set values that do it) for ``config``."""
        if self.present(config):
            return "removed", (f"{self.field}=None",)
        return "added", (f"{self.field}={dataclasses.asdict(self.method.try_with)!r}",)


def _add_switch(method: RegisteredMethod) -> None:
    if method.stage != "evaluation":
        METHODS[method.name] = MethodSwitch(method)


METHODS: dict[str, MethodSwitch] = {}
for _method in all_methods():
    _add_switch(_method)
on_registration(_add_switch)  # a method of the user's own, which --import registers later
