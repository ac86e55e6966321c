"""The models a recipe can name, each registered where it is defined, as timm's ``@register_model`` does.

A builder registers under its family, the arguments it takes: image classifiers
(``IMAGE_CLASSIFIER``) take ``num_classes``, causal language models (``CAUSAL_LM``)
``vocab_size``, ``sequence_length`` and their ``options``; a task of your own may name a
family of its own. A task names the families it trains (:mod:`fastcore_ops.training.tasks`); image
classification also accepts any torchvision classifier by name, and any timm model as
``timm:<name>`` (:func:`fastcore_ops.training.models.build_model`).

    >>> "cifar_resnet20" in names(IMAGE_CLASSIFIER), names(CAUSAL_LM)
    (True, ['gpt', 'hf_gpt2'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

IMAGE_CLASSIFIER, CAUSAL_LM = "image_classifier", "causal_lm"


@dataclass(frozen=True)
class RegisteredModel:
    """A model name, its family (the arguments its builder takes) and the function that builds it, randomly
    initialized."""

    name: str
    family: str
    build: Callable


_REGISTRY: dict[str, RegisteredModel] = {}


def register_model(family: str, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register the decorated builder under ``name`` (default: the function's name) in ``family``.

    As ``fastcore_ops/training/models/cifar_resnet.py`` does::

        @register_model(IMAGE_CLASSIFIER)
        def cifar_resnet20(num_classes: int = 10, **kwargs) -> CifarResNet: ...
    """
    if not isinstance(family, str) or not family.isidentifier():
        raise ValueError(f"family must name the arguments its builders take, as a Python identifier "
                         f"({IMAGE_CLASSIFIER!r}, {CAUSAL_LM!r}, or one of your own), got {family!r}")

    def register(build: Callable) -> Callable:
        key = name or build.__name__
        if key in _REGISTRY and _REGISTRY[key].build is not build:
            raise ValueError(f"model {key!r} is registered twice ({_REGISTRY[key].build.__module__} and "
                             f"{build.__module__}); give one of them another name")
        _REGISTRY[key] = RegisteredModel(key, family, build)
        return build

    return register


def get(name: str) -> RegisteredModel | None:
    """The registered model called ``name``, or None.

        >>> get("cifar_resnet20").family, get("resnet50")
        ('image_classifier', None)
    """
    return _REGISTRY.get(name)


def names(family: str) -> list[str]:
    """The registered names of ``family``'s models, sorted."""
    return sorted(model.name for model in _REGISTRY.values() if model.family == family)
