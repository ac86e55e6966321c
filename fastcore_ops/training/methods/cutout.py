"""Cutout: mask square regions of every image in the batch, each image at its own positions.

Method card
    What: each image gets ``holes`` squares of side ``side_fraction`` times its shorter side, each
        centred on a pixel drawn uniformly at random (so a square near the border is clipped),
        and every pixel under a square is set to 0, which after normalization is the dataset's
        mean colour (DeVries & Taylor, 2017). Labels are unchanged.
    When it helps: image classifiers trained long enough to overfit; it makes the model use the
        whole object rather than its most telling part. On short budgets it usually costs accuracy.
    Hyperparameters: ``holes`` (1), ``side_fraction`` (0.5: 16 px of CIFAR's 32, the paper's
        CIFAR-10 setting); ``seed`` fixes the positions, which resume exactly.
    Composition: runs on the batch the dataloader delivers, after its augmentations; with
        progressive resizing the squares follow the current size. With MixUp or CutMix, list
        Cutout first to mask the images before they are mixed.

    >>> method = Cutout(CutoutOptions(holes=1, side_fraction=0.5), seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training.methods.base import Method, SeededMethod, TrainState
from fastcore_ops.training.methods.registry import IMAGES, register_method


# Before mixing: each image masked, then mixed.
@register_method("cutout", stage="step", order=120, tasks=IMAGES, augmentation=True)
@dataclass(frozen=True)
class CutoutOptions:
    """How many squares each image loses, and how large.

        >>> CutoutOptions(side_fraction=1.5)
        Traceback (most recent call last):
        ...
        ValueError: side_fraction must be a number in (0, 1], got 1.5
    """

    holes: int = 1
    side_fraction: float = 0.5  # of the image's shorter side

    def __post_init__(self) -> None:
        check_int("holes", self.holes, low=1)
        check_number("side_fraction", self.side_fraction, low=0, high=1, low_open=True)

    def attach(self, config) -> Method:
        return Cutout(self, seed=config.seed)


def cutout_keep_mask(images: torch.Tensor, options: CutoutOptions, generator: torch.Generator) -> torch.Tensor:
    """A (N, 1, H, W) mask of ``images``' dtype and device: 0 under each image's squares, 1 elsewhere.

    ``generator`` (a CPU generator) draws the rows, then the columns, of the N x holes centres;
    only those small tensors cross to the device, the mask is built where the images are.

        >>> mask = cutout_keep_mask(torch.ones(2, 3, 8, 8), CutoutOptions(), torch.Generator().manual_seed(0))
        >>> mask.shape, int((mask == 0).sum(dim=(1, 2, 3)).max()) <= 16
        (torch.Size([2, 1, 8, 8]), True)
    """
    if images.ndim != 4:
        raise ValueError(f"images must be a (N, C, H, W) batch, got shape {tuple(images.shape)}")
    count, height, width = images.shape[0], images.shape[-2], images.shape[-1]
    side = max(1, round(options.side_fraction * min(height, width)))
    draws = (count, options.holes)
    top = torch.randint(0, height, draws, generator=generator).to(images.device) - side // 2
    left = torch.randint(0, width, draws, generator=generator).to(images.device) - side // 2
    rows = torch.arange(height, device=images.device)
    cols = torch.arange(width, device=images.device)
    in_rows = (rows >= top[..., None]) & (rows < top[..., None] + side)  # (N, holes, H)
    in_cols = (cols >= left[..., None]) & (cols < left[..., None] + side)  # (N, holes, W)
    covered = (in_rows[..., :, None] & in_cols[..., None, :]).any(dim=1)  # (N, H, W)
    return (~covered).unsqueeze(1).to(images.dtype)


def cutout_batch(images: torch.Tensor, options: CutoutOptions, generator: torch.Generator) -> torch.Tensor:
    """``images`` with each image's squares set to 0 (a new tensor; ``images`` is not changed).

        >>> out = cutout_batch(torch.ones(4, 3, 32, 32), CutoutOptions(), torch.Generator().manual_seed(0))
        >>> bool((out == 0).any() and (out == 1).any())
        True
    """
    if not images.is_floating_point():
        raise TypeError(f"images must be a floating-point (normalized) batch, got {images.dtype}")
    return images * cutout_keep_mask(images, options, generator)


class Cutout(SeededMethod):
    """Masks squares of each training batch with :func:`cutout_batch` after the dataloader.

    >>> method = Cutout(CutoutOptions(holes=2, side_fraction=0.25), seed=1)
    """

    def __init__(self, options: CutoutOptions = CutoutOptions(), seed: int = 0):
        super().__init__(seed)
        if not isinstance(options, CutoutOptions):
            raise TypeError(f"options must be a CutoutOptions, got {type(options).__name__}")
        self.options = options

    def on_after_dataloader(self, state: TrainState) -> None:
        state.inputs = cutout_batch(state.inputs, self.options, self._generator)
