"""Test-time augmentation: classify each evaluation image from several views of it.

Method card
    What: at evaluation each image is also seen flipped horizontally and, optionally, shifted by
        ``translate`` pixels, each shift flipped too; the views' class probabilities (or, with
        ``average="logits"``, their logits) are averaged, every view alike or the shifted ones
        together at ``shifted_weight``. The shifts go up, down, left and right (``shifts="axes"``)
        or down-right and up-left (``"diagonals"``), and the border a shift uncovers is 0, the mean
        colour after normalization (``fill="zero"``), or the mirrored image (``"reflect"``).
        airbench94's evaluation (its ``tta_level=2``) is ``translate=1, shifts="diagonals",
        fill="reflect", shifted_weight=0.5, average="logits"``. Reported as ``top1_tta`` beside
        the plain ``top1``, which stays the single-view accuracy every comparison uses.
    When it helps: almost always a little (0.3-1 point of top-1 is typical for flips), at no
        training cost; worth it when evaluation or serving can afford several forward passes.
    Cost: one evaluation forward pass per view: 2 with the flip, 6 with flips and diagonal
        shifts, 10 with flips and shifts along the axes.
    Hyperparameters: ``flip`` (True), ``translate`` (0 = no shifts; 1-4 px suit 32 px images),
        ``shifts`` ("axes"), ``fill`` ("zero"), ``shifted_weight`` (None: every view weighs
        alike), ``average`` ("probabilities").

    >>> views = tta_views(torch.rand(2, 3, 8, 8), TTAOptions(flip=True, translate=1))
    >>> len(views)  # the image itself, its flip, and both flip states of 4 shifts
    10
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from fastcore_ops.checks import check_bool, check_choice, check_int, check_number
from fastcore_ops.data.transforms.padded_crop import FILLS
from fastcore_ops.training.methods.registry import IMAGES, register_method

# Each choice of ``shifts``: the directions (rows down, columns right) a view moves in, ``translate`` px each.
SHIFTS = {"axes": ((1, 0), (-1, 0), (0, 1), (0, -1)), "diagonals": ((1, 1), (-1, -1))}
AVERAGES = ("probabilities", "logits")
# The options that shape the shifted views: away from their defaults they need translate > 0.
_SHIFT_OPTIONS = ("shifts", "fill", "shifted_weight")


@register_method("tta", stage="evaluation", order=10, tasks=IMAGES)
@dataclass(frozen=True)
class TTAOptions:
    """Which views of an evaluation image are averaged, with what weights, and whether as probabilities or logits.

        >>> airbench94 = TTAOptions(translate=1, shifts="diagonals", fill="reflect", shifted_weight=0.5,
        ...                         average="logits")
        >>> TTAOptions(flip=False, translate=0)
        Traceback (most recent call last):
        ...
        ValueError: TTAOptions must add a view: set flip=True or translate > 0
    """

    flip: bool = True
    translate: int = 0  # pixels; 0 = no shifted views
    shifts: str = "axes"  # "axes": up, down, left and right; "diagonals": down-right and up-left
    fill: str = "zero"  # what a shift uncovers: "zero" (the mean colour after normalization) or "reflect"
    shifted_weight: float | None = None  # the shifted views' share of the average; None: every view alike
    average: str = "probabilities"  # or "logits": their average's softmax is the answer

    def __post_init__(self) -> None:
        check_bool("flip", self.flip)
        check_int("translate", self.translate, low=0)
        check_choice("shifts", self.shifts, SHIFTS)
        check_choice("fill", self.fill, FILLS)
        if self.shifted_weight is not None:
            check_number("shifted_weight", self.shifted_weight, low=0, high=1, low_open=True, high_open=True)
        check_choice("average", self.average, AVERAGES)
        if not self.flip and not self.translate:
            raise ValueError("TTAOptions must add a view: set flip=True or translate > 0")
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        unused = [f"{name}={getattr(self, name)!r}" for name in _SHIFT_OPTIONS if getattr(self, name) != defaults[name]]
        if unused and not self.translate:
            raise ValueError(f"{', '.join(unused)}: options of the shifted views, and translate=0 asks for none; "
                             f"set translate > 0 or leave them at their defaults")

    def probabilities(self, model: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor,
                      logits: torch.Tensor) -> torch.Tensor:
        """The evaluation's probabilities averaged over the views: :func:`tta_probabilities`."""
        return tta_probabilities(model, images, logits, self)


def shifted(images: torch.Tensor, rows: int, cols: int, fill: str = "zero") -> torch.Tensor:
    """``images`` moved ``rows`` pixels down and ``cols`` right (negative: up, left), the uncovered border
    filled as ``fill`` says: 0 ("zero") or the image mirrored about its edge ("reflect").

        >>> image = torch.arange(1., 5.).view(1, 1, 2, 2)
        >>> shifted(image, 1, 0).flatten().tolist(), shifted(image, 1, 0, fill="reflect").flatten().tolist()
        ([0.0, 0.0, 1.0, 2.0], [3.0, 4.0, 1.0, 2.0])
    """
    height, width = images.shape[-2:]
    if abs(rows) >= height or abs(cols) >= width:
        raise ValueError(f"a shift of ({rows}, {cols}) px leaves nothing of a {height} x {width} image; "
                         f"use a smaller translate")
    padded = F.pad(images, (abs(cols), abs(cols), abs(rows), abs(rows)), mode=FILLS[fill])
    top, left = abs(rows) - rows, abs(cols) - cols
    return padded[..., top:top + height, left:left + width]


def tta_views(images: torch.Tensor, options: TTAOptions) -> list[tuple[float, torch.Tensor]]:
    """``images`` and every view of them ``options`` asks for, each with its weight in the average (the
    weights sum to 1), ``images`` first: each shift (none first), then its flip.

    Each shift is flipped after it moved, as airbench94 flips its crops: a diagonal shift's flip is
    not the flipped image's diagonal shift.

        >>> options = TTAOptions(translate=1, shifts="diagonals", fill="reflect", shifted_weight=0.5)
        >>> [weight for weight, _ in tta_views(torch.rand(2, 3, 8, 8), options)]
        [0.25, 0.25, 0.125, 0.125, 0.125, 0.125]
    """
    flips = (False, True) if options.flip else (False,)
    directions = SHIFTS[options.shifts] if options.translate else ()
    moves = [(0, 0), *((rows * options.translate, cols * options.translate) for rows, cols in directions)]
    if options.shifted_weight is None:
        unshifted_weight = shifted_weight = 1 / (len(moves) * len(flips))
    else:
        unshifted_weight = (1 - options.shifted_weight) / len(flips)
        shifted_weight = options.shifted_weight / ((len(moves) - 1) * len(flips))
    views = []
    for rows, cols in moves:
        moved = shifted(images, rows, cols, options.fill) if rows or cols else images
        weight = shifted_weight if rows or cols else unshifted_weight
        views.extend((weight, moved.flip(-1) if flip else moved) for flip in flips)
    return views


def tta_probabilities(model: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, logits: torch.Tensor,
                      options: TTAOptions) -> torch.Tensor:
    """The (N, classes) probabilities of ``model`` over ``images`` (whose ``logits`` the caller has already
    computed: the plain evaluation's) and their views: the weighted mean of the views' softmax, or with
    ``average="logits"`` the softmax of the weighted mean of their logits.

        >>> model = lambda x: x.mean(dim=(2, 3))
        >>> images = torch.rand(4, 3, 8, 8)
        >>> probabilities = tta_probabilities(model, images, model(images), TTAOptions())
        >>> bool(probabilities.sum(dim=1).allclose(torch.ones(4)))
        True
    """
    def averaged(scores: torch.Tensor) -> torch.Tensor:  # what the mean is taken of
        return scores.float() if options.average == "logits" else scores.float().softmax(dim=1)

    (weight, _), *views = tta_views(images, options)
    total = weight * averaged(logits)
    for weight, view in views:
        total = total + weight * averaged(model(view))
    return total.softmax(dim=1) if options.average == "logits" else total
