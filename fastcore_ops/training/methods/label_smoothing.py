"""Label smoothing: train towards a target that keeps some probability on every class.

Method card
    What: the target puts ``1 - smoothing`` on the true class and spreads the rest evenly over
        all classes, so the model is not pushed towards infinite logits.
    When it helps: image classification at almost any budget (every recipe of the recipe study
        uses 0.08-0.13); it also calibrates.
    Cost: none.
    Options (``LabelSmoothingOptions``): ``smoothing`` 0.1, the usual value; it applies to either
        loss (``methods.bce_loss`` or the softmax cross-entropy) and to mixed targets.

    >>> smoothed_targets(torch.tensor([1, 0]), 2, smoothing=0.1)
    tensor([[0.0500, 0.9500],
            [0.9500, 0.0500]])
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from fastcore_ops.checks import check_number
from fastcore_ops.training.losses import LossChoice
from fastcore_ops.training.methods.mixup import as_probabilities
from fastcore_ops.training.methods.registry import IMAGES, register_method


def smoothed_targets(targets: torch.Tensor, num_classes: int, *, smoothing: float) -> torch.Tensor:
    """Class probabilities (N, C) of class indices (N,) or probabilities, moved ``smoothing`` towards uniform.

    The losses smooth inside their kernels (:func:`fastcore_ops.training.losses.classification_loss`); this is
    the same target, for a training loop of one's own.
    """
    check_number("smoothing", smoothing, low=0, high=1, high_open=True)
    return as_probabilities(targets, num_classes) * (1 - smoothing) + smoothing / num_classes


@register_method("label_smoothing", stage="loss", order=20, tasks=IMAGES)
@dataclass(frozen=True)
class LabelSmoothingOptions:
    """How much of the target spreads over all classes; ``methods.label_smoothing``."""

    smoothing: float = 0.1

    def __post_init__(self) -> None:
        check_number("smoothing", self.smoothing, low=0, high=1, low_open=True, high_open=True)

    def shape_loss(self, loss: LossChoice) -> LossChoice:
        """The loss, whichever it is, towards smoothed targets."""
        return dataclasses.replace(loss, label_smoothing=self.smoothing)
