"""CutMix: paste a box from another image of the batch, and mix the labels by the pasted area.

Method card
    What: each batch gets one box, of area about ``(1 - lam)`` of the image with
        ``lam ~ Beta(alpha, alpha)``, centred uniformly at random and clipped to the image; every
        image receives that box cut from its partner in a shuffled copy of the batch, and the
        targets are mixed by the exact fraction of the image each partner then covers
        (Yun et al., 2019).
    When it helps: long image-classification runs that overfit; it regularizes like MixUp while
        keeping every pixel a real pixel, which tends to help localization. On short budgets it
        usually costs accuracy.
    Hyperparameters: ``alpha`` (> 0), 1.0 (lam uniform) is the usual choice; ``seed`` fixes the
        draws, which resume exactly (the generator is checkpointed).
    Composition: makes the targets soft (N, C) probabilities, which both losses accept and to
        which label smoothing still applies; use either CutMix or MixUp, not both. Runs after
        the dataloader's augmentations on the batch they produce.

    >>> method = CutMix(alpha=1.0, seed=0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from fastcore_ops.training.methods.mixup import (BatchMixing, BatchMixingOptions, MixedBatch, blend_with_partners,
                                                 draw_partners)
from fastcore_ops.training.methods.registry import IMAGES, register_method


def cutmix_box(height: int, width: int, lam: float, generator: torch.Generator) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a box of area ``(1 - lam) * height * width`` centred at a
    random pixel and clipped to the image; the clipped box may be smaller.

    >>> cutmix_box(32, 32, 0.75, torch.Generator().manual_seed(0))  # a 16 x 16 box, maybe clipped
    (4, 20, 7, 23)
    """
    side_fraction = math.sqrt(1.0 - lam)
    box_height, box_width = round(height * side_fraction), round(width * side_fraction)
    centre_y = int(torch.randint(0, height, (1,), generator=generator))
    centre_x = int(torch.randint(0, width, (1,), generator=generator))
    top, left = centre_y - box_height // 2, centre_x - box_width // 2
    return (
        min(max(top, 0), height),
        min(max(top + box_height, 0), height),
        min(max(left, 0), width),
        min(max(left + box_width, 0), width),
    )


def cutmix_batch(images: torch.Tensor, targets: torch.Tensor, num_classes: int, *, alpha: float,
                 generator: torch.Generator) -> MixedBatch:
    """Paste one random box from a shuffled copy of the batch; return (images, soft targets, lam).

    ``lam`` is the fraction of each image still its own after pasting. ``generator`` is a CPU
    generator; it draws lam, the permutation and the box centre, in that order.

    >>> g = torch.Generator().manual_seed(0)
    >>> images, targets, lam = cutmix_batch(torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 2, 1]), 3,
    ...                                     alpha=1.0, generator=g)
    >>> bool(targets.sum(1).allclose(torch.ones(4)))
    True
    """
    probabilities, drawn_lam, perm = draw_partners(images, targets, num_classes, alpha, generator)
    height, width = images.shape[-2:]
    top, bottom, left, right = cutmix_box(height, width, drawn_lam, generator)
    mixed_images = images.clone()
    mixed_images[:, :, top:bottom, left:right] = images[perm, :, top:bottom, left:right]
    # Clipping shrinks boxes near the border, so the labels follow the area actually pasted.
    lam = 1.0 - (bottom - top) * (right - left) / (height * width)
    return mixed_images, blend_with_partners(probabilities, perm, lam), lam


class CutMix(BatchMixing):
    """Pastes boxes between images of each batch with :func:`cutmix_batch`.

    >>> method = CutMix(alpha=1.0, seed=1)
    """

    mix_batch = staticmethod(cutmix_batch)


@register_method("cutmix", stage="step", order=140, tasks=IMAGES, mixes_batch=True, augmentation=True)
@dataclass(frozen=True)
class CutMixOptions(BatchMixingOptions):
    """``methods.cutmix``."""

    alpha: float = 1.0  # lam uniform, the usual choice
    method: ClassVar[type[BatchMixing]] = CutMix
