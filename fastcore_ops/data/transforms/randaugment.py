"""RandAugment on a whole batch on its device: each sample draws its own op(s) and magnitude.

Follows the recipe study's variant (close to TrivialAugment): ``depth`` ops per image (1 by
default), each sample's magnitude drawn uniformly from ``(0.1, severity)`` on a 0..10 scale where
10 is each op's maximum. Samples are grouped by the op they drew and every op runs once on its
group with per-sample magnitude tensors: a round costs at most one call per op, never a Python
loop over the samples.

All randomness is drawn on the CPU from the caller's generator (a CPU ``torch.Generator``): the
grouping is then known on the host without a device sync, and a seed gives the same draws on any
device.

Method card
    What: each training image gets ``depth`` ops drawn from ``OPS`` (identity, colour,
        contrast, rotation, shear, translation, ...) at a magnitude drawn per image, on the
        batch, after decoding.
    When it helps: long runs that overfit (Medium and Hot recipes); on short budgets it costs
        accuracy.
    Cost: about one op pass over the batch per round, on the device that trains.
    Options (``RandAugmentOptions``): ``depth`` 1, ``severity`` 9 (of 10).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fastcore_ops.checks import check_int, check_number, check_tensor
from fastcore_ops.data.transforms.registry import augmentation

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
# ITU-R BT.601 luma weights, the grey PIL's ImageEnhance.Color and Contrast blend towards.
LUMA_WEIGHTS = (0.299, 0.587, 0.114)

# Every color op overwrites its group's images (a private copy apply_ops made) with the result,
# given their signed levels in [-1, 1] (level = sign * magnitude / 10) as a (k,) tensor on the
# images' device; unsigned ops use the absolute level. Working in place spares a full-size
# allocation and copy per op: on the CPU these ops are bound by memory traffic, not arithmetic.
ColorOp = Callable[[torch.Tensor, torch.Tensor], None]
# Geometric ops return the (k, 2, 3) pixel-space affine matrices for their levels and image size,
# so all geometric samples of a round share one warp.
GeometricOp = Callable[[torch.Tensor, int, int], torch.Tensor]


def _per_sample(values: torch.Tensor) -> torch.Tensor:
    """(k,) values shaped to broadcast over (k, C, H, W) images."""
    return values.view(-1, 1, 1, 1)


def _auto_contrast(images: torch.Tensor, level: torch.Tensor) -> None:
    # Own lines rather than kornia's normalize_min_max: that maps a flat channel to black, while
    # auto-contrast (as in PIL) must leave a channel with no range untouched. Dividing (rather than
    # multiplying by 1 / span) keeps the brightest pixel at exactly 1.
    low = images.amin(dim=(-2, -1), keepdim=True)
    span = images.amax(dim=(-2, -1), keepdim=True) - low
    flat = span <= 0
    images.sub_(low.masked_fill_(flat, 0)).div_(span.masked_fill_(flat, 1))


def _equalize(images: torch.Tensor, level: torch.Tensor) -> None:
    # Own lines rather than kornia's equalize: one bincount over all planes at once and a single
    # table lookup take about half the time of its scatter/gather passes. Follows PIL's ImageOps.equalize
    # on the 8-bit levels round(255 x): each level maps to (step // 2 + pixels below it) // step,
    # where step = (pixels not at the highest level present) // 255; a plane with step 0 stays as is.
    k, channels, height, width = images.shape
    planes = k * channels
    pixels = height * width
    # int32 indices halve the traffic of int64 ones; plane p's levels land in bins 256p .. 256p + 255,
    # and the clamp keeps a value outside [0, 1] from counting in a neighbouring plane.
    bins = images.reshape(planes, pixels).mul(255).add_(0.5).clamp_(0, 255).to(torch.int32)
    bins += torch.arange(0, planes * 256, 256, device=images.device, dtype=torch.int32).view(-1, 1)
    histogram = torch.bincount(bins.view(-1), minlength=planes * 256).view(planes, 256)
    levels = torch.arange(256, device=images.device)
    highest = torch.where(histogram > 0, levels, 0).amax(dim=1, keepdim=True)
    step = (pixels - histogram.gather(1, highest)) // 255
    below = histogram.cumsum(1) - histogram
    table = ((below + step // 2) // step.clamp(min=1)).clamp_(max=255).to(images.dtype).div_(255)
    equalized = table.view(-1).index_select(0, bins.view(-1)).view(k, channels, height, width)
    torch.where((step == 0).view(k, channels, 1, 1), images, equalized, out=images)


def _solarize(images: torch.Tensor, level: torch.Tensor) -> None:
    # x + above * (1 - 2x), with above = 1 where x >= threshold: torch.where with a full-size mask
    # runs a scalar loop on the CPU, three times slower than these vectorized passes. Over [-1, 1]
    # (x - threshold) floors to -1 exactly below the threshold and to 0 or 1 at or above it.
    above = (images - _per_sample(1.0 - level.abs())).floor_().add_(1).clamp_(0, 1)
    images.addcmul_(above, torch.rsub(images, 1.0, alpha=2))


def _posterize(images: torch.Tensor, level: torch.Tensor) -> None:
    # Keeps the top bits of the 8-bit level round(255 x), as PIL's ImageOps.posterize on uint8;
    # floor((255 x + 0.5) / step) equals floor(round(255 x) / step) for the integer step.
    step = _per_sample(torch.exp2(torch.round(level.abs() * MAX_POSTERIZE_BITS_REMOVED)))
    posterized = torch.addcmul(0.5 / step, images, 255 / step).floor_().mul_(step / 255)
    # With no bit removed the image is left exactly as it is, even between 8-bit levels.
    torch.where(step == 1, images, posterized, out=images)


def _color(images: torch.Tensor, level: torch.Tensor) -> None:
    # grey + factor * (image - grey) with factor = 1 + 0.9 level, as one lerp towards grey.
    red, green, blue = images.unbind(1)
    grey = (red * LUMA_WEIGHTS[0]).add_(green, alpha=LUMA_WEIGHTS[1]).add_(blue, alpha=LUMA_WEIGHTS[2])
    images.lerp_(grey.unsqueeze(1), _per_sample(-MAX_ENHANCE * level)).clamp_(0, 1)


def _contrast(images: torch.Tensor, level: torch.Tensor) -> None:
    # The mean grey is the luma-weighted mean of the channel means: no grey image is needed.
    red, green, blue = images.mean(dim=(-2, -1)).unbind(1)
    mean_grey = red * LUMA_WEIGHTS[0] + green * LUMA_WEIGHTS[1] + blue * LUMA_WEIGHTS[2]
    images.lerp_(_per_sample(mean_grey), _per_sample(-MAX_ENHANCE * level)).clamp_(0, 1)


def _brightness(images: torch.Tensor, level: torch.Tensor) -> None:
    images.mul_(_per_sample(1.0 + MAX_ENHANCE * level)).clamp_(0, 1)


def _sharpness(images: torch.Tensor, level: torch.Tensor) -> None:
    # Own lines rather than kornia's sharpness: its depthwise conv2d is slow on the CPU (13 ms for
    # 8 images at 176 px), and so is avg_pool2d; the same 3x3 smoothing as shifted-slice sums takes
    # a fraction of that. PIL's kernel is [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13, i.e. (3x3 box sum
    # + 4 * centre) / 13; border pixels keep their values, as in PIL and torchvision.
    rows = images[..., :-2, :] + images[..., 1:-1, :]
    rows += images[..., 2:, :]
    smooth = rows[..., :-2] + rows[..., 1:-1]
    smooth += rows[..., 2:]
    centre = images[..., 1:-1, 1:-1]
    smooth.add_(centre, alpha=4).div_(13)
    # smooth + factor * (image - smooth) with factor = 1 + 0.9 level, as one lerp towards smooth.
    centre.lerp_(smooth, _per_sample(-MAX_ENHANCE * level)).clamp_(0, 1)


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


def _sampling_grid(matrices: torch.Tensor, height: int, width: int, device: torch.device,
                   dtype: torch.dtype) -> torch.Tensor:
    """grid_sample's (k, H, W, 2) grid for the inverse of the (k, 2, 3) pixel-space forward ``matrices``.

    Pixel coordinates are pixel centres, 0 .. W - 1; grid_sample with align_corners=False reads
    pixel x at (2 x + 1) / W - 1, so the grid is that normalization applied to the inverse map.
    """
    k = matrices.shape[0]
    forward = torch.eye(3, dtype=torch.float64).repeat(k, 1, 1)
    forward[:, :2] = matrices
    inverse = torch.linalg.inv(forward)[:, :2]
    size = torch.tensor([width, height], dtype=torch.float64).view(1, 2, 1)
    # normalized source = (2 / size) (inverse @ [x, y, 1]) + 1 / size - 1; built by hand rather
    # than with F.affine_grid, whose batched matrix product is several times slower on the CPU.
    theta = 2 * inverse / size
    theta[:, :, 2] += 1 / size[:, :, 0] - 1
    theta = theta.to(device, dtype, non_blocking=True)
    xs = torch.arange(width, device=device, dtype=dtype).view(1, 1, width)
    ys = torch.arange(height, device=device, dtype=dtype).view(1, height, 1)
    grid = torch.empty(k, height, width, 2, device=device, dtype=dtype)
    for axis in range(2):
        row = theta[:, axis].view(k, 3, 1, 1)
        torch.add(row[:, 0] * xs + row[:, 2], row[:, 1] * ys, out=grid[..., axis])
    return grid


def _warp_with_grey_fill(images: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
    """Bilinear warp of ``images`` (overwritten) by the (k, 2, 3) pixel-space forward ``matrices``; grey outside.

    Own lines rather than kornia's warp_affine (about twice as slow here): it warps a ones mask
    as well to paint the fill, while warping (image - grey) with zero padding and adding grey
    back gives the same blend, exact grey outside, in one grid_sample.
    """
    height, width = images.shape[-2:]
    # Half-precision sampling coordinates are off by up to 1/8 pixel at 176 px: warp in float32.
    dtype = torch.promote_types(images.dtype, torch.float32)
    grid = _sampling_grid(matrices, height, width, images.device, dtype)
    warped = F.grid_sample(images.to(dtype).sub_(FILL_GREY), grid, mode="bilinear", padding_mode="zeros",
                           align_corners=False)
    return warped.add_(FILL_GREY).to(images.dtype)


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
    check_int("depth", depth, low=0)
    check_number("severity", severity, low=0, high=MAX_SEVERITY)


@augmentation("randaugment", order=50, runs_in="batch")
@dataclass(frozen=True)
class RandAugmentOptions:
    """RandAugment settings for the batch stage.

    depth: ops applied to each image, one after the other (1, as the recipes use).
    severity: upper end of the per-image magnitude, drawn from U(0.1, severity), on a 0..10 scale.
    """

    depth: int = 1
    severity: float = 9

    def __post_init__(self) -> None:
        check_randaugment_args(self.depth, self.severity)

    def apply(self, images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """:func:`randaugment_batch` with these settings; given uint8, only its own gathered copy becomes floats."""
        return randaugment_batch(images, depth=self.depth, severity=self.severity, generator=generator)


def _check_images(images: object) -> None:
    check_tensor("images", images, floating=False)
    if not (images.is_floating_point() or images.dtype == torch.uint8):
        raise TypeError(f"images must be floating point in [0, 1] or uint8 in [0, 255], got dtype {images.dtype}")
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be N x 3 x H x W (RGB), got shape {tuple(images.shape)}")


def apply_ops(images: torch.Tensor, ops: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """Apply ``OPS[ops[i]]`` at signed level ``levels[i]`` (in [-1, 1], 1 = the op's maximum) to sample i.

    ``ops`` (int64) and ``levels`` are CPU tensors of shape (n,); the sign of a level gives the
    direction of rotations, shears, translations and enhancements and is ignored by the other ops.
    This is one round of :func:`randaugment_batch` with the draws made by the caller; uint8
    ``images`` are read as ``x / 255`` and the result is float32.

    >>> ops = torch.tensor([OPS.index("rotate"), OPS.index("identity")])
    >>> apply_ops(torch.rand(2, 3, 8, 8), ops, torch.tensor([0.5, 0.0])).shape
    torch.Size([2, 3, 8, 8])
    """
    _check_images(images)
    n = images.shape[0]
    for name, value in (("ops", ops), ("levels", levels)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a CPU tensor of shape ({n},), one entry per image, got {type(value).__name__}")
        if value.shape != (n,) or value.device.type != "cpu":
            raise ValueError(f"{name} must be a CPU tensor of shape ({n},), one entry per image, got {value!r}")
    if ops.dtype != torch.int64:
        raise TypeError(f"ops must be int64 indices into OPS (0..{len(OPS) - 1}), got dtype {ops.dtype}")
    if n and not 0 <= int(ops.min()) <= int(ops.max()) < len(OPS):
        raise ValueError(f"ops must be int64 indices into OPS (0..{len(OPS) - 1}), got {ops!r}")
    if not levels.is_floating_point():
        raise TypeError(f"levels must be floats in [-1, 1] (fractions of each op's maximum), got dtype {levels.dtype}")
    if n and float(levels.abs().max()) > 1:
        raise ValueError(f"levels must be floats in [-1, 1] (fractions of each op's maximum), got {levels!r}")
    order = torch.argsort(ops, stable=True)
    counts = torch.bincount(ops, minlength=len(OPS)).tolist()
    levels = levels.float()[order]
    order_dev = order.to(images.device, non_blocking=True)
    # One gather lines each op's samples up in a contiguous run of a private copy, where every op
    # writes its result; one gather by the inverse order puts each sample back in its slot. (Two
    # index_copy_ scatters instead cost 4x that gather on a CPU: a third of RandAugment's time.)
    grouped = _gather_samples(images, order_dev)
    if grouped.dtype == torch.uint8:  # converted after the gather, which then moves a quarter of the bytes
        grouped = grouped.float().div_(255)
    levels_dev = levels.to(images.device, grouped.dtype, non_blocking=True)
    start = counts[0]
    for name, count in zip(COLOR_OPS, counts[1:]):
        if count:
            COLOR_OPS[name](grouped[start:start + count], levels_dev[start:start + count])
        start += count
    if start < n:
        height, width = images.shape[-2:]
        matrices, offset = [], start
        for name, count in zip(GEOMETRIC_OPS, counts[1 + len(COLOR_OPS):]):
            matrices.append(GEOMETRIC_OPS[name](levels[offset:offset + count].double(), height, width))
            offset += count
        grouped[start:] = _warp_with_grey_fill(grouped[start:], torch.cat(matrices))
    return _gather_samples(grouped, torch.argsort(order).to(images.device, non_blocking=True))


def _gather_samples(images: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``images.index_select(0, index)``, contiguous; on a CPU, index_select of a 4-d batch copies
    element by element (6x slower than through a 2-d view of whole samples, which copies rows)."""
    return images.reshape(images.shape[0], -1).index_select(0, index).view(images.shape)


def randaugment_batch(images: torch.Tensor, *, depth: int = 1, severity: float = 9,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """RandAugment each image of a float batch in [0, 1] (or a uint8 one, read as x / 255): ``depth`` random ops.

    Each sample draws its op among OPS, its magnitude from U(0.1, severity) (every magnitude equals
    ``severity`` when that is below 0.1) and a sign, which sets the direction of the geometric ops
    and whether color, contrast, brightness and sharpness go up or down. ``generator``
    must be a CPU generator; None uses torch's global one. Returns a new tensor of the same
    shape, dtype (float32 for uint8) and device, or the input itself when ``depth`` is 0 or the
    batch is empty.

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
