"""The one list of training tasks: each task class registers itself, by name, where it is defined.

``@register_task`` is the only place a task is named. A configuration's ``task`` field is looked
up here (:func:`task_named`), and everything that differs between tasks is asked of the class
it returns (:class:`fastcore_ops.training.tasks.base.Task`): its models, data check and fingerprint, what it
builds, its loss and metrics, what methods may need of it, and its sweep defaults.

The built-in tasks are the modules of this package; a task from another package registers
when its module is imported (``python -m fastcore_ops.training.train --import my_package.my_task``).

    >>> task_named("image_classification").metric
    'top1'
"""

from __future__ import annotations

from collections.abc import Callable

from fastcore_ops.discovery import import_package_modules

_REGISTRY: dict[str, type] = {}


def register_task(name: str) -> Callable[[type], type]:
    """Register the decorated :class:`~fastcore_ops.training.tasks.base.Task` subclass as the task ``name``.

    As ``fastcore_ops/training/tasks/classification.py`` does::

        @register_task("image_classification")
        class ImageClassification(Task): ...
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a task name (a Python identifier, such as 'image_classification'), "
                         f"got {name!r}")

    def register(task: type) -> type:
        if name in _REGISTRY and _REGISTRY[name] is not task:
            raise ValueError(f"task {name!r} is registered twice ({_REGISTRY[name].__module__} and "
                             f"{task.__module__}); give one of them another name")
        task.name = name
        _REGISTRY[name] = task
        return task

    return register


def _load_builtin_tasks() -> None:
    import_package_modules("fastcore_ops.training.tasks")  # as every registry finds its entries: see its module


def all_tasks() -> list[type]:
    """Every registered task class, by name."""
    _load_builtin_tasks()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def task_names() -> list[str]:
    """The registered task names, sorted.

        >>> task_names()[:2]
        ['image_classification', 'language_model']
    """
    return [task.name for task in all_tasks()]


def task_named(name: object) -> type:
    """The task class registered as ``name``, or an error listing the registered tasks."""
    if not isinstance(name, str):
        raise TypeError(f"task must be a task name (str), got {type(name).__name__} {name!r}")
    if name not in _REGISTRY:
        _load_builtin_tasks()  # a built-in task registers when its module is first imported
    if name not in _REGISTRY:
        raise ValueError(f"task must be one of {', '.join(map(repr, task_names()))}, got {name!r}; a task defined in "
                         f"your own package is registered by importing its module "
                         f"(python -m fastcore_ops.training.train --import MODULE)")
    return _REGISTRY[name]
