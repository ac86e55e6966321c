"""BCE loss: a sigmoid per class instead of one softmax over the classes.

Method card
    What: binary cross-entropy on every class's logit (summed over classes, divided by the batch
        size) instead of softmax cross-entropy, with the classifier's bias started at
        -log(classes) so the first steps predict the class prior; the fused Triton kernel.
    When it helps: the recipe study's ResNet-50 recipes all train with it, often with a lower
        learning rate than the softmax loss (the CIFAR recipes: half to three quarters of the
        baseline's).
    Cost: none (one fused kernel on a GPU).
    Options (``BCELossOptions``): none; label smoothing applies to it as to the softmax loss.

    In any training loop, with the library's kernel and bias initialization:

    >>> import torch
    >>> head = torch.nn.Linear(8, 10)
    >>> head = init_bce_bias_(head)
    >>> loss = bce_with_logits(head(torch.randn(4, 8)), torch.tensor([0, 3, 9, 1]))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fastcore_ops.kernels import bce_with_logits, init_bce_bias_
from fastcore_ops.training.losses import LossChoice
from fastcore_ops.training.methods.registry import IMAGES, register_method

# The method's functional form is the library's: the fused loss and the head's initialization.
__all__ = ["BCELossOptions", "bce_with_logits", "init_bce_bias_"]


@register_method("bce_loss", stage="loss", order=10, tasks=IMAGES)
@dataclass(frozen=True)
class BCELossOptions:
    """The BCE loss has no options: ``methods.bce_loss={}`` turns it on, None leaves the softmax loss."""

    def shape_loss(self, loss: LossChoice) -> LossChoice:
        """The loss as BCE (the run's head then starts at the class prior: :meth:`LossChoice.init_head_`)."""
        return dataclasses.replace(loss, kind="bce")
