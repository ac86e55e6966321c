"""Padded random crops: each image shifted by up to a few pixels, the border filled, the size kept.

CIFAR's standard augmentation (a 32 px image padded by 4 px on every side, then a random 32 px
window of it) as an operation on the whole batch, so both backends and the decoding workers'
batch stage apply it alike, from the same generator. torchvision.transforms.v2.RandomCrop draws
one window per call, the same for every image of a batch; here each image draws its own.

Method card
    What: every training image moves by up to ``fraction`` of its side in each direction (4 px at
        32 px with the default 0.125), and the strip it uncovers is filled with black (``zero``)
        or the mirrored image (``reflect``). The fraction keeps the shift in proportion when
        progressive resizing shrinks the images.
    When it helps: small images with the object centered, as CIFAR's: the field's standard
        practice next to horizontal flips.
    Cost: one copy of the batch's pixels.
    Options (``PaddedCropOptions``): ``fraction`` 0.125, ``fill`` "zero".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from fastcore_ops.checks import check_choice, check_int, check_number, check_tensor
from fastcore_ops.data.transforms.registry import augmentation

FILLS = {"zero": "constant", "reflect": "reflect"}  # each fill, and the F.pad mode that makes it


@augmentation("padded_crop", order=20, runs_in="batch")
@dataclass(frozen=True)
class PaddedCropOptions:
    """Padded random crops for the batch stage: the largest shift as a fraction of the side, and the fill.

    >>> PaddedCropOptions(fraction=0.6)
    Traceback (most recent call last):
    ...
    ValueError: fraction must be a number in [0, 0.5], got 0.6
    """

    fraction: float = 0.125
    fill: str = "zero"

    def __post_init__(self) -> None:
        check_number("fraction", self.fraction, low=0, high=0.5)
        check_choice("fill", self.fill, FILLS)

    def padding(self, side: int) -> int:
        """The padding in pixels for images of ``side`` pixels.

        >>> PaddedCropOptions().padding(32), PaddedCropOptions().padding(16)
        (4, 2)
        """
        return round(self.fraction * side)

    def apply(self, images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """:func:`padded_crop_batch` with these settings, the padding in proportion to the images' side."""
        return padded_crop_batch(images, padding=self.padding(images.shape[-1]), fill=self.fill, generator=generator)


def padded_crop_batch(images: torch.Tensor, *, padding: int, fill: str = "zero",
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """Pad an (N, C, H, W) batch by ``padding`` pixels on every side and take a random H x W window per image.

    Any dtype. The offsets are drawn on the CPU from ``generator`` (None uses torch's global one),
    so there is no device sync; "reflect" needs ``padding`` smaller than the sides.

    >>> g = torch.Generator().manual_seed(0)
    >>> shifted = padded_crop_batch(torch.ones(2, 1, 4, 4), padding=1, generator=g)
    >>> shifted.shape, shifted.sum(dim=(1, 2, 3)).tolist()   # both moved a pixel down and across: 9 of 16 left
    (torch.Size([2, 1, 4, 4]), [9.0, 9.0])
    """
    check_tensor("images", images, ndim=4, floating=False)
    check_int("padding", padding, low=0)
    check_choice("fill", fill, FILLS)
    if padding == 0:
        return images.clone()
    height, width = images.shape[-2:]
    if fill == "reflect" and padding >= min(height, width):
        raise ValueError(f"fill='reflect' needs padding below the image's sides, got padding {padding} for "
                         f"{height} x {width} images; use fill='zero' or a smaller fraction")
    offsets = torch.randint(0, 2 * padding + 1, (images.shape[0], 2), generator=generator)
    padded = F.pad(images, (padding,) * 4, mode=FILLS[fill])
    if images.device.type == "cpu":
        # Image by image: on a CPU a gather through index tensors copies element by element, as
        # flip_batch found for flips (device_stage.py).
        out = torch.empty_like(images)
        for index, (top, left) in enumerate(offsets.tolist()):
            out[index] = padded[index, :, top:top + height, left:left + width]
        return out
    return windows(padded, offsets.to(images.device, non_blocking=True), height, width)


def windows(padded: torch.Tensor, offsets: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """The ``height`` x ``width`` window of each image of ``padded`` at its (top, left) in ``offsets``, in one gather.

    >>> windows(torch.arange(9.0).view(1, 1, 3, 3), torch.tensor([[1, 0]]), 2, 2).flatten().tolist()
    [3.0, 4.0, 6.0, 7.0]
    """
    device = padded.device
    rows = (offsets[:, 0, None] + torch.arange(height, device=device))[:, None, :, None]
    columns = (offsets[:, 1, None] + torch.arange(width, device=device))[:, None, None, :]
    samples = torch.arange(padded.shape[0], device=device)[:, None, None, None]
    channels = torch.arange(padded.shape[1], device=device)[None, :, None, None]
    return padded[samples, channels, rows, columns]
