"""The classification losses a recipe can choose, on class indices or mixed (soft) targets.

Their method cards are in ``training/methods/bce_loss.py`` and ``training/methods/label_smoothing.py``.

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
