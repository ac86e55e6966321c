"""Dirac initialisation: start each convolution as the identity on its first channels.

Method card
    What: once the model is built, every ``Conv2d`` (without groups) that has at least as many
        output channels as input channels gets, as its first ``in_channels`` filters, the Dirac
        delta (1 at the kernel's centre, on its own channel, 0 elsewhere): those outputs start
        as a copy of the input. The other filters keep their random initialisation. As in
        Jordan's airbench94 (arXiv 2404.00498).
    When it helps: plain (non-residual) convolutional networks trained for few epochs: a signal
        passes the whole depth at the first step, as through a ResNet's shortcuts, so the early
        steps are not spent recovering it. On ResNets, whose shortcuts do this already, expect
        little.
    Hyperparameters: none.
    Cost: none; it runs once before training.
    Composition: runs before ``patch_whitening`` (which then sets the stem's filters from the
        data) and after the surgeries.

    >>> conv = torch.nn.Conv2d(2, 4, 3, padding=1)
    >>> dirac_convolutions_(conv)
    1
    >>> image = torch.randn(1, 2, 5, 5)
    >>> torch.allclose(conv(image)[:, :2] - conv.bias[:2, None, None], image, atol=1e-6)
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from fastcore_ops.training.methods.registry import IMAGES, register_method


@torch.no_grad()
def dirac_convolutions_(model: nn.Module) -> int:
    """Set the first ``in_channels`` filters of each ungrouped ``Conv2d`` with ``out_channels >= in_channels`` to the
    identity, in place; the number of convolutions it set."""
    count = 0
    for module in model.modules():
        if isinstance(module, nn.Conv2d) and module.groups == 1 and module.out_channels >= module.in_channels:
            nn.init.dirac_(module.weight[: module.in_channels])
            count += 1
    return count


# Before patch whitening (10), which sets the stem from the data afterwards.
@register_method("dirac_init", stage="model", order=5, tasks=IMAGES)
@dataclass(frozen=True)
class DiracInitOptions:
    """Dirac initialisation has no options; ``methods.dirac_init={}`` turns it on.

        >>> DiracInitOptions()
        DiracInitOptions()
    """

    def set_up_model(self, model: nn.Module, samples: list[tuple[str, int]], **loader_settings) -> float:
        """Set the convolutions of the built model (:func:`dirac_convolutions_`); it reads no ``samples``. The
        seconds it took."""
        started = time.perf_counter()
        if not dirac_convolutions_(model):
            raise ValueError(f"dirac_init found no Conv2d with at least as many output as input channels in "
                             f"{type(model).__name__}; set methods.dirac_init=None for this model")
        return time.perf_counter() - started
