"""The CIFAR ResNet of He et al. (2016, section 4.2), built from torchvision's BasicBlock.

A 3x3 stem convolution to ``width`` channels, three stages of ``n`` BasicBlocks each with
``width``, ``2 * width`` and ``4 * width`` channels at 32, 16 and 8 pixels (for 32 px input),
global average pooling and a linear head: ``depth = 6n + 2`` weighted layers. With the default
width of 16, ResNet-20 has about 0.27M parameters and ResNet-56 about 0.86M.

Because the blocks are torchvision's own ``BasicBlock`` and the head is ``fc`` (as in
``torchvision.models.ResNet``), every surgery that matches torchvision ResNets (blurpool,
squeeze_excite, stochastic_depth, ghost_batchnorm, channels_last) works on it unchanged.

    >>> model = cifar_resnet20(num_classes=10)
    >>> model(torch.randn(2, 3, 32, 32)).shape
    torch.Size([2, 10])
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock

from fastcore_ops.checks import check_int

from .registry import IMAGE_CLASSIFIER, register_model

__all__ = ["CifarResNet", "cifar_resnet", "cifar_resnet20", "cifar_resnet56"]


class CifarResNet(nn.Module):
    """Stem, three stages of BasicBlocks (stride 1, 2, 2), global pool, linear head ``fc``.

    Args:
        blocks_per_stage: ``n`` in ``depth = 6n + 2``.
        width: channels of the stem and the first stage; each later stage doubles them.
        zero_init_residual: start every block's last BatchNorm at weight 0, so each block
            begins as the identity (Goyal et al., 2017): deep nets then train like shallow ones
            at first and tolerate larger learning rates.

    Example:
        >>> CifarResNet(blocks_per_stage=3)(torch.randn(2, 3, 32, 32)).shape
        torch.Size([2, 10])
    """

    def __init__(self, blocks_per_stage: int, num_classes: int = 10, width: int = 16,
                 zero_init_residual: bool = True):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = _stage(width, width, blocks_per_stage, stride=1)
        self.layer2 = _stage(width, 2 * width, blocks_per_stage, stride=2)
        self.layer3 = _stage(2 * width, 4 * width, blocks_per_stage, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, num_classes)
        self._initialize(zero_init_residual)

    def _initialize(self, zero_init_residual: bool) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if zero_init_residual:
            for module in self.modules():
                if isinstance(module, BasicBlock):
                    nn.init.zeros_(module.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _stage(in_channels: int, out_channels: int, blocks: int, stride: int) -> nn.Sequential:
    # A 1x1 projection (He et al.'s option B) where the shape changes, rather than the paper's
    # parameter-free zero-padding shortcut (option A): it costs under 3K parameters on
    # ResNet-20, is torchvision's own shortcut, and is a strided Conv2d the blurpool surgery
    # can anti-alias, where a strided slice would stay aliased.
    downsample = None
    if stride != 1 or in_channels != out_channels:
        downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels),
        )
    layers = [BasicBlock(in_channels, out_channels, stride=stride, downsample=downsample)]
    layers += [BasicBlock(out_channels, out_channels) for _ in range(blocks - 1)]
    return nn.Sequential(*layers)


def cifar_resnet(depth: int = 20, num_classes: int = 10, width: int = 16,
                 zero_init_residual: bool = True) -> CifarResNet:
    """A CIFAR ResNet with ``depth`` weighted layers; ``depth`` must be 6n + 2 (20, 32, 44, 56, 110, ...).

    Example:
        >>> sum(p.numel() for p in cifar_resnet(32).parameters()) > 400_000
        True
    """
    check_int("depth", depth)
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...), got {depth}")
    check_int("num_classes", num_classes, low=1)
    check_int("width", width, low=1)
    return CifarResNet((depth - 2) // 6, num_classes, width, zero_init_residual)


@register_model(IMAGE_CLASSIFIER)
def cifar_resnet20(num_classes: int = 10, **kwargs) -> CifarResNet:
    """ResNet-20 for 32 px images (about 0.27M parameters).

    Example:
        >>> cifar_resnet20(num_classes=100).fc.out_features
        100
    """
    return cifar_resnet(20, num_classes, **kwargs)


@register_model(IMAGE_CLASSIFIER)
def cifar_resnet56(num_classes: int = 10, **kwargs) -> CifarResNet:
    """ResNet-56 for 32 px images (about 0.86M parameters).

    Example:
        >>> len(cifar_resnet56().layer1)
        9
    """
    return cifar_resnet(56, num_classes, **kwargs)
