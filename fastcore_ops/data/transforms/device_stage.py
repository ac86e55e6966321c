"""The batch stage: what the loader runs on every decoded uint8 batch before the model sees it.

Its steps are registered stages (registry.py), run in their order: the resize to the batch's size
(augmenting the smaller images is cheaper), then in training the augmentations it is given and the
random horizontal flip (padded crop, flip, ColOut, RandAugment), then normalization. Evaluation:
resize and normalization only. MixUp belongs to the trainer's step, which also sees the labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fastcore_ops.checks import check_bool, check_number, check_tensor
from fastcore_ops.data.transforms.registry import batch_augmentations, loader_stage, registered_augmentation
from fastcore_ops.data.transforms.resize import resize_batch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "DeviceAugment", "flip_batch"]

# The random flip after the padded crop, before ColOut and RandAugment; normalization last of the batch stage.
loader_stage("flip", order=30, module=__name__)
loader_stage("normalize", order=99, module=__name__)


def flip_batch(images: torch.Tensor, *, p: float = 0.5, generator: torch.Generator | None = None) -> torch.Tensor:
    """Mirror each image of an (N, ..., W) batch left-right with probability ``p``, independently.

    Any dtype. The per-sample coin flips are drawn on the CPU from ``generator`` (a CPU
    generator; None uses torch's global one), so there is no device sync.

    >>> g = torch.Generator().manual_seed(0)
    >>> flip_batch(torch.arange(6.0).view(2, 1, 1, 3), p=1.0, generator=g).flatten().tolist()
    [2.0, 1.0, 0.0, 5.0, 4.0, 3.0]
    """
    check_tensor("images", images, floating=False)
    if images.dim() < 2:
        raise ValueError(f"images must be a batch (N, ..., W), got shape {tuple(images.shape)}")
    check_number("p", p, low=0, high=1)
    flipped = (torch.rand(images.shape[0], generator=generator) < p).nonzero().flatten()
    # Only the drawn samples are mirrored and copied (torch.where would read and write the whole
    # batch twice); the coin flips stay on the host, so there is no device sync.
    out = images.clone()
    if images.device.type == "cpu":
        # Sample by sample: on a CPU, indexing a batch with a tensor of rows copies it element by
        # element, about 9x slower (64 images at 176 px: 4.3 against 0.5 ms on a 2-core AMD EPYC).
        for row in flipped.tolist():
            out[row] = images[row].flip(-1)
        return out
    rows = flipped.to(images.device, non_blocking=True)
    out[rows] = images[rows].flip(-1)
    return out


class _RandomFlip:
    """The stage's random horizontal flip, as a step among the registered augmentations (the ``flip`` stage)."""

    def apply(self, images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return flip_batch(images, generator=generator)


def _channel_stats(name: str, values: object, *, positive: bool) -> tuple[float, float, float]:
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(f"{name} must be 3 numbers, one per RGB channel, got {type(values).__name__} {values!r}")
    if len(values) != 3:
        raise ValueError(f"{name} must be 3 numbers, one per RGB channel, got {values!r}")
    # std divides the pixels, so it must be positive.
    low = 0 if positive else None
    first, second, third = (check_number(f"{name}[{i}]", v, low=low, low_open=positive) for i, v in enumerate(values))
    return first, second, third


class DeviceAugment:
    """Turns a uint8 batch into the float32 normalized batch the model trains or evaluates on.

    train: apply the random augmentations (the flip and those given); otherwise only resize and normalize.
    flip: mirror each image left-right with probability 1/2.
    channels_last: return the batch in channels-last memory format.
    mean, std: per-channel statistics of pixels in [0, 1]; the output is ``(x / 255 - mean) / std``.
    augmentations: each of the batch stage's registered augmentations (registry.py) by its name, with its
        options or None (left out): ``padded_crop``, ``colout``, ``randaugment``, ...

    >>> from fastcore_ops.data.transforms.randaugment import RandAugmentOptions
    >>> stage = DeviceAugment(train=True, randaugment=RandAugmentOptions(depth=1, severity=9))
    >>> images = torch.randint(0, 256, (4, 3, 64, 64), dtype=torch.uint8)
    >>> stage(images, size=32, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([4, 3, 32, 32])
    """

    def __init__(self, *, train: bool, flip: bool = True, channels_last: bool = False,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 **augmentations: object) -> None:
        for name, value in (("train", train), ("flip", flip), ("channels_last", channels_last)):
            check_bool(name, value)
        self.augmentations = _checked_augmentations(augmentations)
        self.train = train
        self.flip = flip
        self.channels_last = channels_last
        self.mean = _channel_stats("mean", mean, positive=False)
        self.std = _channel_stats("std", std, positive=True)
        # The training steps in their order: each given augmentation, and the flip in its place.
        steps = [(registered_augmentation(name).order, options) for name, options in self.augmentations.items()]
        steps += [(registered_augmentation("flip").order, _RandomFlip())] if flip else []
        self._steps = [step for _, step in sorted(steps, key=lambda order_and_step: order_and_step[0])]
        # Per-device copies, so the statistics cross to the device once, not once per batch.
        self._stats: dict[tuple[torch.device, float], tuple[torch.Tensor, torch.Tensor]] = {}

    def __repr__(self) -> str:
        given = "".join(f", {name}={options}" for name, options in self.augmentations.items())
        return (f"DeviceAugment(train={self.train}, flip={self.flip}{given}, channels_last={self.channels_last}, "
                f"mean={self.mean}, std={self.std})")

    def _normalization_on(self, device: torch.device, pixel_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(scale, shift) with ``x * scale + shift == (x / pixel_scale - mean) / std``, cached per device."""
        key = (device, pixel_scale)
        if key not in self._stats:
            std = torch.tensor(self.std, dtype=torch.float32).view(1, 3, 1, 1)
            mean = torch.tensor(self.mean, dtype=torch.float32).view(1, 3, 1, 1)
            self._stats[key] = ((1.0 / (pixel_scale * std)).to(device), (-mean / std).to(device))
        return self._stats[key]

    def __call__(self, images_uint8: torch.Tensor, *, size: int | None = None,
                 generator: torch.Generator | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
        """Augment (when training) and normalize a (n, 3, S, S) uint8 batch; resize to ``size`` first if given.

        ``generator`` (a CPU generator) drives every random choice; None uses torch's global one.
        out: a float32 tensor of the result's shape to write it into, in its own layout (a DataLoader
        worker's shared-memory slot, data/backends/workers/shared_slots.py); None makes a new one.
        """
        if not isinstance(images_uint8, torch.Tensor) or images_uint8.dtype != torch.uint8:
            got = images_uint8.dtype if isinstance(images_uint8, torch.Tensor) else type(images_uint8).__name__
            raise TypeError(f"images_uint8 must be a uint8 tensor as the decoders ship it, got {got}")
        if images_uint8.dim() != 4 or images_uint8.shape[1] != 3:
            raise ValueError(f"images_uint8 must be n x 3 x S x S (RGB), got shape {tuple(images_uint8.shape)}")
        # Resize, flip and ColOut work on the uint8 pixels: a quarter of float32's bytes, and ColOut
        # leaves fewer pixels for RandAugment. Only RandAugment needs floats. The registry keeps every
        # other batch-stage order between the resize's (its band's first) and normalization's (its last).
        images = images_uint8 if size is None else resize_batch(images_uint8, size)
        if out is not None:
            _check_out(out, images)
        for step in self._steps if self.train else ():
            images = step.apply(images, generator)
        if images.is_floating_point():  # an augmentation's own new tensor (RandAugment's), in [0, 1]
            return self._normalize(images, pixel_scale=1.0, in_place=out is None and not self.channels_last, out=out)
        return self._normalize(images, pixel_scale=255.0, in_place=False, out=out)

    @property
    def memory_format(self) -> torch.memory_format:
        """The layout of the batches this stage makes."""
        return torch.channels_last if self.channels_last else torch.contiguous_format

    def _normalize(self, images: torch.Tensor, *, pixel_scale: float, in_place: bool,
                   out: torch.Tensor | None) -> torch.Tensor:
        """(x / pixel_scale - mean) / std as one multiply-add, written straight into the output's layout.

        in_place: ``images`` is a float batch this stage made itself, so it may be overwritten.
        """
        scale, shift = self._normalization_on(images.device, pixel_scale)
        if in_place:
            return images.mul_(scale).add_(shift)
        if out is None:
            out = torch.empty(images.shape, dtype=torch.float32, device=images.device, memory_format=self.memory_format)
        return torch.mul(images, scale, out=out).add_(shift)


def _checked_augmentations(augmentations: dict[str, object]) -> dict[str, object]:
    """The augmentations given (not None), each a batch-stage augmentation checked against its options class."""
    given = {}
    for name, options in augmentations.items():
        kind = _batch_options(name)
        if options is None:
            continue
        if not isinstance(options, kind):
            raise TypeError(f"{name} must be {kind.__name__} or None, got {type(options).__name__} {options!r}")
        given[name] = options
    return given


def _batch_options(name: str) -> type:
    """The options class of the batch-stage augmentation ``name``, or a ValueError naming those there are."""
    entry = registered_augmentation(name)
    if entry.runs_in != "batch" or entry.options is None:
        known = ", ".join(entry.name for entry in batch_augmentations())
        where = "is the loader's own stage" if entry.options is None else f"runs in the {entry.runs_in}"
        raise ValueError(f"{name!r} is not an augmentation the batch stage takes (it {where}); the batch stage's "
                         f"augmentations are: {known}")
    return entry.options


def _check_out(out: object, images: torch.Tensor) -> None:
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
        got = out.dtype if isinstance(out, torch.Tensor) else type(out).__name__
        raise TypeError(f"out must be a float32 tensor, got {got}")
    if out.shape != images.shape or out.device != images.device:
        raise ValueError(f"out must have the result's shape {tuple(images.shape)} on {images.device}, "
                         f"got {tuple(out.shape)} on {out.device}")
