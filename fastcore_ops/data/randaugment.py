"""RandAugment on a whole batch on its device: each sample draws its own op(s) and magnitude.

Follows the recipe study's variant (close to TrivialAugment): ``depth`` ops per image (1 by
default), each sample's magnitude drawn uniformly from ``(0.1, severity)`` on a 0..10 scale where
10 is each op's maximum. Samples are grouped by the op they drew and every op runs once on its
group with per-sample magnitude tensors: a round costs at most one call per op, never a Python
loop over the samples.

All randomness is drawn on the CPU from the caller's generator (a CPU ``torch.Generator``): the
grouping is then known on the host without a device sync, and a seed gives the same draws on any
device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real

import torch
from kornia.enhance import (
    adjust_brightness_accumulative,
    adjust_contrast_with_mean_subtraction,
    adjust_saturation_with_gray_subtraction,
    equalize,
    posterize,
    solarize,
)
from kornia.geometry.transform import warp_affine

# Largest magnitudes (severity 10). Enhancement factors span 1 +/- 0.9, rotations 30 degrees,
# shears 0.3 and translations 45% of the side, as in the common RandAugment tables.
MAX_ENHANCE = 0.9
MAX_ROTATE_DEGREES = 30.0
MAX_SHEAR = 0.3
MAX_TRANSLATE_FRACTION = 0.45
MAX_POSTERIZE_BITS_REMOVED = 4
MIN_MAGNITUDE = 0.1
MAX_SEVERITY = 10.0
# Geometric ops uncover areas outside the source image; mid grey keeps their mean neutral.
FILL_GREY = 0.5

# Every op takes the group's images and its signed levels in [-1, 1] (level = sign * magnitude /
# 10) and returns the transformed images. Unsigned ops use the absolute level.
ColorOp = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# Geometric ops return the (k, 2, 3) pixel-space affine matrices for their levels and image size,
# so all geometric samples of a round share one warp.
GeometricOp = Callable[[torch.Tensor, int, int], torch.Tensor]


def _auto_contrast(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    # Own lines rather than kornia's normalize_min_max: that maps a flat channel to black, while
    # auto-contrast (as in PIL) must leave a channel with no range untouched.
    low = images.amin(dim=(-2, -1), keepdim=True)
    high = images.amax(dim=(-2, -1), keepdim=True)
    span = high - low
    stretched = (images - low) / torch.where(span > 0, span, torch.ones_like(span))
    return torch.where(span > 0, stretched, images)


def _equalize(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    return equalize(images)


def _solarize(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    return solarize(images, thresholds=1.0 - level.abs())


def _posterize(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    bits = 8 - torch.round(level.abs() * MAX_POSTERIZE_BITS_REMOVED).to(torch.int64)
    return posterize(images, bits)


def _color(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    return adjust_saturation_with_gray_subtraction(images, 1.0 + MAX_ENHANCE * level)


def _contrast(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    return adjust_contrast_with_mean_subtraction(images, 1.0 + MAX_ENHANCE * level)


def _brightness(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    return adjust_brightness_accumulative(images, 1.0 + MAX_ENHANCE * level)


def _sharpness(images: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    # Own lines rather than kornia's sharpness: its depthwise conv2d is slow on the CPU (13 ms for
    # 8 images at 176 px); the same 3x3 smoothing as shifted-slice sums takes a fraction of that.
    # PIL's kernel is [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13, i.e. (3x3 box sum + 4 * centre) / 13;
    # border pixels keep their values, as in PIL and torchvision.
    rows = images[..., :-2, :] + images[..., 1:-1, :] + images[..., 2:, :]
    box = rows[..., :-2] + rows[..., 1:-1] + rows[..., 2:]
    smooth = images.clone()
    smooth[..., 1:-1, 1:-1] = (box + 4 * images[..., 1:-1, 1:-1]) / 13
    factor = (1.0 + MAX_ENHANCE * level).view(-1, 1, 1, 1)
    return (smooth + factor * (images - smooth)).clamp_(0, 1)


def _affine(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor, height: int, width: int,
            shift_x: torch.Tensor | float = 0.0, shift_y: torch.Tensor | float = 0.0) -> torch.Tensor:
    """(k, 2, 3) pixel-space matrices: the linear map [[a, b], [c, d]] about the image centre, then a shift."""
    cx, cy = (width - 1) / 2, (height - 1) / 2
    tx = cx - a * cx - b * cy + shift_x
    ty = cy - c * cx - d * cy + shift_y
    return torch.stack([torch.stack([a, b, tx], -1), torch.stack([c, d, ty], -1)], -2)


def _rotate(level: torch.Tensor, height: int, width: int) -> torch.Tensor:
    angle = torch.deg2rad(level * MAX_ROTATE_DEGREES)
    cos, sin = torch.cos(angle), torch.sin(angle)
    return _affine(cos, -sin, sin, cos, height, width)


def _shear_x(level: torch.Tensor, height: int, width: int) -> torch.Tensor:
    one, zero = torch.ones_like(level), torch.zeros_like(level)
    return _affine(one, level * MAX_SHEAR, zero, one, height, width)


def _shear_y(level: torch.Tensor, height: int, width: int) -> torch.Tensor:
    one, zero = torch.ones_like(level), torch.zeros_like(level)
    return _affine(one, zero, level * MAX_SHEAR, one, height, width)


def _translate(level_x: torch.Tensor, level_y: torch.Tensor, height: int, width: int) -> torch.Tensor:
    one, zero = torch.ones_like(level_x), torch.zeros_like(level_x)
    return _affine(one, zero, zero, one, height, width,
                   shift_x=level_x * MAX_TRANSLATE_FRACTION * width,
                   shift_y=level_y * MAX_TRANSLATE_FRACTION * height)


def _translate_x(level: torch.Tensor, height: int, width: int) -> torch.Tensor:
    return _translate(level, torch.zeros_like(level), height, width)


def _translate_y(level: torch.Tensor, height: int, width: int) -> torch.Tensor:
    return _translate(torch.zeros_like(level), level, height, width)


COLOR_OPS: dict[str, ColorOp] = {
    "auto_contrast": _auto_contrast,
    "equalize": _equalize,
    "solarize": _solarize,
    "color": _color,
    "posterize": _posterize,
    "contrast": _contrast,
    "brightness": _brightness,
    "sharpness": _sharpness,
}
GEOMETRIC_OPS: dict[str, GeometricOp] = {
    "rotate": _rotate,
    "shear_x": _shear_x,
    "shear_y": _shear_y,
    "translate_x": _translate_x,
    "translate_y": _translate_y,
}
# Identity first (its samples need no work), geometric ops last so that, once samples are sorted
# by op, they form one contiguous run.
OPS: tuple[str, ...] = ("identity", *COLOR_OPS, *GEOMETRIC_OPS)


def check_randaugment_args(depth: object, severity: object) -> None:
    """Raise if ``depth`` is not an int >= 0 or ``severity`` not a number in [0, 10]."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be an int >= 0 (ops per image), got {depth!r}")
    if isinstance(severity, bool) or not isinstance(severity, Real) or not 0 <= severity <= MAX_SEVERITY:
        raise ValueError(f"severity must be a number in [0, 10] (10 = each op's maximum), got {severity!r}")


@dataclass(frozen=True)
class RandAugmentOptions:
    """RandAugment settings for the device stage.

    depth: ops applied to each image, one after the other (1, as the recipes use).
    severity: upper end of the per-image magnitude, drawn from U(0.1, severity), on a 0..10 scale.
    """

    depth: int = 1
    severity: float = 9

    def __post_init__(self) -> None:
        check_randaugment_args(self.depth, self.severity)


def _check_images(images: object) -> None:
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if not images.is_floating_point():
        raise TypeError(f"images must be floating point in [0, 1], got dtype {images.dtype}; "
                        "convert uint8 with images.float() / 255")
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be N x 3 x H x W (RGB), got shape {tuple(images.shape)}")


def apply_ops(images: torch.Tensor, ops: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """Apply ``OPS[ops[i]]`` at signed level ``levels[i]`` (in [-1, 1], 1 = the op's maximum) to sample i.

    ``ops`` (int64) and ``levels`` are CPU tensors of shape (n,); the sign of a level gives the
    direction of rotations, shears, translations and enhancements and is ignored by the other ops.
    This is one round of :func:`randaugment_batch` with the draws made by the caller.

    >>> ops = torch.tensor([OPS.index("rotate"), OPS.index("identity")])
    >>> apply_ops(torch.rand(2, 3, 8, 8), ops, torch.tensor([0.5, 0.0])).shape
    torch.Size([2, 3, 8, 8])
    """
    _check_images(images)
    n = images.shape[0]
    for name, value in (("ops", ops), ("levels", levels)):
        if not isinstance(value, torch.Tensor) or value.shape != (n,) or value.device.type != "cpu":
            raise ValueError(f"{name} must be a CPU tensor of shape ({n},), one entry per image, got {value!r}")
    if ops.dtype != torch.int64 or n and not 0 <= int(ops.min()) <= int(ops.max()) < len(OPS):
        raise ValueError(f"ops must be int64 indices into OPS (0..{len(OPS) - 1}), got {ops!r}")
    if not levels.is_floating_point() or n and float(levels.abs().max()) > 1:
        raise ValueError(f"levels must be floats in [-1, 1] (fractions of each op's maximum), got {levels!r}")
    order = torch.argsort(ops, stable=True)
    counts = torch.bincount(ops, minlength=len(OPS)).tolist()
    levels = levels.float()[order]
    order_dev = order.to(images.device, non_blocking=True)
    levels_dev = levels.to(images.device, images.dtype, non_blocking=True)
    out = images.clone()
    start = counts[0]
    for name, count in zip(COLOR_OPS, counts[1:]):
        if count:
            rows = order_dev[start:start + count]
            out.index_copy_(0, rows, COLOR_OPS[name](images.index_select(0, rows), levels_dev[start:start + count]))
        start += count
    if start < n:
        height, width = images.shape[-2:]
        matrices, offset = [], start
        for name, count in zip(GEOMETRIC_OPS, counts[1 + len(COLOR_OPS):]):
            matrices.append(GEOMETRIC_OPS[name](levels[offset:offset + count], height, width))
            offset += count
        rows = order_dev[start:]
        matrix = torch.cat(matrices).to(images.device, images.dtype, non_blocking=True)
        fill = torch.full((3,), FILL_GREY, device=images.device, dtype=images.dtype)
        warped = warp_affine(images.index_select(0, rows), matrix, (height, width),
                             padding_mode="fill", fill_value=fill)
        out.index_copy_(0, rows, warped)
    return out


def randaugment_batch(images: torch.Tensor, *, depth: int = 1, severity: float = 9,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """RandAugment each image of a float batch in [0, 1]: ``depth`` random ops at per-image magnitudes.

    Each sample draws its op among OPS, its magnitude from U(0.1, severity) (every magnitude equals
    ``severity`` when that is below 0.1) and a sign, which sets the direction of the geometric ops
    and whether color, contrast, brightness and sharpness go up or down. ``generator``
    must be a CPU generator; None uses torch's global one. Returns a new tensor of the same
    shape, dtype and device (the input itself when ``depth`` is 0 or the batch is empty).

    >>> g = torch.Generator().manual_seed(0)
    >>> randaugment_batch(torch.rand(8, 3, 32, 32), depth=1, severity=9, generator=g).shape
    torch.Size([8, 3, 32, 32])
    """
    _check_images(images)
    check_randaugment_args(depth, severity)
    n = images.shape[0]
    low = min(MIN_MAGNITUDE, float(severity))
    for _ in range(depth):
        if n == 0:
            break
        op = torch.randint(len(OPS), (n,), generator=generator)
        magnitude = low + (severity - low) * torch.rand(n, generator=generator, dtype=torch.float64)
        sign = torch.randint(2, (n,), generator=generator) * 2 - 1
        images = apply_ops(images, op, (sign * magnitude / MAX_SEVERITY).float())
    return images
