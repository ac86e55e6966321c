"""An ablation's arms: its base recipe, and the base with each method of ``--methods`` added or removed.

    >>> arms, shared = ablation_arms("cifar_baseline", "cutout,mixup")
    >>> [arm.name for arm in arms], shared
    (['cifar_baseline', 'cifar_baseline+cutout', 'cifar_baseline+mixup'], ('methods.tta={}',))
"""

from __future__ import annotations

from fastcore_ops import cli
from fastcore_ops.training.ablate.catalog import METHODS
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.recipes import get_recipe, list_recipes
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.tradeoff.planning import Variant


def ablation_arms(base: str, methods: str) -> tuple[list[Variant], tuple[str, ...]]:
    """The curves of an ablation of ``methods`` (comma-separated, or "all") against recipe ``base``
    (:func:`variants`), and the ``--set`` values every run takes from the base's task
    (:func:`task_settings`). ValueError names a recipe or method that is not known, or a method that
    does not apply to the base's task.
    """
    recipe = cli.check_name("--recipe", base, list_recipes(), "recipe")
    names = None if methods.strip() == "all" else cli.check_names("--methods", methods, METHODS, "method")
    config = get_recipe(recipe)
    task = task_named(config.task)
    return variants(recipe, config, methods_for(task, names)), task_settings(task, config)


def task_settings(task, config: TrainConfig) -> tuple[str, ...]:
    """The task's ablation settings (image runs also evaluate with test-time augmentation) that ``config`` lacks: a
    method the base already uses keeps the base's own options, so every arm is judged as the recipe judges itself.

    Example:
        >>> image_task = task_named("image_classification")
        >>> task_settings(image_task, get_recipe("cifar_baseline"))
        ('methods.tta={}',)
        >>> task_settings(image_task, get_recipe("cifar_record"))  # its own TTA, airbench94's
        ()
    """
    def base_uses(assignment: str) -> bool:
        section, _, field = assignment.partition("=")[0].partition(".")
        return section == "methods" and getattr(config.methods, field) is not None

    return tuple(assignment for assignment in task.ablation_assignments if not base_uses(assignment))


def methods_for(task, names: list[str] | None) -> list[str]:
    """``names``, each a method of the catalog that applies to ``task`` (ValueError names one that does not);
    None: every such method.

    Example:
        >>> methods_for(task_named("image_classification"), ["cutout", "mixup"])
        ['cutout', 'mixup']
        >>> methods_for(task_named("language_model"), None)[:4]
        ['alibi', 'bias_lr_scale', 'low_precision_norm', 'sam']
    """
    if names is None:
        return [name for name, switch in METHODS.items() if switch.method.applies_to(task)]
    for name in names:
        if not METHODS[name].method.applies_to(task):
            raise ValueError(f"--methods: {METHODS[name].method.mismatch(task)} (the base's task); leave it out")
    return names


def variants(base: str, config: TrainConfig, methods: list[str]) -> list[Variant]:
    """The base, then for each method the base with it added ("base+name") or removed ("base-name").

    Example:
        >>> [v.name for v in variants("cifar_medium", get_recipe("cifar_medium"), ["cutout", "ema"])]
        ['cifar_medium', 'cifar_medium+cutout', 'cifar_medium-ema']
    """
    arms = [Variant.of(base)]
    for name in methods:
        change, assignments = METHODS[name].toggle(config)
        arms.append(Variant(f"{base}{'+' if change == 'added' else '-'}{name}", base, assignments))
    return arms
