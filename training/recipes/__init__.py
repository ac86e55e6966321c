"""Training recipes: one module each, defining ``RECIPE``, a :class:`~training.config.TrainConfig`.

A recipe is data: every choice it makes is a field of the config, and its module docstring
says where the numbers come from. Adding a recipe is adding a module here; it is found by name.

    >>> config = get_recipe("cifar_mild")
    >>> config.schedule.epochs = 4.0  # a fresh copy: the recipe itself is unchanged
"""

from __future__ import annotations

import copy
import importlib
import pkgutil

from training.config import TrainConfig

__all__ = ["get_recipe", "list_recipes"]


def list_recipes() -> list[str]:
    """The names of the recipes in this package, sorted.

    Example:
        >>> "resnet50_hot" in list_recipes()
        True
    """
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def get_recipe(name: str) -> TrainConfig:
    """A copy of recipe ``name``'s config, free for the caller to change.

    Example:
        >>> get_recipe("resnet50_baseline").optimizer.momentum
        0.875
    """
    recipes = list_recipes()
    if name not in recipes:
        raise ValueError(f"name must be one of the recipes {', '.join(recipes)}; got {name!r}")
    recipe = importlib.import_module(f"{__name__}.{name}").RECIPE
    if not isinstance(recipe, TrainConfig):
        raise TypeError(f"{__name__}.{name}.RECIPE must be a TrainConfig, got {type(recipe).__name__}")
    # Deep, because the sections are mutable dataclasses shared with the module constant.
    return copy.deepcopy(recipe)
