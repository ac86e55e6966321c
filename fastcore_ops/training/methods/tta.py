"""Test-time augmentation: classify each evaluation image from several views of it.

Method card
    What: at evaluation each image is also seen flipped horizontally and, optionally, shifted by
        ``translate`` pixels up, down, left and right (the uncovered border is 0: the mean colour
        after normalization); the class probabilities of all the views are averaged. Reported
        as ``top1_tta`` beside the plain ``top1``, which stays the single-view accuracy every
        comparison uses.
    When it helps: almost always a little (0.3-1 point of top-1 is typical for flips), at no
        training cost; worth it when evaluation or serving can afford several forward passes.
    Cost: one evaluation forward pass per view: 2 with the flip, 10 with flips and shifts.
    Hyperparameters: ``flip`` (True), ``translate`` (0 = no shifts; 2-4 px suit 32 px images).

    >>> views = tta_views(torch.rand(2, 3, 8, 8), TTAOptions(flip=True, translate=1))
    >>> len(views)  # besides the image itself
    9
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from fastcore_ops.checks import check_bool, check_int
from fastcore_ops.training.methods.registry import IMAGES, register_method


@register_method("tta", stage="evaluation", order=10, tasks=IMAGES)
@dataclass(frozen=True)
class TTAOptions:
    """Which views of an evaluation image are averaged.

        >>> TTAOptions(flip=False, translate=0)
        Traceback (most recent call last):
        ...
        ValueError: TTAOptions must add a view: set flip=True or translate > 0
    """

    flip: bool = True
    translate: int = 0  # pixels; 0 = no shifted views

    def __post_init__(self) -> None:
        check_bool("flip", self.flip)
        check_int("translate", self.translate, low=0)
        if not self.flip and not self.translate:
            raise ValueError("TTAOptions must add a view: set flip=True or translate > 0")

    def probabilities(self, model: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor,
                      logits: torch.Tensor) -> torch.Tensor:
        """The evaluation's probabilities averaged over the views: :func:`tta_probabilities`."""
        return tta_probabilities(model, images, logits, self)


def shifted(images: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """``images`` moved ``rows`` pixels down and ``cols`` right (negative: up, left), 0 where nothing moved in.

        >>> shifted(torch.arange(1., 5.).view(1, 1, 2, 2), 1, 0).flatten().tolist()
        [0.0, 0.0, 1.0, 2.0]
    """
    height, width = images.shape[-2:]
    if abs(rows) >= height or abs(cols) >= width:
        raise ValueError(f"a shift of ({rows}, {cols}) px leaves nothing of a {height} x {width} image; "
                         f"use a smaller translate")
    pad = max(abs(rows), abs(cols))
    padded = F.pad(images, (pad, pad, pad, pad))
    top, left = pad - rows, pad - cols
    return padded[..., top:top + height, left:left + width]


def tta_views(images: torch.Tensor, options: TTAOptions) -> list[torch.Tensor]:
    """Every view ``options`` asks for besides ``images`` themselves: each flip state times each shift."""
    flips = (False, True) if options.flip else (False,)
    step = options.translate
    shifts = [(0, 0)] + ([(step, 0), (-step, 0), (0, step), (0, -step)] if step else [])
    views = []
    for flip, (rows, cols) in itertools.product(flips, shifts):
        if flip or rows or cols:
            view = images.flip(-1) if flip else images
            views.append(shifted(view, rows, cols) if rows or cols else view)
    return views


def tta_probabilities(model: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, logits: torch.Tensor,
                      options: TTAOptions) -> torch.Tensor:
    """The (N, classes) softmax probabilities of ``model`` averaged over ``images`` (whose ``logits``
    the caller has already computed: the plain evaluation's) and their views.

        >>> model = lambda x: x.mean(dim=(2, 3))
        >>> images = torch.rand(4, 3, 8, 8)
        >>> probabilities = tta_probabilities(model, images, model(images), TTAOptions())
        >>> bool(probabilities.sum(dim=1).allclose(torch.ones(4)))
        True
    """
    total = logits.float().softmax(dim=1)
    views = tta_views(images, options)
    for view in views:
        total = total + model(view).float().softmax(dim=1)
    return total / (1 + len(views))
