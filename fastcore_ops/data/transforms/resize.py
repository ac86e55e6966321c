"""Resizing a batch on its device, and the progressive-resizing schedule that picks the size.

Progressive resizing trains on smaller images early, when the network learns coarse features
that do not need the lost detail, and grows them back to full size for the end of training.

Method card
    What: training images start at ``initial_scale`` of the full size, stay there for the first
        ``delay_fraction`` of the run, grow linearly, and are full size for the last
        ``finetune_fraction``; the loaders decode at the scheduled size.
    When it helps: nearly always at equal time: early epochs at low resolution cost a fraction
        of a full one and teach coarse features as well (MosaicML's recipes all use it). On top of
        the CIFAR-10 record (``cifar_record_muon_resize``: 30% of the steps at 28 px) held-out seeds
        3 and 4 ended higher with TTA than a never-resized run 7.5% shorter (90.62% and 90.58%
        against 90.35% and 90.55%); with 62.5% at 28 px seed 3 fell below airbench94
        (reports/cifar-record-muon-resize30-20261203/).
    Cost: negative (smaller images); a compiled model recompiles at each new size.
    Options (``ProgressiveResize``): ``initial_scale`` 0.5, ``delay_fraction`` 0.4,
        ``finetune_fraction`` 0.2, ``size_increment`` 4.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2.functional import resize

from fastcore_ops.checks import check_int, check_number, check_tensor
from fastcore_ops.data.transforms.registry import augmentation, loader_stage

# The batch stage resizes to the batch's size first, so the rest works on fewer pixels.
loader_stage("resize", order=10, module=__name__)


def _output_size(size: object) -> tuple[int, int]:
    if not isinstance(size, (tuple, list)):
        side = check_int("size", size, low=1)
        return side, side
    if len(size) != 2:
        raise ValueError(f"size must be an int >= 1 or a (height, width) pair of them, got {size!r}")
    return check_int("size[0] (height)", size[0], low=1), check_int("size[1] (width)", size[1], low=1)


def resize_batch(images: torch.Tensor, size: int | tuple[int, int], *, antialias: bool = True) -> torch.Tensor:
    """Bilinear resize of an (N, C, H, W) batch to ``size`` x ``size`` (or ``(height, width)``).

    Accepts uint8 (the result is rounded back to uint8) or floating images and keeps the dtype;
    ``antialias`` low-pass filters when shrinking so small sizes do not alias. Returns ``images``
    itself when it already has the size.

    >>> resize_batch(torch.rand(2, 3, 64, 64), 32).shape
    torch.Size([2, 3, 32, 32])
    """
    check_tensor("images", images, floating=False)
    if images.dim() != 4:
        raise ValueError(f"images must be N x C x H x W, got shape {tuple(images.shape)}")
    if not (images.is_floating_point() or images.dtype == torch.uint8):
        raise TypeError(f"images must be uint8 or floating point, got dtype {images.dtype}")
    height, width = _output_size(size)
    if images.shape[-2:] == (height, width):
        return images
    return resize(images, [height, width], interpolation=InterpolationMode.BILINEAR, antialias=antialias)


# The decoders crop each image at the size the schedule gives its batch: the first thing that happens to it.
@augmentation("progressive_resize", order=2, runs_in="decoder")
@dataclass(frozen=True)
class ProgressiveResize:
    """Schedule of the training image size: small at first, full size at the end.

    The size starts at ``initial_scale`` of the final size, stays there for the first
    ``delay_fraction`` of training, grows linearly, and is the full size for the last
    ``finetune_fraction`` (full-size fine-tuning closes the train/test resolution gap). Every
    size is rounded to the nearest multiple of ``size_increment`` (at least one increment), so
    the few distinct sizes stay friendly to the network's strides and to kernel tiling.

    >>> schedule = ProgressiveResize(initial_scale=0.5, delay_fraction=0.4, finetune_fraction=0.2)
    >>> [schedule.size(224, p) for p in (0.0, 0.4, 0.6, 0.8, 1.0)]
    [112, 112, 168, 224, 224]
    """

    initial_scale: float = 0.5
    delay_fraction: float = 0.4
    finetune_fraction: float = 0.2
    size_increment: int = 4

    def __post_init__(self) -> None:
        check_number("initial_scale", self.initial_scale, low=0, high=1, low_open=True)
        check_number("delay_fraction", self.delay_fraction, low=0, high=1)
        check_number("finetune_fraction", self.finetune_fraction, low=0, high=1)
        if self.delay_fraction + self.finetune_fraction > 1:
            raise ValueError(
                f"delay_fraction + finetune_fraction must be <= 1 (they are parts of one training run), "
                f"got {self.delay_fraction} + {self.finetune_fraction}")
        check_int("size_increment", self.size_increment, low=1)

    def scale(self, progress: float) -> float:
        """Fraction of the final size (before rounding) at ``progress`` in [0, 1] of training."""
        check_number("progress", progress, low=0, high=1)
        grow_end = 1.0 - self.finetune_fraction
        if progress >= grow_end:
            return 1.0
        if progress <= self.delay_fraction:
            return self.initial_scale
        ramp = (progress - self.delay_fraction) / (grow_end - self.delay_fraction)
        return self.initial_scale + (1.0 - self.initial_scale) * ramp

    def size(self, final_size: int, progress: float) -> int:
        """Image side length at ``progress`` in [0, 1] of training, for a run ending at ``final_size``."""
        check_int("final_size", final_size, low=1)
        if final_size % self.size_increment:
            raise ValueError(
                f"final_size={final_size} is not a multiple of size_increment={self.size_increment}; "
                "pick a final size that is, or a size_increment that divides it")
        steps = int(final_size * self.scale(progress) / self.size_increment + 0.5)
        return max(1, steps) * self.size_increment
