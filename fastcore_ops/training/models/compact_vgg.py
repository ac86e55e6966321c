"""A compact VGG-like CIFAR network with BatchNorm and GELU, the shape of Jordan's airbench94 (arXiv 2404.00498).

A 2x2 stem convolution to 24 channels (twice the 12 numbers of a 2x2 patch of 3 channels, so
``patch_whitening`` can set all its components and their negatives) with a bias, then three
blocks of conv 3x3 -> max-pool 2 -> BatchNorm -> GELU -> conv 3x3 -> BatchNorm -> GELU (64, 256
and 256 channels), a 3x3 max-pool to one pixel, and a linear head without bias whose logits are
scaled by 1/9. Its BatchNorms train only their biases: their scales stay 1. About 1.97M
parameters. Dirac initialisation, whitening and the biases' own learning rate are methods
(``dirac_init``, ``patch_whitening``, ``bias_lr_scale``), not part of the model.

    >>> model = cifar_compact_vgg(num_classes=10)
    >>> model(torch.randn(2, 3, 32, 32)).shape
    torch.Size([2, 10])
"""

from __future__ import annotations

import torch
from torch import nn

from fastcore_ops.checks import check_int, check_number

from .registry import IMAGE_CLASSIFIER, register_model

__all__ = ["CompactVGG", "cifar_compact_vgg"]

# airbench94's: running statistics that forget fast (torch's momentum 0.4 is its 0.6), and an eps that only
# guards a division by zero.
BATCHNORM_MOMENTUM = 0.4
BATCHNORM_EPS = 1e-12


def _batch_norm(channels: int) -> nn.BatchNorm2d:
    norm = nn.BatchNorm2d(channels, eps=BATCHNORM_EPS, momentum=BATCHNORM_MOMENTUM)
    norm.weight.requires_grad_(False)  # a scale before a GELU the next BatchNorm undoes: only the bias trains
    return norm


class ConvBlock(nn.Sequential):
    """conv 3x3 -> max-pool 2 -> BatchNorm -> GELU -> conv 3x3 -> BatchNorm -> GELU, halving the image."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.MaxPool2d(2), _batch_norm(out_channels),
            nn.GELU(),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), _batch_norm(out_channels), nn.GELU())


class CompactVGG(nn.Module):
    """Stem, three :class:`ConvBlock`, max-pool, scaled linear head ``fc``; for 32 px images.

    Args:
        widths: the channels of the three blocks.
        logit_scale: multiplies the head's output (airbench94's 1/9 keeps its first logits small).

    Example:
        >>> CompactVGG(widths=(8, 16, 16))(torch.randn(1, 3, 32, 32)).shape
        torch.Size([1, 10])
    """

    def __init__(self, num_classes: int = 10, widths: tuple[int, int, int] = (64, 256, 256),
                 logit_scale: float = 1 / 9):
        super().__init__()
        check_int("num_classes", num_classes, low=1)
        if len(widths) != 3:
            raise ValueError(f"widths must be the channels of 3 blocks, got {widths!r}")
        for index, width in enumerate(widths):
            check_int(f"widths[{index}]", width, low=1)
        self.logit_scale = check_number("logit_scale", logit_scale, low=0, low_open=True)
        self.stem = nn.Conv2d(3, 2 * 3 * 2 * 2, kernel_size=2, bias=True)
        self.act = nn.GELU()
        self.blocks = nn.Sequential(ConvBlock(self.stem.out_channels, widths[0]), ConvBlock(widths[0], widths[1]),
                                    ConvBlock(widths[1], widths[2]))
        self.pool = nn.MaxPool2d(3)
        self.fc = nn.Linear(widths[2], num_classes, bias=False)

    # The stem takes a pixel off each side (2x2, no padding), each block halves, and the last max-pool needs 3x3.
    MIN_SIZE = 26

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if min(x.shape[-2:]) < self.MIN_SIZE:
            raise ValueError(f"CompactVGG needs images of at least {self.MIN_SIZE}x{self.MIN_SIZE} px (its stem and "
                             f"three halvings leave under 3x3 for its 3x3 max-pool), got {tuple(x.shape[-2:])}; train "
                             "at a larger size, or leave out what shrinks the images (colout, a smaller "
                             "progressive_resize initial_scale)")
        x = self.pool(self.blocks(self.act(self.stem(x))))
        return self.fc(torch.flatten(x, 1)) * self.logit_scale


@register_model(IMAGE_CLASSIFIER)
def cifar_compact_vgg(num_classes: int = 10, **kwargs) -> CompactVGG:
    """The compact VGG at airbench94's widths, 64, 256 and 256 (about 1.97M parameters).

    Example:
        >>> cifar_compact_vgg(num_classes=100).fc.out_features
        100
    """
    return CompactVGG(num_classes, **kwargs)
