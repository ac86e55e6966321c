"""Training recipes: one module each, defining ``RECIPE``, a :class:`~fastcore_ops.training.config.TrainConfig`.

A recipe is data: every choice it makes is a field of the config, and its module docstring
says where the numbers come from. Adding a recipe is adding a module here; it is found by name.
A package of your own registers its recipes with :func:`register_recipe` as its module loads
(the commands import it with ``--import MODULE``).

    >>> config = get_recipe("cifar_mild")
    >>> config.schedule.epochs = 4.0  # a fresh copy: the recipe itself is unchanged
"""

from __future__ import annotations

import copy
import importlib

from fastcore_ops.discovery import import_package_modules
from fastcore_ops.training.config import TrainConfig

__all__ = ["get_recipe", "list_recipes", "register_recipe"]

_REGISTERED: dict[str, TrainConfig] = {}  # recipes defined outside this package


def register_recipe(name: str, config: TrainConfig) -> None:
    """Make ``config`` the recipe ``name``, for a recipe defined outside this package (with its own task, say).

        >>> register_recipe("cifar_mild", TrainConfig())
        Traceback (most recent call last):
        ...
        ValueError: recipe 'cifar_mild' is registered twice; give one of them another name
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if name in list_recipes() and _REGISTERED.get(name) is not config:
        raise ValueError(f"recipe {name!r} is registered twice; give one of them another name")
    _REGISTERED[name] = config


def list_recipes() -> list[str]:
    """The names of the recipes in this package, sorted.

    Example:
        >>> "resnet50_hot" in list_recipes()
        True
    """
    modules = [name for name in import_package_modules(__name__) if not name.startswith("_")]
    return sorted([*modules, *_REGISTERED])


def get_recipe(name: str) -> TrainConfig:
    """A copy of recipe ``name``'s config, free for the caller to change.

    Example:
        >>> get_recipe("resnet50_baseline").optimizer.momentum
        0.875
    """
    recipes = list_recipes()
    if name not in recipes:
        raise ValueError(f"name must be one of the recipes {', '.join(recipes)}; got {name!r}")
    recipe = _REGISTERED[name] if name in _REGISTERED else importlib.import_module(f"{__name__}.{name}").RECIPE
    if not isinstance(recipe, TrainConfig):
        raise TypeError(f"{__name__}.{name}.RECIPE must be a TrainConfig, got {type(recipe).__name__}")
    # Deep, because the sections are mutable dataclasses shared with the module constant.
    return copy.deepcopy(recipe)
