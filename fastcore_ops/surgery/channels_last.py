"""Channels-last surgery: store the model's 4-D weights NHWC so CNN activations flow as NHWC.

Method card
    What: the model's 4-D weights are stored NHWC, so that with channels-last inputs every
        convolution's activations flow as NHWC.
    When it helps: convolutions on tensor-core GPUs under mixed precision, whose fast kernels
        are NHWC; on CPUs the gain depends on the oneDNN kernels and may be nothing.
    Cost: none after the one conversion; the values are unchanged.
    Options: none.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .core import Plan, Step, apply_surgery, register_surgery


@dataclass
class ChannelsLastOptions:
    pass


def _nchw_tensors(model: nn.Module) -> list[torch.Tensor]:
    return [
        t for t in list(model.parameters()) + list(model.buffers())
        if t.dim() == 4 and not t.is_contiguous(memory_format=torch.channels_last)
    ]


# Last: it converts the parameters and buffers the other surgeries add. Its batches come channels_last too.
@register_surgery(
    "channels_last", "convert 4-D parameters and buffers to channels_last (NHWC) memory format", ChannelsLastOptions,
    order=90, inputs="images", loader_switch="channels_last",
)
def plan_channels_last(model: nn.Module, options: ChannelsLastOptions) -> Plan:
    tensors = _nchw_tensors(model)
    if not tensors:
        has_4d = any(t.dim() == 4 for t in model.parameters())
        return Plan(already_applied=int(has_4d))
    originals = [t.data for t in tensors]

    def apply():
        # Parameter objects stay the same (optimizers keep them); only their storage changes.
        for t in tensors:
            t.data = t.data.contiguous(memory_format=torch.channels_last)

    def undo():
        for t, original in zip(tensors, originals):
            t.data = original

    return Plan(steps=[Step(f"{len(tensors)} 4-D tensors to channels_last", apply, undo)])


def apply_channels_last(model: nn.Module, optimizers=None):
    """Apply the ``channels_last`` surgery alone; see :func:`apply_surgery`.

    Feed the model channels_last inputs too (``x.contiguous(memory_format=torch.channels_last)``).

    Example:
        >>> import torchvision
        >>> print(apply_channels_last(torchvision.models.resnet18(num_classes=10)))
        channels_last: 0 modules replaced, +0 / -0 parameters
          17 4-D tensors to channels_last
    """
    return apply_surgery(model, ["channels_last"], optimizers)
