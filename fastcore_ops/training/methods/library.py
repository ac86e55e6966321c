"""The methods fastcore_ops implements, registered as methods of a training run.

Their options classes, implementations and method cards are the library's (``fastcore_ops.surgery``
and ``fastcore_ops.data``); a run turns one on as any other method, ``--set methods.blurpool={}``.
The surgeries rewrite the model in the order each declares in its own module, in one transactional
:func:`fastcore_ops.apply_surgery`; the loader's augmentations run where and in the order the one registry of
augmentations declares (:mod:`fastcore_ops.data.transforms.registry`).

    >>> from fastcore_ops.training.methods.registry import registered
    >>> registered("channels_last").order > registered("blurpool").order
    True
"""

from __future__ import annotations

import dataclasses
import logging

from torch import nn

from fastcore_ops import apply_surgery
from fastcore_ops.data import AlternatingFlipOptions, ProgressiveResize
from fastcore_ops.data.transforms.registry import loader_augmentations
from fastcore_ops.surgery import check_surgeries
from fastcore_ops.surgery.core import registered_surgeries
from fastcore_ops.training.methods.registry import IMAGES, register_method

log = logging.getLogger(__name__)


def surgery_request(name: str, options) -> tuple[str, dict]:
    """The ``(name, options)`` pair :func:`fastcore_ops.apply_surgery` takes for a surgery method's options."""
    return name, dataclasses.asdict(options)


def apply_surgery_methods(model: nn.Module, surgeries) -> None:
    """A run's ``surgeries`` (:attr:`~fastcore_ops.training.methods.registry.MethodPlan.surgeries`), in their order, in one
    transactional apply_surgery."""
    requests = [surgery_request(method.name, options) for method, options in surgeries]
    if requests:
        log.info("surgery:\n%s", apply_surgery(model, requests))


def _surgery_check(name: str):
    """apply_surgery's own check of the options (types, ranges), which touches no model."""
    return lambda options, config: check_surgeries([surgery_request(name, options)])


def _register_surgeries() -> None:
    """Each surgery of :mod:`fastcore_ops.surgery` as a surgery method, as it declares itself (its order among the
    surgeries, the inputs of the models it operates on, ...)."""
    for surgery in registered_surgeries().values():
        register_method(surgery.name, stage="surgery", order=surgery.order, tasks=frozenset({surgery.inputs}),
                        leaves_parameters_unused=surgery.leaves_parameters_unused,
                        loader_switch=surgery.loader_switch, try_with=surgery.tried_with,
                        check=_surgery_check(surgery.name))(surgery.options)


_register_surgeries()


def _check_resize_increment(options: ProgressiveResize, config) -> None:
    # Checked here, not at the first resize halfway through the run.
    if config.data.train_size % options.size_increment:
        raise ValueError(f"methods.progressive_resize.size_increment must divide data.train_size="
                         f"{config.data.train_size}, got {options.size_increment}")


def _check_flips_on(options: AlternatingFlipOptions, config) -> None:
    if not config.data.flip:
        raise ValueError("methods.alternating_flip says how training images are flipped, and data.flip=False turns "
                         "flips off; set data.flip=True or methods.alternating_flip=None")


# What the rest of a run's configuration must allow, by the options of the augmentations that depend on it.
_RUN_CHECKS = {ProgressiveResize: _check_resize_increment, AlternatingFlipOptions: _check_flips_on}


def _register_loader_augmentations() -> None:
    """Each augmentation the loader runs (in its decoders or its batch stage; fastcore_ops/data/transforms/registry.py)
    as a loader method of its name and order, a keyword of fastcore_ops.data.build_loader. The step augmentations
    register themselves with their methods; the loader's own stages (resize, flip, normalization) are not methods."""
    for entry in loader_augmentations():
        if entry.options is not None:
            register_method(entry.name, stage="loader", order=entry.order, tasks=IMAGES,
                            check=_RUN_CHECKS.get(entry.options))(entry.options)


_register_loader_augmentations()
