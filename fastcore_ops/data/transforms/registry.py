"""The one registry of augmentations: each declares where it runs and its order, one scale for all.

An augmentation is one module: its options, a frozen dataclass registered with
``@augmentation(name, order=..., runs_in=...)``, and the code that runs it. ``runs_in`` says where:

- ``"decoder"``: as each image is decoded (pil's decoding workers, DALI's pipeline), before its batch exists;
- ``"batch"``: the batch stage (device_stage.py) on the whole uint8 batch, on a CPU inside the pil backend's
  decoding workers or on the device in the main process, both from the same draws; its options'
  ``apply(images, generator)`` runs it, and ``build_loader`` and ``DeviceAugment`` take it by its name;
- ``"step"``: the trainer's step, on the normalized batch with its labels (declared with fastcore_ops.training's
  methods, through ``register_method(..., augmentation=True)``; listing them imports those methods).

Every order lies in the band of its place (:data:`PLACES`), so a lower order runs first wherever the
two run. The loader's own stages are registered too, without options (:func:`loader_stage`): the batch
stage resizes first, flips at random in its place and normalizes last. A test runs the real pipeline
on both backends and checks that the stages touch a batch in this order.

    >>> [(entry.name, entry.order) for entry in augmentations("batch")]
    [('resize', 10), ('padded_crop', 20), ('flip', 30), ('colout', 40), ('randaugment', 50), ('normalize', 99)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from fastcore_ops.discovery import import_package_modules

# Where an augmentation runs, in the order a batch meets the places, and the orders each may take there.
PLACES = {"decoder": range(1, 10), "batch": range(10, 100), "step": range(100, 300)}

_PACKAGE = "fastcore_ops.data.transforms"
# Where each place's augmentations are declared, imported by name whenever that place is listed, so that a listing
# never depends on what its caller happened to import first: the loader's in this package, the step's beside the
# trainer's methods, which register here through ``register_method(..., augmentation=True)``.
_DECLARED_IN = {"decoder": _PACKAGE, "batch": _PACKAGE, "step": "fastcore_ops.training.methods"}


@dataclass(frozen=True)
class Augmentation:
    """One registered augmentation, or one of the loader's own stages.

    options: its frozen options dataclass (``build_loader``'s keyword and ``methods.<name>`` take an instance);
        None for a stage the loader always has (resize, the random flip, normalization).
    order: its place on the one scale (lower runs first), inside ``PLACES[runs_in]``.
    runs_in: "decoder", "batch" or "step" (see the module docstring).
    module: where it is defined; its docstring holds the method card.
    """

    name: str
    options: type | None
    order: int
    runs_in: str
    module: str


_AUGMENTATIONS: dict[str, Augmentation] = {}


def augmentation(name: str, *, order: int, runs_in: str) -> Callable[[type], type]:
    """Register the decorated options dataclass as the augmentation ``name``, run in ``runs_in`` at ``order``.

    As ``colout.py`` does::

        @augmentation("colout", order=40, runs_in="batch")
        @dataclass(frozen=True)
        class ColOutOptions:
            p_row: float = 0.15
            def apply(self, images, generator): return colout_batch(images, p_row=self.p_row, ...)
    """
    _check_place(name, order, runs_in)

    def register(options: type) -> type:
        if not dataclasses.is_dataclass(options) or not options.__dataclass_params__.frozen:
            raise TypeError(f"augmentation {name!r}: its options must be a frozen dataclass, got {options!r}")
        if runs_in == "batch" and not callable(getattr(options, "apply", None)):
            raise TypeError(f"augmentation {name!r}: {options.__name__} needs apply(images, generator), which "
                            f"transforms a batch")
        _add(Augmentation(name=name, options=options, order=order, runs_in=runs_in, module=options.__module__))
        return options

    return register


def loader_stage(name: str, *, order: int, module: str) -> None:
    """Register ``name``, a stage the loader's batch stage always has (no options), at ``order``.

    As device_stage.py does: ``loader_stage("flip", order=30, module=__name__)``.
    """
    _check_place(name, order, "batch")
    _add(Augmentation(name=name, options=None, order=order, runs_in="batch", module=module))


def _check_place(name: object, order: object, runs_in: object) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a Python identifier (it is a keyword of build_loader), got {name!r}")
    if runs_in not in PLACES:
        raise ValueError(f"runs_in must be one of {', '.join(PLACES)}, got {runs_in!r}")
    band = PLACES[runs_in]
    if not isinstance(order, int) or isinstance(order, bool) or order not in band:
        raise ValueError(f"order must be an int in [{band.start}, {band.stop - 1}] for runs_in={runs_in!r}, "
                         f"got {order!r}")


def _add(entry: Augmentation) -> None:
    for other in _AUGMENTATIONS.values():
        if other.name == entry.name and other.options is entry.options and other.module == entry.module:
            return  # the same declaration, seen again
        if other.name == entry.name or other.order == entry.order:
            raise ValueError(f"augmentation {entry.name!r} at order {entry.order} clashes with {other.name!r} at "
                             f"order {other.order} ({other.module}); give it another name or order")
    _AUGMENTATIONS[entry.name] = entry


def augmentations(runs_in: str | None = None) -> list[Augmentation]:
    """Every registered augmentation (of ``runs_in`` only, if given), in the order they run.

        >>> [entry.name for entry in augmentations("step")]
        ['augmix', 'cutout', 'mixup', 'cutmix']
    """
    places = tuple(PLACES) if runs_in is None else (runs_in,)
    if not set(places) <= set(PLACES):
        raise ValueError(f"runs_in must be one of {', '.join(PLACES)} or None, got {runs_in!r}")
    for package in dict.fromkeys(_DECLARED_IN[place] for place in places):
        import_package_modules(package)  # each module registers its own as it loads (fastcore_ops.discovery)
    return sorted((entry for entry in _AUGMENTATIONS.values() if entry.runs_in in places),
                  key=lambda entry: entry.order)


def loader_augmentations() -> list[Augmentation]:
    """What the loader runs, in order: its decoders' augmentations, then its batch stage's (its own stages too).

    >>> [entry.name for entry in loader_augmentations()][:3]
    ['progressive_resize', 'alternating_flip', 'resize']
    """
    return augmentations("decoder") + augmentations("batch")


def batch_augmentations() -> list[Augmentation]:
    """The batch stage's augmentations a caller turns on by name (the loader's own stages left out), in order.

    >>> [entry.name for entry in batch_augmentations()]
    ['padded_crop', 'colout', 'randaugment']
    """
    return [entry for entry in augmentations("batch") if entry.options is not None]


def registered_augmentation(name: str) -> Augmentation:
    """The loader's augmentation or stage called ``name``, or a ValueError naming the batch stage's augmentations.

    >>> registered_augmentation("colout").order, registered_augmentation("alternating_flip").runs_in
    (40, 'decoder')
    """
    if name not in {entry.name for entry in loader_augmentations()}:
        known = ", ".join(entry.name for entry in batch_augmentations())
        raise ValueError(f"unknown augmentation {name!r}; the batch stage's augmentations are: {known}")
    return _AUGMENTATIONS[name]
