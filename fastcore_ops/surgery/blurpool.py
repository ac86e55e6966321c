"""BlurPool surgery: anti-aliased strided convolutions and max pools (Zhang, 2019).

Method card
    What: strided convolutions and max pools first low-pass filter their input with a 3x3
        binomial filter, so that subsampling no longer aliases; the layers keep their weights
        and the filter has none to learn.
    When it helps: CNNs on natural images: the recipe study's ResNet-50 is anti-aliased with it
        in all three recipes (Mild, Medium, Hot).
    Cost: one depthwise 3x3 pass per downsampling layer (fused with the max pool by the Triton
        kernel on a GPU); no parameters.
    Options: ``min_channels`` 16 (the RGB stem stays as it is), ``replace_convs`` True,
        ``replace_maxpools`` True.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..checks import check_bool, check_int
from ..kernels import blur_maxpool2d, blurpool2d
from .core import Plan, Replacement, apply_surgery, count_modules, find_sites, register_surgery


class BlurConv2d(nn.Module):
    """A strided convolution that sees its input low-pass filtered first.

    A 1x1 convolution without padding commutes with subsampling, so there the blur takes
    the stride (one fused pass, no full-resolution intermediate) and the convolution runs
    at stride 1 on the same weights; a larger kernel keeps its stride and geometry behind
    a stride-1 blur.
    """

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        if _commutes_with_subsampling(conv):
            self.blur_stride = conv.stride[0]
            self.conv = _restrided(conv)
        else:
            self.blur_stride = 1
            self.conv = conv

    def forward(self, x):
        return self.conv(blurpool2d(x, self.blur_stride))

    def extra_repr(self) -> str:
        return f"blur_stride={self.blur_stride}"


def _commutes_with_subsampling(conv: nn.Conv2d) -> bool:
    return (
        conv.kernel_size == (1, 1)
        and conv.padding in ((0, 0), "valid")
        and conv.stride[0] == conv.stride[1]
        and conv.dilation == (1, 1)
    )


def _restrided(conv: nn.Conv2d) -> nn.Conv2d:
    """A stride-1 twin of ``conv`` holding the very same Parameter objects (optimizers keep them)."""
    twin = nn.Conv2d(conv.in_channels, conv.out_channels, 1, stride=1, groups=conv.groups,
                     bias=conv.bias is not None, device="meta")
    twin.weight = conv.weight
    if conv.bias is not None:
        twin.bias = conv.bias
    return twin


class BlurMaxPool2d(nn.Module):
    """``MaxPool2d`` with a blur fused behind a stride-1 max: one kernel, the same output size."""

    def __init__(self, pool: nn.MaxPool2d):
        super().__init__()
        self.kernel_size, self.stride, self.padding = (_square(pool, a) for a in ("kernel_size", "stride", "padding"))

    def forward(self, x):
        return blur_maxpool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _square(module: nn.Module, attribute: str) -> int:
    value = getattr(module, attribute)
    if isinstance(value, tuple):
        return value[0]
    return value


def _is_square(value) -> bool:
    return not isinstance(value, tuple) or len(set(value)) == 1


@dataclass
class BlurPoolOptions:
    min_channels: int = 16  # strided convolutions with fewer input channels (the RGB stem) stay as they are
    replace_convs: bool = True
    replace_maxpools: bool = True

    def validate(self):
        check_int("min_channels", self.min_channels, low=0)
        check_bool("replace_convs", self.replace_convs)
        check_bool("replace_maxpools", self.replace_maxpools)


def _blurrable_conv(module: nn.Module, options: BlurPoolOptions) -> bool:
    return (
        type(module) is nn.Conv2d
        and max(module.stride) > 1
        and module.in_channels >= options.min_channels
    )


def _blurrable_pool(module: nn.Module) -> bool:
    return (
        type(module) is nn.MaxPool2d
        and not module.ceil_mode
        and module.dilation in (1, (1, 1))
        and all(_is_square(getattr(module, a)) for a in ("kernel_size", "stride", "padding"))
        and _square(module, "kernel_size") <= 15
    )


@register_surgery(
    "blurpool",
    "blur before every strided Conv2d (>= min_channels inputs) and fuse a blur into every MaxPool2d",
    BlurPoolOptions,
    order=20,
    inputs="images",
)
def plan_blurpool(model: nn.Module, options: BlurPoolOptions) -> Plan:
    def wanted(module):
        return (options.replace_convs and _blurrable_conv(module, options)) or (
            options.replace_maxpools and _blurrable_pool(module))

    products = (BlurConv2d, BlurMaxPool2d)
    replacements = [
        Replacement(site, BlurConv2d(site.module) if isinstance(site.module, nn.Conv2d) else BlurMaxPool2d(site.module))
        for site in find_sites(model, wanted, skip=products)
    ]
    return Plan(replacements, already_applied=count_modules(model, products))


def apply_blurpool(model: nn.Module, optimizers=None, **options):
    """Apply the ``blurpool`` surgery alone; see :func:`apply_surgery`.

    Example:
        >>> import torchvision
        >>> print(apply_blurpool(torchvision.models.resnet18(num_classes=10), min_channels=16))
        blurpool: 7 modules replaced, +0 / -0 parameters
          maxpool                MaxPool2d -> BlurMaxPool2d
          layer2.0.conv1         Conv2d -> BlurConv2d
        ...
    """
    return apply_surgery(model, [("blurpool", options)], optimizers)
