"""Models the recipes train that torchvision does not provide: a small GPT and CIFAR-sized ResNets.

:func:`build_model` turns a recipe's ``model.name`` into a freshly initialized model, from
this package, from torchvision's classification models, or from timm's (``timm:resnet18``).

    >>> build_model("cifar_resnet20", num_classes=10).fc.out_features
    10
"""

from __future__ import annotations

import torchvision
from torch import nn

from fastcore_ops.checks import check_int

from . import language  # noqa: F401  (registers the language models)
from .cifar_resnet import CifarResNet, cifar_resnet, cifar_resnet20, cifar_resnet56
from .compact_vgg import CompactVGG, cifar_compact_vgg
from .gpt import GPT, GPTConfig
from .registry import IMAGE_CLASSIFIER, get, names, register_model
from .timm_models import build_timm_model, check_timm_name, is_timm_name

__all__ = [
    "GPT", "GPTConfig", "CifarResNet", "CompactVGG", "build_model", "cifar_compact_vgg", "check_timm_name", "cifar_resnet", "cifar_resnet20",
    "cifar_resnet56", "is_known_model", "is_timm_name", "model_names", "register_model",
]


def _torchvision_classifiers() -> list[str]:
    # Only the top-level module's models: detection, segmentation and video models take
    # other inputs and give other outputs than an image classifier's logits.
    return torchvision.models.list_models(module=torchvision.models)


def model_names() -> list[str]:
    """Every name :func:`build_model` accepts: this package's models, then torchvision's classifiers.

    timm's models (``timm:<name>``) are accepted too, and not listed: listing them would import timm.

    Example:
        >>> "resnet50" in model_names() and "cifar_resnet56" in model_names()
        True
    """
    return names(IMAGE_CLASSIFIER) + _torchvision_classifiers()


def is_known_model(name: str) -> bool:
    """Whether :func:`build_model` accepts ``name`` (cheap: no model is built).

    >>> is_known_model("cifar_resnet20"), is_known_model("resnet5O"), is_known_model("timm:resnet18")
    (True, False, True)
    """
    if is_timm_name(name):
        try:
            check_timm_name(name)
        except ValueError:
            return False
        return True
    return name in names(IMAGE_CLASSIFIER) or name in _torchvision_classifiers()


def build_model(name: str, num_classes: int) -> nn.Module:
    """A randomly initialized classifier with ``num_classes`` outputs.

    Args:
        name: ``cifar_resnet20`` or ``cifar_resnet56`` (this package), any torchvision
            classification model (``resnet50``, ``convnext_tiny``, ...), or any timm model as
            ``timm:<name>`` (``timm:resnet18``); never pretrained.

    Example:
        >>> build_model("resnet18", num_classes=100).fc.out_features
        100
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a model name (str), got {type(name).__name__}")
    check_int("num_classes", num_classes, low=1)
    registered = get(name)
    if registered is not None and registered.family == IMAGE_CLASSIFIER:
        return registered.build(num_classes=num_classes)
    if name in _torchvision_classifiers():
        return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    if is_timm_name(name):
        return build_timm_model(name, num_classes)
    examples = names(IMAGE_CLASSIFIER) + ["resnet18", "resnet50", "convnext_tiny", "vit_b_16", "timm:resnet18"]
    raise ValueError(
        f"name must be one of this package's models, a torchvision classification model or timm:<a timm model>, "
        f"got {name!r}; for example {', '.join(examples)} (model_names() lists all {len(model_names())} but timm's)"
    )
