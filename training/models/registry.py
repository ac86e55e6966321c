"""The models a recipe can name, each registered where it is defined, as timm's ``@register_model`` does.

A builder registers under its task: image classifiers take ``num_classes``, language models
``vocab_size``, ``sequence_length`` and their ``options``. Image tasks also accept any
torchvision classifier by name (:func:`training.models.build_model`).

    >>> "cifar_resnet20" in names("image_classification"), names("language_model")
    (True, ['gpt', 'hf_gpt2'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

TASKS = ("image_classification", "language_model")


@dataclass(frozen=True)
class RegisteredModel:
    """A model name, the task it serves and the function that builds it, randomly initialized."""

    name: str
    task: str
    build: Callable


_REGISTRY: dict[str, RegisteredModel] = {}


def register_model(task: str, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register the decorated builder under ``name`` (default: the function's name) for ``task``.

    As ``training/models/cifar_resnet.py`` does::

        @register_model("image_classification")
        def cifar_resnet20(num_classes: int = 10, **kwargs) -> CifarResNet: ...
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")

    def register(build: Callable) -> Callable:
        key = name or build.__name__
        if key in _REGISTRY and _REGISTRY[key].build is not build:
            raise ValueError(f"model {key!r} is registered twice ({_REGISTRY[key].build.__module__} and "
                             f"{build.__module__}); give one of them another name")
        _REGISTRY[key] = RegisteredModel(key, task, build)
        return build

    return register


def get(name: str) -> RegisteredModel | None:
    """The registered model called ``name``, or None.

        >>> get("cifar_resnet20").task, get("resnet50")
        ('image_classification', None)
    """
    return _REGISTRY.get(name)


def names(task: str) -> list[str]:
    """The registered names of ``task``'s models, sorted."""
    return sorted(model.name for model in _REGISTRY.values() if model.task == task)
