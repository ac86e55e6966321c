"""Training recipes: one module each, defining ``RECIPE``: a :class:`Derived` recipe, or a root one.

A recipe is data. A derived recipe names its parent recipe and only the fields it changes, by the
dotted names ``--set`` takes (``section.field``, ``methods.name.option``), each value checked against
the field's type; a root recipe is a whole :class:`~fastcore_ops.training.config.TrainConfig`. The
module docstring says where the numbers come from. Adding a recipe is adding a module here; it is
found by name, and ``python -m fastcore_ops.training.recipes show NAME`` prints what it resolves to
and what it changes. A package of your own registers its recipes with :func:`register_recipe` as
its module loads (the commands import it with ``--import MODULE``).

    >>> config = get_recipe("cifar_mild")
    >>> config.schedule.epochs = 4.0  # a fresh copy: the recipe itself is unchanged
    >>> recipe_parent("cifar_mild"), get_recipe("cifar_mild").schedule.epochs
    ('cifar_baseline', 14.0)
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from typing import TYPE_CHECKING

from fastcore_ops import cli
from fastcore_ops.discovery import package_modules

if TYPE_CHECKING:
    from fastcore_ops.training.config import TrainConfig

# The recipes are listed without importing them, or the configuration (which imports torch): a command's
# parser names them. A recipe's module, and TrainConfig, load when a recipe is used.

__all__ = ["Derived", "get_recipe", "list_recipes", "recipe_parent", "register_recipe"]


@dataclasses.dataclass(frozen=True)
class Derived:
    """A recipe stated as its parent recipe's name and the fields it changes, ``{"section.field": value}``.

        >>> Derived("cifar_baseline", {"optimizer.lr": 0.8}).parent
        'cifar_baseline'
    """

    parent: str
    changes: dict[str, object]


_REGISTERED: dict[str, TrainConfig | Derived] = {}  # recipes defined outside this package


def register_recipe(name: str, config: TrainConfig | Derived) -> None:
    """Make ``config`` (a whole TrainConfig, or a :class:`Derived` one) the recipe ``name``, for a recipe defined
    outside this package (with its own task, say).

        >>> from fastcore_ops.training.config import TrainConfig
        >>> register_recipe("cifar_mild", TrainConfig())
        Traceback (most recent call last):
        ...
        ValueError: recipe 'cifar_mild' is registered twice; give one of them another name
    """
    from fastcore_ops.training.config import TrainConfig

    if not isinstance(config, (TrainConfig, Derived)):
        raise TypeError(f"config must be a TrainConfig or a Derived recipe, got {type(config).__name__}")
    if name in list_recipes() and _REGISTERED.get(name) is not config:
        raise ValueError(f"recipe {name!r} is registered twice; give one of them another name")
    _REGISTERED[name] = config


def list_recipes() -> list[str]:
    """The names of the recipes in this package, sorted.

    Example:
        >>> "resnet50_hot" in list_recipes()
        True
    """
    modules = [name for name in package_modules(__name__) if not name.startswith("_")]
    return sorted([*modules, *_REGISTERED])


def get_recipe(name: str) -> TrainConfig:
    """A copy of recipe ``name``'s config, its parents' changes applied, free for the caller to change.

    Example:
        >>> get_recipe("resnet50_baseline").optimizer.momentum
        0.875
    """
    from fastcore_ops.training.config import with_changes

    config, lineage = recipe_lineage(name)
    for recipe, changes in lineage:
        try:
            config = with_changes(config, changes)
        except ValueError as error:
            raise ValueError(f"recipe {recipe}: {error}") from None
    return config


def recipe_lineage(name: str) -> tuple[TrainConfig, list[tuple[str, dict[str, object]]]]:
    """Recipe ``name`` as the root recipe it descends from (a copy, named ``name``) and each derived recipe's
    changes on the way down to it, ``(recipe, {"section.field": value})``, the root's child first.

        >>> root, lineage = recipe_lineage("cifar_mild")
        >>> root.name, [recipe for recipe, _ in lineage]
        ('cifar_mild', ['cifar_mild'])
    """
    recipes = list_recipes()
    if name not in recipes:
        raise ValueError(f"name must be one of the recipes {', '.join(recipes)}; got {name!r}")
    names, lineage, recipe = [name], [], _declared(name)
    while isinstance(recipe, Derived):  # walk up to the root, nearest parent first
        lineage.append((names[-1], recipe.changes))
        if recipe.parent in names:
            raise ValueError(f"recipe {name} descends from itself: {' -> '.join((*names, recipe.parent))}; "
                             f"one of them must name another parent")
        if recipe.parent not in recipes:
            raise ValueError(f"recipe {names[-1]}: parent {cli.shown(recipe.parent)} is not a recipe; "
                             f"{cli.closest(recipe.parent, recipes)}")
        names.append(recipe.parent)
        recipe = _declared(recipe.parent)
    # Deep, because the sections are mutable dataclasses shared with the module constants.
    return copy.deepcopy(dataclasses.replace(recipe, name=name)), lineage[::-1]


def recipe_parent(name: str) -> str | None:
    """The name of the recipe ``name`` derives from, or None for a root recipe.

        >>> recipe_parent("cifar_hot"), recipe_parent("cifar_baseline")
        ('cifar_medium', None)
    """
    declared = _declared(name)
    return declared.parent if isinstance(declared, Derived) else None


def _declared(name: str) -> TrainConfig | Derived:
    """Recipe ``name`` as declared: its config, or its parent and changes."""
    from fastcore_ops.training.config import TrainConfig

    recipe = _REGISTERED[name] if name in _REGISTERED else importlib.import_module(f"{__name__}.{name}").RECIPE
    if not isinstance(recipe, (TrainConfig, Derived)):
        raise TypeError(f"{__name__}.{name}.RECIPE must be a TrainConfig or a Derived recipe, got "
                        f"{type(recipe).__name__}")
    return recipe
