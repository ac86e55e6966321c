"""The batch stage's augmentations, each registered where it is defined, with its place in the order.

A loader augmentation is one module of this package: a function on batch tensors, and its options,
a frozen dataclass registered with ``@batch_transform(name, order=...)`` whose
``apply(images, generator)`` runs it. The same call runs on a CPU inside the pil backend's decoding
workers and on the device in the main process (for DALI, and pil on a GPU), so both backends apply
it alike, from the same draws. ``build_loader`` and ``DeviceAugment`` take each by its name, as a
keyword; the batch stage (device_stage.py) runs the ones given, lowest ``order`` first.

Two places in the order are the loader's own: the resize to the batch's size (progressive
resizing) comes first, at ``RESIZE_ORDER``, and the flips stand at ``FLIP_ORDER`` (the stage's
random flip, or the decoders' alternating flips, which must act before the padded crop's draws).

    >>> [(transform.name, transform.order) for transform in batch_transforms()]
    [('padded_crop', 20), ('colout', 40), ('randaugment', 50)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from fastcore_ops.discovery import import_package_modules

RESIZE_ORDER = 10  # the resize to the batch's size: before anything else, so the rest works on fewer pixels
FLIP_ORDER = 30  # the flips: after the padded crop, before ColOut and RandAugment

_PACKAGE = "fastcore_ops.data.transforms"


@dataclass(frozen=True)
class BatchTransform:
    """One registered augmentation of the batch stage.

    options: its frozen options dataclass; ``options.apply(images, generator)`` transforms a batch.
    order: its place in the batch stage (lower runs first).
    module: where it is defined; its docstring holds the method card.
    """

    name: str
    options: type
    order: int
    module: str


_TRANSFORMS: dict[str, BatchTransform] = {}


def batch_transform(name: str, *, order: int) -> Callable[[type], type]:
    """Register the decorated options dataclass as the batch-stage augmentation ``name`` at ``order``.

    As ``colout.py`` does::

        @batch_transform("colout", order=40)
        @dataclass(frozen=True)
        class ColOutOptions:
            p_row: float = 0.15
            def apply(self, images, generator): return colout_batch(images, p_row=self.p_row, ...)
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a Python identifier (it is a keyword of build_loader), got {name!r}")
    if not isinstance(order, int) or isinstance(order, bool) or order <= RESIZE_ORDER or order == FLIP_ORDER:
        raise ValueError(f"order must be an int above {RESIZE_ORDER} (the resize) other than {FLIP_ORDER} (the "
                         f"flips), got {order!r}")

    def register(options: type) -> type:
        if not dataclasses.is_dataclass(options) or not options.__dataclass_params__.frozen:
            raise TypeError(f"batch transform {name!r}: its options must be a frozen dataclass, got {options!r}")
        if not callable(getattr(options, "apply", None)):
            raise TypeError(f"batch transform {name!r}: {options.__name__} needs apply(images, generator), which "
                            f"transforms a batch")
        for other in _TRANSFORMS.values():
            if other.options is options:
                continue
            if other.name == name or other.order == order:
                raise ValueError(f"batch transform {name!r} at order {order} clashes with {other.name!r} at order "
                                 f"{other.order} ({other.module}); give it another name or order")
        _TRANSFORMS[name] = BatchTransform(name=name, options=options, order=order, module=options.__module__)
        return options

    return register


def batch_transforms() -> list[BatchTransform]:
    """Every registered batch-stage augmentation, in the order the stage runs them."""
    _import_transforms()
    return sorted(_TRANSFORMS.values(), key=lambda transform: transform.order)


def registered_transform(name: str) -> BatchTransform:
    """The batch-stage augmentation called ``name``, or a ValueError naming the ones there are.

    >>> registered_transform("colout").order
    40
    """
    _import_transforms()
    if name not in _TRANSFORMS:
        known = ", ".join(transform.name for transform in batch_transforms())
        raise ValueError(f"unknown augmentation {name!r}; the batch stage's augmentations are: {known}")
    return _TRANSFORMS[name]


def _import_transforms() -> None:
    """Import every module of this package: each registers its own augmentation as it loads
    (:mod:`fastcore_ops.discovery`)."""
    import_package_modules(_PACKAGE)
