"""The classification losses a recipe can choose, on class indices or mixed (soft) targets.

A run's :class:`LossChoice` starts as the softmax cross-entropy, and each loss-stage method on
shapes it (its ``shape_loss``); their method cards are in ``fastcore_ops/training/methods/bce_loss.py`` and
``fastcore_ops/training/methods/label_smoothing.py``.

    >>> loss_fn = classification_loss("bce", label_smoothing=0.1)
    >>> loss = loss_fn(torch.randn(4, 10), torch.tensor([0, 3, 9, 1]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from fastcore_ops.kernels import bce_with_logits, init_bce_bias_

LossFunction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def classification_loss(kind: str, label_smoothing: float = 0.0) -> LossFunction:
    """``"ce"``: softmax cross-entropy (mean over the batch); ``"bce"``: the fused BCE kernel (sum / N).

    Both accept int64 class indices (N,) or float class probabilities (N, C), as MixUp makes them,
    and smooth either toward the uniform distribution.
    """
    if kind == "ce":
        return lambda logits, targets: F.cross_entropy(logits.float(), targets, label_smoothing=label_smoothing)
    if kind == "bce":
        return lambda logits, targets: bce_with_logits(logits, targets, label_smoothing=label_smoothing)
    raise ValueError(f"loss must be 'ce' or 'bce', got {kind!r}")


@dataclass(frozen=True)
class LossChoice:
    """Which classification loss a run trains with: ``kind`` (:func:`classification_loss`) and its smoothing.

        >>> from fastcore_ops.training.methods.bce_loss import BCELossOptions
        >>> BCELossOptions().shape_loss(LossChoice())
        LossChoice(kind='bce', label_smoothing=0.0)
    """

    kind: str = "ce"
    label_smoothing: float = 0.0

    def function(self) -> LossFunction:
        return classification_loss(self.kind, self.label_smoothing)

    def init_head_(self, model: nn.Module, num_classes: int) -> None:
        """With BCE, set the classifier's bias to -log(``num_classes``), so that the loss starts at the prior of 1/C
        per class; nothing with the softmax loss."""
        if self.kind != "bce":
            return
        heads = [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features == num_classes]
        if not heads:
            raise ValueError(f"methods.bce_loss needs a final nn.Linear with {num_classes} outputs in the model, found "
                             f"none; set methods.bce_loss=None or use a model with a linear head")
        init_bce_bias_(heads[-1])
