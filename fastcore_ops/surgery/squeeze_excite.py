"""Squeeze-and-excitation surgery (Hu et al., 2018): channel gating after wide convolutions.

Method card
    What: after each wide convolution, a gate computed from the global average of its output
        channels (two 1x1 convolutions, ReLU, sigmoid) rescales every channel.
        A model that already has squeeze-excite gates (EfficientNet, MobileNetV3, RegNetY, SE-ResNet,
        from torchvision or timm) is left as it is, and the report says so.
    When it helps: larger CNNs, where the extra channel mixing buys accuracy per FLOP; none of the
        recipe study's ResNet-50 recipes uses it.
    Cost: two small 1x1 convolutions and a global pool per gated layer, and their parameters.
    Options: ``min_channels`` 128 (input and output channels must reach it), ``latent_channels``
        64 (or a fraction of the output channels when below 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..checks import check_int, check_number
from .core import (Plan, Replacement, apply_surgery, count_modules, find_sites, imported_classes, place_like,
                   register_surgery, skip_for_existing)

# The squeeze-excite gates of the libraries whose models the surgeries meet, by module.
_LIBRARY_GATES = {
    "torchvision.ops.misc": ("SqueezeExcitation",),
    "timm.layers.squeeze_excite": ("SEModule", "EffectiveSEModule", "SqueezeExciteCl"),
    "timm.models._efficientnet_blocks": ("SqueezeExcite",),
    "timm.models.senet": ("SEModule",),
}


class SqueezeExcite2d(nn.Module):
    """Scale each channel by a gate computed from the global average of all channels.

    Example:
        >>> SqueezeExcite2d(256, 64)(torch.randn(2, 256, 14, 14)).shape
        torch.Size([2, 256, 14, 14])
    """

    def __init__(self, channels: int, latent_channels: int):
        super().__init__()
        # 1x1 convolutions rather than Linear layers keep NCHW/NHWC activations as they are.
        self.reduce = nn.Conv2d(channels, latent_channels, 1)
        self.expand = nn.Conv2d(latent_channels, channels, 1)

    def forward(self, x):
        squeezed = x.mean(dim=(2, 3), keepdim=True)
        return x * torch.sigmoid(self.expand(torch.relu(self.reduce(squeezed))))


class SqueezeExciteConv2d(nn.Module):
    """A convolution followed by its squeeze-excite gate."""

    def __init__(self, conv: nn.Conv2d, excite: SqueezeExcite2d):
        super().__init__()
        self.conv = conv
        self.excite = excite

    def forward(self, x):
        return self.excite(self.conv(x))


@dataclass
class SqueezeExciteOptions:
    min_channels: int = 128  # both the input and output channels of a convolution must reach this
    latent_channels: float = 64  # the bottleneck width; below 1, a fraction of the conv's output channels

    def validate(self):
        check_int("min_channels", self.min_channels, low=1)
        latent = check_number("latent_channels", self.latent_channels)
        if latent <= 0 or (latent >= 1 and latent != int(latent)):
            raise ValueError(
                f"latent_channels must be a whole number of channels (>= 1) or a fraction in (0, 1), "
                f"got {self.latent_channels}"
            )

    def latent_for(self, channels: int) -> int:
        if self.latent_channels < 1:
            return max(1, int(channels * self.latent_channels))
        return int(self.latent_channels)


@register_surgery(
    "squeeze_excite",
    "add a squeeze-excite gate after every Conv2d whose input and output channels reach min_channels",
    SqueezeExciteOptions,
    order=30,
    inputs="images",
    # ResNet-20's convolutions have 16 to 64 channels: at the default min_channels (128, for ImageNet
    # ResNets) an ablation on CIFAR would gate none of them.
    tried_with={"min_channels": 16},
)
def plan_squeeze_excite(model: nn.Module, options: SqueezeExciteOptions) -> Plan:
    def wanted(module):
        return (
            type(module) is nn.Conv2d
            and min(module.in_channels, module.out_channels) >= options.min_channels
        )

    sites = find_sites(model, wanted, skip=(SqueezeExciteConv2d,))
    already = count_modules(model, (SqueezeExciteConv2d,))
    gate_types = imported_classes(_LIBRARY_GATES)
    gates = [path for path, module in model.named_modules() if isinstance(module, gate_types)]
    if gates:
        # Its authors placed the gates where the model needs them; more on the convolutions between
        # (or on a shortcut's projection) would gate the same channels twice.
        return skip_for_existing(sites, "squeeze-excite gates", gates,
                                 "a second gate is not added; leave squeeze_excite out for this model", already)
    replacements = []
    for site in sites:
        conv = site.module
        excite = place_like(SqueezeExcite2d(conv.out_channels, options.latent_for(conv.out_channels)), conv)
        replacements.append(Replacement(site, SqueezeExciteConv2d(conv, excite)))
    return Plan(replacements, already_applied=already)


def apply_squeeze_excite(model: nn.Module, optimizers=None, **options):
    """Apply the ``squeeze_excite`` surgery alone; see :func:`apply_surgery`.

    Example:
        >>> import torchvision
        >>> print(apply_squeeze_excite(torchvision.models.resnet18(num_classes=10), latent_channels=0.25))
        squeeze_excite: 13 modules replaced, +849,056 / -0 parameters
          layer2.0.conv2         Conv2d -> SqueezeExciteConv2d
        ...
    """
    return apply_surgery(model, [("squeeze_excite", options)], optimizers)
