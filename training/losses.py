"""The classification losses a recipe can choose, on class indices or mixed (soft) targets.

Method card: label_smoothing
    What: the target puts ``1 - label_smoothing`` on the true class and spreads the rest evenly
        over all classes, so the model is not pushed towards infinite logits.
    When it helps: image classification at almost any budget (every recipe of the recipe study
        uses 0.08-0.13); it also calibrates.
    Cost: none.
    Options: ``methods.label_smoothing`` 0 (off); 0.1 is the usual value.

Method card: bce_loss
    What: binary cross-entropy on every class's logit (summed over classes, divided by the batch
        size) instead of softmax cross-entropy, with the classifier's bias started at
        -log(classes) so the first steps predict the class prior; the fused Triton kernel.
    When it helps: the recipe study's ResNet-50 recipes all train with it, often with a lower
        learning rate than the softmax loss (the CIFAR recipes: half to three quarters of the
        baseline's).
    Cost: none (one fused kernel on a GPU).
    Options: ``methods.loss`` "ce" or "bce"; label smoothing applies to both.

    >>> loss_fn = classification_loss("bce", label_smoothing=0.1)
    >>> loss = loss_fn(torch.randn(4, 10), torch.tensor([0, 3, 9, 1]))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F

from fastcore_ops.kernels import bce_with_logits

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
