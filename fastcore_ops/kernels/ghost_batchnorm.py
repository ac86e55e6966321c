"""Ghost batch normalization (Hoffer et al., "Train longer, generalize better", 2017).

In training, every consecutive chunk of ``ghost_batch_size`` samples (the chunks
``x.split(ghost_batch_size)`` cuts, the last one possibly smaller) is normalized with its
own per-channel mean and biased variance, which keeps the regularizing noise of small
batches in large-batch training. All chunks are handled in the same launches, instead of
one ``F.batch_norm`` per chunk followed by a ``torch.cat``.

Launches, each over programs (chunk, split, channel block) that loop over their slice of
the chunk: forward computes per-slice statistics, then normalizes (each program merges its
chunk's slices first), then (in training with running statistics) a tiny kernel folds the
per-chunk statistics into the running ones: at most 3 launches. Backward computes per-slice
sums of the gradient, then writes the gradients of x, weight and bias: 2 launches. Nothing
else runs on the device: no statistics or gradient buffer is zero-filled (the kernels write
every value of them), and autograd materializes no zero gradients for the non-differentiable
statistics outputs. A chunk is cut into several slices ("splits") only when it is large, so
that large chunks still fill the GPU when there are few chunks and channel blocks.

Layouts: contiguous (N, C), (N, C, H, W) and channels_last (N, C, H, W); outputs follow the
input's layout. Each slice's statistics are sums of deviations from a value of its own
channel (shifted sums, no division per element), and slices are merged exactly with Chan's
formula (never E[x^2] - E[x]^2 about zero), in fp32 for fp16, bf16 and fp32 storage and
fp64 for fp64.
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F

from ..checks import check_bool, check_int, check_number, check_same_device, check_tensor
from . import backend, rivals
from .backend import tl, triton
from .custom_op import kernel_op
from .layout import empty_like_layout, is_channels_last

# Chunks are cut into splits (a power of two per chunk) until there are about
# _TARGET_PROGRAMS programs: some 8 resident per SM on an H100's 132 SMs, enough loads in
# flight to stream at full bandwidth (8 chunks of 64 channels alone would give 8 programs).
# A split keeps at least _MIN_VALUES_PER_SPLIT values per channel, so that a program's work
# outweighs loading its chunk's statistics. _TYPICAL_BLOCK_C guesses the autotuned channel
# block of each layout, since the splits must be fixed before the tuner picks.
_TARGET_PROGRAMS = 1024
_MIN_VALUES_PER_SPLIT = 512
_MAX_SPLITS = 64
_TYPICAL_BLOCK_C = {"rows": 64, "planes": 8, "flat": 16}
# NCHW planes of at most this many pixels (14 x 14 and smaller) are read as flat tiles (below).
_FLAT_MAX_PIXELS = 256

# Memory offsets are int64; counts of values per channel in a chunk (at most N * H * W) are int32.
_MAX_VALUES = 2**31 - 1


# ----------------------------------------------------------------------------------------
# Triton kernels
#
# Every program owns one slice ("split") of one chunk for BLOCK_C channels and walks it in
# tiles. The constexprs PLANES and FLAT pick how a tile maps onto memory:
#   PLANES (contiguous NCHW): a [BLOCK_C, BLOCK_R] tile is BLOCK_C channels x BLOCK_R pixels of
#     one sample's H*W plane, contiguous along the pixels; a split is a range of samples.
#   FLAT (PLANES of at most _FLAT_MAX_PIXELS): a [BLOCK_R, 1] tile is one sample's BLOCK_C planes
#     end to end (BLOCK_C * H * W <= BLOCK_R), so its lanes are contiguous and aligned: a 7 x 7
#     plane's row of a PLANES tile starts 98 bytes after the last, which no vector load can
#     read. Per-channel values reach the lanes, and the lanes' sums their channels, through
#     tl.gather (_per_lane, _per_channel), once a program.
#   rows (channels_last, (N, C), and 1x1 images): a [BLOCK_C, BLOCK_R] tile is BLOCK_C channels x
#     BLOCK_R rows of C contiguous channels, one row per (sample, pixel); a split is a range of rows.
# Each layout has its own autotuner (its own tile shapes), keyed on power-of-two buckets of
# the shape, so that sizes close together share one tuning (runtime arguments, not specialised on).
# ----------------------------------------------------------------------------------------

# 8 elements per thread: the statistics and backward sums kernels keep 2 accumulators per element.
_ROW_CONFIGS = [
    triton.Config({"BLOCK_C": 64, "BLOCK_R": 16}, num_warps=4),
    triton.Config({"BLOCK_C": 64, "BLOCK_R": 32}, num_warps=8),
    triton.Config({"BLOCK_C": 128, "BLOCK_R": 8}, num_warps=4),
    triton.Config({"BLOCK_C": 128, "BLOCK_R": 16}, num_warps=8),
    triton.Config({"BLOCK_C": 32, "BLOCK_R": 32}, num_warps=4),
    triton.Config({"BLOCK_C": 16, "BLOCK_R": 64}, num_warps=4),
]
_PLANE_CONFIGS = [
    triton.Config({"BLOCK_C": 1, "BLOCK_R": 1024}, num_warps=8),
    triton.Config({"BLOCK_C": 2, "BLOCK_R": 512}, num_warps=4),
    triton.Config({"BLOCK_C": 4, "BLOCK_R": 256}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "BLOCK_R": 128}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "BLOCK_R": 256}, num_warps=8),
]
# The first fits every flat plane (4 x 256 lanes): the one config of FASTCORE_OPS_AUTOTUNE=0 and the interpreter.
_FLAT_CONFIGS = [
    triton.Config({"BLOCK_C": 4, "BLOCK_R": 1024}, num_warps=4),
    triton.Config({"BLOCK_C": 16, "BLOCK_R": 1024}, num_warps=4),  # 7 x 7: 784 of 1024 lanes busy
    triton.Config({"BLOCK_C": 32, "BLOCK_R": 2048}, num_warps=8),
    triton.Config({"BLOCK_C": 8, "BLOCK_R": 512}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "BLOCK_R": 1024}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "BLOCK_R": 2048}, num_warps=8),  # 14 x 14: 1568 of 2048
    triton.Config({"BLOCK_C": 2, "BLOCK_R": 512}, num_warps=4),
]
_KEY = ["N_BUCKET", "C_BUCKET", "HW_BUCKET", "G_BUCKET"]
_TUNED_JIT = triton.jit(do_not_specialize=_KEY)
# The interpreter pays per block operation: large tiles keep the tests fast.
_ROW_INTERPRETER = triton.Config({"BLOCK_C": 32, "BLOCK_R": 128})
_PLANE_INTERPRETER = triton.Config({"BLOCK_C": 16, "BLOCK_R": 256})
# Partial results of splits are read this many splits per tile: a bounded tile, few registers.
_SPLIT_GROUP = tl.constexpr(16)
# The normalize kernel merges (mean, M2, count), three loads a split, before its loop: at 16 splits a tile the rows'
# 64-channel tile took 96 registers (5 CTAs an SM, not 8), at 4 it takes 46.
_STATISTICS_GROUP = tl.constexpr(4)


def _plane_config(configs: list[triton.Config], arguments: dict) -> triton.Config:
    """The planes' config at a size the table lacks: the first whose BLOCK_R fits the plane's size bucket. The
    first config's 1024 lanes left 95% of them idle on 7x7 planes: 0.19x the loop on the H200, untuned
    (reports/lent-gpu-h200-20261204); such planes are flat tiles now.

        >>> _plane_config(_PLANE_CONFIGS, {"HW_BUCKET": 512}).kwargs  # 17x17
        {'BLOCK_C': 2, 'BLOCK_R': 512}
        >>> _plane_config(_PLANE_CONFIGS, {"HW_BUCKET": 4096}).kwargs  # 56x56
        {'BLOCK_C': 1, 'BLOCK_R': 1024}
    """
    widths = sorted({config.kwargs["BLOCK_R"] for config in configs})
    lanes = min(max(arguments["HW_BUCKET"], widths[0]), widths[-1])
    return next((config for config in configs if config.kwargs["BLOCK_R"] == lanes), configs[0])


def _fits(config: triton.Config, arguments: dict) -> bool:
    """Whether a flat config's tile holds its BLOCK_C planes at every size of the launch's bucket.

        >>> _fits(_FLAT_CONFIGS[1], {"HW_BUCKET": 64}), _fits(_FLAT_CONFIGS[1], {"HW_BUCKET": 256})
        (True, False)
    """
    return config.kwargs["BLOCK_C"] * arguments["HW_BUCKET"] <= config.kwargs["BLOCK_R"]


def _flat_config(configs: list[triton.Config], arguments: dict) -> triton.Config:
    """The flat config at a size the table lacks: the first that the planes fill (to the bucket), else the first.

        >>> _flat_config(_FLAT_CONFIGS, {"HW_BUCKET": 64}).kwargs  # 7x7
        {'BLOCK_C': 16, 'BLOCK_R': 1024}
        >>> _flat_config(_FLAT_CONFIGS, {"HW_BUCKET": 256}).kwargs  # 14x14
        {'BLOCK_C': 4, 'BLOCK_R': 1024}
    """
    filled = (config for config in configs
              if config.kwargs["BLOCK_C"] * arguments["HW_BUCKET"] == config.kwargs["BLOCK_R"])
    return next(filled, configs[0])


def _tuned(kernel) -> dict:
    """The kernel under three autotuners, one per layout, indexed by its name (_Plan.layout)."""
    return {
        "rows": backend.autotune(_ROW_CONFIGS, _KEY, _ROW_INTERPRETER)(kernel),
        "planes": backend.autotune(_PLANE_CONFIGS, _KEY, _PLANE_INTERPRETER, untuned=_plane_config)(kernel),
        "flat": backend.autotune(_FLAT_CONFIGS, _KEY, untuned=_flat_config, valid=_fits)(kernel),
    }


@triton.jit
def _first_channel(C, BLOCK_C: tl.constexpr):
    """The first of this program's BLOCK_C channels."""
    return (tl.program_id(0) % tl.cdiv(C, BLOCK_C)) * BLOCK_C


@triton.jit
def _program(N, C, HW, G, S, SPLIT, PLANES: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's chunk, its (chunk, split) index, its channels, and the units it covers.

    A unit is one sample when PLANES, else one row of C channels. Returns the first unit
    (int64), the number of units (0 for a split past the end of a short last chunk) and
    the number of values per channel in the whole chunk.
    """
    ks = tl.program_id(0) // tl.cdiv(C, BLOCK_C)
    c = _first_channel(C, BLOCK_C) + tl.arange(0, BLOCK_C)
    chunk = ks // S
    first_sample = chunk * G
    samples = tl.minimum(G, N - first_sample)
    if PLANES:
        chunk_units = samples
        first_unit = first_sample.to(tl.int64)
    else:
        chunk_units = samples * HW
        first_unit = first_sample.to(tl.int64) * HW
    skipped = (ks % S) * SPLIT
    units = tl.maximum(tl.minimum(SPLIT, chunk_units - skipped), 0)
    return chunk, ks, c, first_unit + skipped, units, samples * HW


@triton.jit
def _tile_count(units, HW, PLANES: tl.constexpr, BLOCK_R: tl.constexpr):
    if PLANES:
        count = units * tl.cdiv(HW, BLOCK_R)
    else:
        count = tl.cdiv(units, BLOCK_R)
    return count


@triton.jit
def _tile(it, start, units, c, C, HW, PLANES: tl.constexpr, FLAT: tl.constexpr, BLOCK_C: tl.constexpr,
          BLOCK_R: tl.constexpr):
    """Element offsets (int64) and mask of tile ``it`` of a program's units: [BLOCK_R, 1] when FLAT, else
    [BLOCK_C, BLOCK_R]."""
    lanes = tl.arange(0, BLOCK_R)
    if FLAT:
        # One sample's planes a tile. Each bound is a count of channels times HW: where the count is a
        # multiple of 16 (BLOCK_C, and C - first when C is), so is the bound, and a vector shares its mask.
        first = _first_channel(C, BLOCK_C)
        offsets = ((start + it) * C * HW + first * HW + lanes)[:, None]
        mask = ((lanes < BLOCK_C * HW) & (lanes < (C - first) * HW))[:, None]
    elif PLANES:
        # Finish one sample's planes before the next: each row of the tile is a contiguous
        # run of one channel's pixels.
        tiles_per_plane = tl.cdiv(HW, BLOCK_R)
        first = (it % tiles_per_plane) * BLOCK_R
        base = (start + it // tiles_per_plane) * C * HW + first
        offsets = base + (c.to(tl.int64) * HW)[:, None] + lanes[None, :]
        inside = lanes < HW - first
    else:
        row = start + it * BLOCK_R
        offsets = row * C + c[:, None] + (lanes.to(tl.int64) * C)[None, :]
        inside = lanes < units - it * BLOCK_R
    if not FLAT:
        mask = (c < C)[:, None] & inside[None, :]
    return offsets, mask


@triton.jit
def _tile_zeros(ACC: tl.constexpr, FLAT: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr):
    """An accumulator in a tile's shape."""
    if FLAT:
        zeros = tl.zeros((BLOCK_R, 1), dtype=ACC)
    else:
        zeros = tl.zeros((BLOCK_C, BLOCK_R), dtype=ACC)
    return zeros


@triton.jit
def _per_lane(values, HW, FLAT: tl.constexpr, BLOCK_R: tl.constexpr):
    """The channels' ``values`` [BLOCK_C] along a tile's first axis: when FLAT each lane's channel's [BLOCK_R]."""
    if FLAT:
        lanes = tl.arange(0, BLOCK_R)
        spread = tl.gather(values, tl.minimum(lanes // HW, values.shape[0] - 1), 0)  # spare lanes: the last's
    else:
        spread = values
    return spread


@triton.jit
def _per_channel(tile, HW, FLAT: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr):
    """An accumulator tile's sums per channel [BLOCK_C]: its rows', or when FLAT each channel's HW lanes'."""
    sums = tl.sum(tile, axis=1)
    if FLAT:
        # Slot (channel k, pixel p) of a [BLOCK_C, BLOCK_R // BLOCK_C] grid takes lane k * HW + p (HW fits: _fits).
        slot = tl.arange(0, BLOCK_R)
        pixel = slot % (BLOCK_R // BLOCK_C)
        lane = tl.minimum((slot // (BLOCK_R // BLOCK_C)) * HW + pixel, BLOCK_R - 1)
        picked = tl.where(pixel < HW, tl.gather(sums, lane, 0), 0.0)
        sums = tl.sum(tl.reshape(picked, (BLOCK_C, BLOCK_R // BLOCK_C)), axis=1)
    return sums


@triton.jit
def _merge(mean, m2, count):
    """Merge groups (along axis 1) of (mean, sum of squared deviations M2, count) into one.

    The groups' M2 plus each group's count times its mean's squared distance from the
    merged mean: Chan et al.'s pairwise formula summed over all groups at once, with
    deviations taken from the merged mean, so nothing large cancels.
    """
    total = tl.sum(count, axis=1)
    merged = tl.sum(count * mean, axis=1) / tl.maximum(total, 1.0)
    deviation = mean - merged[:, None]
    return merged, tl.sum(m2 + count * deviation * deviation, axis=1), total


@triton.jit
def _combine(mean_a, m2_a, count_a, mean_b, m2_b, count_b):
    # Chan et al.'s merge of two groups' (mean, M2, count).
    count = count_a + count_b
    delta = mean_b - mean_a
    share_b = count_b / tl.maximum(count, 1.0)
    return mean_a + delta * share_b, m2_a + m2_b + delta * delta * count_a * share_b, count


@triton.jit
def _inverse_std(var, eps):
    return 1.0 / tl.sqrt(var + eps)


@_TUNED_JIT
def _forward_stats_kernel(
    x_ptr, partial_ptr, N, C, HW, G, S, SPLIT, N_BUCKET, C_BUCKET, HW_BUCKET, G_BUCKET,
    PLANES: tl.constexpr, FLAT: tl.constexpr, ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
):
    # Shifted sums: per lane, S1 = sum(x - K) and S2 = sum((x - K)^2) about a per-channel
    # shift K; after the loop, per channel, mean = K + S1 / n and M2 = S2 - S1^2 / n: one
    # division per channel, where Welford's update divides once per element.
    # S2 = M2 + n (mean - K)^2, so the subtraction cancels only n (mean - K)^2: precision is
    # lost only as |mean - K| grows relative to the std, never with the channel's offset
    # from zero (E[x^2] - E[x]^2 about zero would lose everything for |mean| >> std). K is
    # the split's first value of the channel, a real sample of it: typically within a std or
    # two of the mean, and never farther than sqrt(M2) (its own term of M2), so
    # S2 <= (n + 1) M2 even then. The split's (mean, M2, count) go to partial[ks] as three
    # rows of C, which the normalize kernel merges exactly (Chan's formula).
    _, ks, c, start, units, _ = _program(N, C, HW, G, S, SPLIT, PLANES, BLOCK_C)
    keep = c < C
    if PLANES:
        first = start * C * HW + c.to(tl.int64) * HW
        values = units * HW
    else:
        first = start * C + c
        values = units
    # A split with no units (past the end of a short last chunk) gets K = 0 and count 0.
    shift = tl.load(x_ptr + first, mask=keep & (units > 0), other=0.0).to(ACC)
    lane_shift = _per_lane(shift, HW, FLAT, BLOCK_R)
    s1 = _tile_zeros(ACC, FLAT, BLOCK_C, BLOCK_R)
    s2 = _tile_zeros(ACC, FLAT, BLOCK_C, BLOCK_R)
    for it in range(0, _tile_count(units, HW, PLANES, BLOCK_R)):
        offsets, mask = _tile(it, start, units, c, C, HW, PLANES, FLAT, BLOCK_C, BLOCK_R)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(ACC)
        d = tl.where(mask, x - lane_shift[:, None], 0.0)
        s1 += d
        s2 += d * d
    s1 = _per_channel(s1, HW, FLAT, BLOCK_C, BLOCK_R)
    s2 = _per_channel(s2, HW, FLAT, BLOCK_C, BLOCK_R)
    count = tl.zeros((BLOCK_C,), dtype=ACC) + values.to(ACC)
    shift_to_mean = s1 / tl.maximum(count, 1.0)  # 0 for an empty split: no NaN
    mean = shift + shift_to_mean
    m2 = tl.maximum(s2 - s1 * shift_to_mean, 0.0)  # rounding must not make it negative
    dst = partial_ptr + ks.to(tl.int64) * 3 * C + c
    tl.store(dst, mean, mask=keep)
    tl.store(dst + C, m2, mask=keep)
    tl.store(dst + 2 * C, count, mask=keep)


@triton.jit
def _chunk_statistics(partial_ptr, chunk, c, C, S):
    """Mean and biased variance of one chunk, merged from its S splits' partial statistics.

    Every program of the chunk merges in the same order, so they all agree bit for bit.
    """
    keep = (c < C)[:, None]
    mean = tl.zeros(c.shape, dtype=partial_ptr.dtype.element_ty)
    m2 = tl.zeros(c.shape, dtype=partial_ptr.dtype.element_ty)
    count = tl.zeros(c.shape, dtype=partial_ptr.dtype.element_ty)
    for first in range(0, S, _STATISTICS_GROUP):
        split = first + tl.arange(0, _STATISTICS_GROUP)
        src = partial_ptr + ((chunk * S + split).to(tl.int64) * 3 * C)[None, :] + c[:, None]
        ok = keep & (split < S)[None, :]  # a missing split loads count 0, which merges as nothing
        group_mean, group_m2, group_count = _merge(
            tl.load(src, mask=ok, other=0.0), tl.load(src + C, mask=ok, other=0.0),
            tl.load(src + 2 * C, mask=ok, other=0.0))
        mean, m2, count = _combine(mean, m2, count, group_mean, group_m2, group_count)
    return mean, m2 / tl.maximum(count, 1.0)


@_TUNED_JIT
def _forward_normalize_kernel(
    x_ptr, out_ptr, weight_ptr, bias_ptr, partial_ptr, mean_ptr, var_ptr, N, C, HW, G, S, SPLIT, eps,
    N_BUCKET, C_BUCKET, HW_BUCKET, G_BUCKET, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, PLANES: tl.constexpr,
    FLAT: tl.constexpr, ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
):
    chunk, ks, c, start, units, _ = _program(N, C, HW, G, S, SPLIT, PLANES, BLOCK_C)
    keep = c < C
    mean, var = _chunk_statistics(partial_ptr, chunk, c, C, S)
    # The first split of each chunk publishes its statistics, for backward and the running stats.
    first_split = ks % S == 0
    tl.store(mean_ptr + chunk.to(tl.int64) * C + c, mean, mask=keep & first_split)
    tl.store(var_ptr + chunk.to(tl.int64) * C + c, var, mask=keep & first_split)
    scale = _inverse_std(var, eps)
    if HAS_WEIGHT:
        scale *= tl.load(weight_ptr + c, mask=keep, other=1.0).to(ACC)
    if HAS_BIAS:
        shift = tl.load(bias_ptr + c, mask=keep, other=0.0).to(ACC)
    else:
        shift = tl.zeros((BLOCK_C,), dtype=ACC)
    mean = _per_lane(mean, HW, FLAT, BLOCK_R)
    scale = _per_lane(scale, HW, FLAT, BLOCK_R)
    shift = _per_lane(shift, HW, FLAT, BLOCK_R)
    for it in range(0, _tile_count(units, HW, PLANES, BLOCK_R)):
        offsets, mask = _tile(it, start, units, c, C, HW, PLANES, FLAT, BLOCK_C, BLOCK_R)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(ACC)
        # (x - mean) before scaling: channels with |mean| >> std keep their precision.
        y = (x - mean[:, None]) * scale[:, None] + shift[:, None]
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


@_TUNED_JIT
def _backward_sums_kernel(
    grad_ptr, x_ptr, mean_ptr, var_ptr, partial_ptr, N, C, HW, G, S, SPLIT, eps,
    N_BUCKET, C_BUCKET, HW_BUCKET, G_BUCKET,
    PLANES: tl.constexpr, FLAT: tl.constexpr, ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
):
    # Per split: sum(g) and sum(g * x_hat) into partial[ks] as two rows of C.
    chunk, ks, c, start, units, _ = _program(N, C, HW, G, S, SPLIT, PLANES, BLOCK_C)
    keep = c < C
    mean = tl.load(mean_ptr + chunk.to(tl.int64) * C + c, mask=keep, other=0.0).to(ACC)
    inv_std = _inverse_std(tl.load(var_ptr + chunk.to(tl.int64) * C + c, mask=keep, other=1.0).to(ACC), eps)
    lane_mean = _per_lane(mean, HW, FLAT, BLOCK_R)
    sum_g = _tile_zeros(ACC, FLAT, BLOCK_C, BLOCK_R)
    sum_gx = _tile_zeros(ACC, FLAT, BLOCK_C, BLOCK_R)
    for it in range(0, _tile_count(units, HW, PLANES, BLOCK_R)):
        offsets, mask = _tile(it, start, units, c, C, HW, PLANES, FLAT, BLOCK_C, BLOCK_R)
        g = tl.load(grad_ptr + offsets, mask=mask, other=0.0).to(ACC)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(ACC)
        sum_g += g
        sum_gx += g * (x - lane_mean[:, None])
    dst = partial_ptr + ks.to(tl.int64) * 2 * C + c
    tl.store(dst, _per_channel(sum_g, HW, FLAT, BLOCK_C, BLOCK_R), mask=keep)
    tl.store(dst + C, _per_channel(sum_gx, HW, FLAT, BLOCK_C, BLOCK_R) * inv_std, mask=keep)


@_TUNED_JIT
def _backward_kernel(
    grad_ptr, x_ptr, weight_ptr, mean_ptr, var_ptr, partial_ptr, grad_x_ptr, grad_weight_ptr, grad_bias_ptr,
    N, C, HW, G, S, SPLIT, eps, N_BUCKET, C_BUCKET, HW_BUCKET, G_BUCKET,
    HAS_WEIGHT: tl.constexpr, PLANES: tl.constexpr, FLAT: tl.constexpr, ACC: tl.constexpr, BLOCK_C: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    # Two passes are unavoidable: every element's gradient needs its chunk's sum(g) and
    # sum(g * x_hat), which exist only once the whole chunk has been read (the kernel above).
    chunk, ks, c, start, units, values = _program(N, C, HW, G, S, SPLIT, PLANES, BLOCK_C)
    keep = c < C
    if ks == 0:
        # The first program of each channel block also sums the splits of every chunk: the
        # weight's and bias's gradients, in this launch and in a fixed order (no atomics).
        total_g = tl.zeros((BLOCK_C,), dtype=ACC)
        total_gx = tl.zeros((BLOCK_C,), dtype=ACC)
        pairs = tl.cdiv(N, G) * S
        for first in range(0, pairs, _SPLIT_GROUP):
            pair = first + tl.arange(0, _SPLIT_GROUP)
            src = partial_ptr + (pair.to(tl.int64) * 2 * C)[None, :] + c[:, None]
            ok = keep[:, None] & (pair < pairs)[None, :]
            total_g += tl.sum(tl.load(src, mask=ok, other=0.0), axis=1)
            total_gx += tl.sum(tl.load(src + C, mask=ok, other=0.0), axis=1)
        tl.store(grad_weight_ptr + c, total_gx, mask=keep)
        tl.store(grad_bias_ptr + c, total_g, mask=keep)

    sum_g = tl.zeros((BLOCK_C,), dtype=ACC)
    sum_gx = tl.zeros((BLOCK_C,), dtype=ACC)
    for first in range(0, S, _SPLIT_GROUP):
        split = first + tl.arange(0, _SPLIT_GROUP)
        src = partial_ptr + ((chunk * S + split).to(tl.int64) * 2 * C)[None, :] + c[:, None]
        ok = keep[:, None] & (split < S)[None, :]
        sum_g += tl.sum(tl.load(src, mask=ok, other=0.0), axis=1)
        sum_gx += tl.sum(tl.load(src + C, mask=ok, other=0.0), axis=1)
    mean = tl.load(mean_ptr + chunk.to(tl.int64) * C + c, mask=keep, other=0.0).to(ACC)
    inv_std = _inverse_std(tl.load(var_ptr + chunk.to(tl.int64) * C + c, mask=keep, other=1.0).to(ACC), eps)
    scale = inv_std
    if HAS_WEIGHT:
        scale *= tl.load(weight_ptr + c, mask=keep, other=1.0).to(ACC)
    # grad_x = scale * (g - mean(g) - x_hat * mean(g * x_hat)) over the chunk, written as
    # scale * g - slope * (x - mean) - offset with per-channel slope and offset.
    inv_values = 1.0 / values.to(ACC)
    slope = scale * inv_std * sum_gx * inv_values
    offset = scale * sum_g * inv_values
    scale = _per_lane(scale, HW, FLAT, BLOCK_R)
    slope = _per_lane(slope, HW, FLAT, BLOCK_R)
    mean = _per_lane(mean, HW, FLAT, BLOCK_R)
    offset = _per_lane(offset, HW, FLAT, BLOCK_R)
    for it in range(0, _tile_count(units, HW, PLANES, BLOCK_R)):
        offsets, mask = _tile(it, start, units, c, C, HW, PLANES, FLAT, BLOCK_C, BLOCK_R)
        g = tl.load(grad_ptr + offsets, mask=mask, other=0.0).to(ACC)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(ACC)
        grad_x = scale[:, None] * g - slope[:, None] * (x - mean[:, None]) - offset[:, None]
        tl.store(grad_x_ptr + offsets, grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _keep_power(log_keep, exponent):
    # (1 - m) ** exponent from log2(1 - m); exponent 0 gives 1 even for m = 1 (log2(0) = -inf).
    return tl.where(exponent == 0, 1.0, tl.exp2(exponent * log_keep))


@triton.jit
def _running_stats_kernel(
    running_mean_ptr, running_var_ptr, mean_ptr, var_ptr, N, C, HW, G, momentum_high, momentum_low,
    ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # F.batch_norm on chunk k does r <- (1 - m) r + m s_k. Unrolled over the K chunks in
    # order, r_K = (1 - m)^K r_0 + sum_k m (1 - m)^(K - 1 - k) s_k: one weighted sum, so all
    # chunks' statistics load at once instead of in K dependent steps.
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    keep = c < C
    chunks = tl.cdiv(N, G)
    # A float argument arrives as fp32; the pair (high, low) carries the momentum's fp64 value.
    m = tl.full((1,), momentum_high, ACC) + momentum_low
    log_keep = tl.log2(1.0 - m)
    mean_sum = tl.zeros((BLOCK_C,), dtype=ACC)
    var_sum = tl.zeros((BLOCK_C,), dtype=ACC)
    for first in range(0, chunks, BLOCK_K):
        k = first + tl.arange(0, BLOCK_K)
        valid = k < chunks
        values = (tl.minimum(G, N - k * G) * HW).to(ACC)
        weight = tl.where(valid, m * _keep_power(log_keep, (chunks - 1 - k).to(ACC)), 0.0)
        # Bessel's correction per chunk, as F.batch_norm applies to the running variance.
        unbiased = weight * values / tl.maximum(values - 1.0, 1.0)
        src = (k.to(tl.int64) * C)[None, :] + c[:, None]
        ok = keep[:, None] & valid[None, :]
        mean_sum += tl.sum(tl.load(mean_ptr + src, mask=ok, other=0.0).to(ACC) * weight[None, :], axis=1)
        var_sum += tl.sum(tl.load(var_ptr + src, mask=ok, other=0.0).to(ACC) * unbiased[None, :], axis=1)
    decay = _keep_power(log_keep, chunks.to(ACC))
    running_mean = tl.load(running_mean_ptr + c, mask=keep, other=0.0).to(ACC)
    running_var = tl.load(running_var_ptr + c, mask=keep, other=0.0).to(ACC)
    tl.store(running_mean_ptr + c, (running_mean * decay + mean_sum).to(running_mean_ptr.dtype.element_ty), mask=keep)
    tl.store(running_var_ptr + c, (running_var * decay + var_sum).to(running_var_ptr.dtype.element_ty), mask=keep)


_forward_stats = _tuned(_forward_stats_kernel)
_forward_normalize = _tuned(_forward_normalize_kernel)
_backward_sums = _tuned(_backward_sums_kernel)
_backward = _tuned(_backward_kernel)
# Not autotuned: the autotuner reruns a kernel, and this one updates in place.
_RUNNING_BLOCK_C = 64
_RUNNING_BLOCK_K = 32


# ----------------------------------------------------------------------------------------
# Pure-PyTorch reference: the specification the kernels are tested against.
# ----------------------------------------------------------------------------------------


def ghost_batch_norm_reference(
    input: torch.Tensor,
    running_mean: Optional[torch.Tensor],
    running_var: Optional[torch.Tensor],
    weight: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
    *,
    ghost_batch_size: int = 32,
) -> torch.Tensor:
    """``F.batch_norm`` on each chunk of ``input.split(ghost_batch_size)`` with momentum / chunks, concatenated."""
    if weight is None and bias is not None:
        # The same normalisation: CUDA's batch norm backward fails ("tensor does not have a device") for a bias
        # without a weight (torch 2.11 on an H200).
        weight = torch.ones_like(bias)
    if not training and running_mean is not None:
        return F.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    chunks = input.split(ghost_batch_size)
    chunk_momentum = momentum / len(chunks)
    return torch.cat([
        F.batch_norm(chunk, running_mean, running_var, weight, bias, True, chunk_momentum, eps) for chunk in chunks
    ])


# ----------------------------------------------------------------------------------------
# Custom ops: torch.library registration, fake implementations and autograd
#
# The forward op returns the per-chunk statistics with the output; the running statistics
# are updated from them by a second op, whose only effect is that documented mutation.
# Autograd, torch.compile and torch.export see two ordinary ops that way.
# ----------------------------------------------------------------------------------------


class _Plan(NamedTuple):
    N: int
    C: int
    HW: int
    G: int  # ghost batch size, at most N
    chunks: int
    splits: int  # S per chunk, a power of two
    split_units: int  # samples (planes, flat) or rows per split
    layout: str  # "rows", "planes" or "flat": which autotuner, and the kernels' PLANES and FLAT

    def grid(self):
        return lambda meta: (self.chunks * self.splits * backend.cdiv(self.C, meta["BLOCK_C"]),)

    def layout_constexprs(self) -> dict[str, bool]:
        return {"PLANES": self.layout != "rows", "FLAT": self.layout == "flat"}

    def tuning_key(self) -> dict[str, int]:
        """The autotuners' key (_KEY): the sizes in power-of-two buckets."""
        return {"N_BUCKET": backend.size_bucket(self.N), "C_BUCKET": backend.size_bucket(self.C),
                "HW_BUCKET": backend.size_bucket(self.HW), "G_BUCKET": backend.size_bucket(self.G)}


def _plan(x: torch.Tensor, ghost_batch_size: int) -> _Plan:
    N, C = x.shape[0], x.shape[1]
    HW = math.prod(x.shape[2:])
    G = max(1, min(ghost_batch_size, N))
    planes = x.dim() == 4 and HW > 1 and not is_channels_last(x)
    layout = ("flat" if HW <= _FLAT_MAX_PIXELS else "planes") if planes else "rows"
    chunks = backend.cdiv(N, G)
    programs = chunks * backend.cdiv(C, _TYPICAL_BLOCK_C[layout])
    splits = 1
    while (programs * splits < _TARGET_PROGRAMS and splits * 2 <= _MAX_SPLITS
           and G * HW // (splits * 2) >= _MIN_VALUES_PER_SPLIT and (not planes or splits * 2 <= G)):
        splits *= 2
    units = G if planes else G * HW
    return _Plan(N, C, HW, G, chunks, splits, backend.cdiv(units, splits), layout)


def _canonical(x: torch.Tensor) -> torch.Tensor:
    # The kernels address x as dense NCHW or dense NHWC (or (N, C) rows).
    return x if x.is_contiguous() or is_channels_last(x) else x.contiguous()


def _statistics_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


@kernel_op("fastcore_ops::ghost_batch_norm")
def _ghost_batch_norm_op(
    x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor], ghost_batch_size: int, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = _canonical(x)
    plan = _plan(x, ghost_batch_size)
    out = empty_like_layout(x, x.shape)
    stats_dtype = _statistics_dtype(x.dtype)
    # The normalize kernel's first-split programs write every (chunk, channel) of mean and
    # var: no zero-fill launch. An empty input launches nothing, and gets zeros.
    allocate = x.new_empty if x.numel() else x.new_zeros
    mean = allocate((plan.chunks, plan.C), dtype=stats_dtype)
    var = allocate((plan.chunks, plan.C), dtype=stats_dtype)
    if x.numel():
        partials = x.new_empty((plan.chunks * plan.splits, 3, plan.C), dtype=stats_dtype)
        common = dict(**plan.layout_constexprs(), ACC=backend.accumulator(x.dtype), **plan.tuning_key())
        sizes = (plan.N, plan.C, plan.HW, plan.G, plan.splits, plan.split_units)
        _forward_stats[plan.layout][plan.grid()](x, partials, *sizes, **common)
        _forward_normalize[plan.layout][plan.grid()](
            x, out, x if weight is None else weight, x if bias is None else bias, partials, mean, var, *sizes, eps,
            HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None, **common)
    return out, mean, var


@_ghost_batch_norm_op.register_fake
def _(x, weight, bias, ghost_batch_size, eps):
    N, C = x.shape[0], x.shape[1]
    chunks = -(-N // max(1, min(ghost_batch_size, N)))
    stats_dtype = _statistics_dtype(x.dtype)
    return (empty_like_layout(x, x.shape), x.new_empty((chunks, C), dtype=stats_dtype),
            x.new_empty((chunks, C), dtype=stats_dtype))


@kernel_op("fastcore_ops::ghost_batch_norm_backward")
def _ghost_batch_norm_backward_op(
    grad_out: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor], mean: torch.Tensor, var: torch.Tensor,
    ghost_batch_size: int, eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of x, weight and bias; the last two in the statistics' dtype (fp32 or fp64)."""
    x = _canonical(x)
    # The kernels read grad_out with x's offsets (this also materializes expanded gradients).
    layout = torch.channels_last if is_channels_last(x) else torch.contiguous_format
    grad_out = grad_out.contiguous(memory_format=layout)
    plan = _plan(x, ghost_batch_size)
    grad_x = empty_like_layout(x, x.shape)
    # The backward kernel's first split of each channel block writes every channel of
    # grad_weight and grad_bias: no zero-fill launch. An empty input launches nothing.
    allocate = x.new_empty if x.numel() else x.new_zeros
    grad_weight = allocate((plan.C,), dtype=mean.dtype)
    grad_bias = allocate((plan.C,), dtype=mean.dtype)
    if x.numel():
        partials = x.new_empty((plan.chunks * plan.splits, 2, plan.C), dtype=mean.dtype)
        common = dict(**plan.layout_constexprs(), ACC=backend.accumulator(x.dtype), **plan.tuning_key())
        sizes = (plan.N, plan.C, plan.HW, plan.G, plan.splits, plan.split_units)
        _backward_sums[plan.layout][plan.grid()](grad_out, x, mean, var, partials, *sizes, eps, **common)
        _backward[plan.layout][plan.grid()](
            grad_out, x, x if weight is None else weight, mean, var, partials, grad_x, grad_weight, grad_bias,
            *sizes, eps, HAS_WEIGHT=weight is not None, **common)
    return grad_x, grad_weight, grad_bias


@_ghost_batch_norm_backward_op.register_fake
def _(grad_out, x, weight, mean, var, ghost_batch_size, eps):
    C = x.shape[1]
    return empty_like_layout(x, x.shape), mean.new_empty((C,)), mean.new_empty((C,))


def _ghost_batch_norm_setup_context(ctx, inputs, output):
    x, weight, bias, ctx.ghost_batch_size, ctx.eps = inputs
    _, mean, var = output
    ctx.mark_non_differentiable(mean, var)
    # Autograd would otherwise hand backward zero tensors for the outputs that got no
    # gradient (always mean and var): two zero-fill launches on every backward.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, mean, var)
    ctx.bias_dtype = None if bias is None else bias.dtype


def _ghost_batch_norm_backward(ctx, grad_out, _grad_mean, _grad_var):
    # Without materialized gradients, an output that received none arrives as None.
    if grad_out is None:
        return None, None, None, None, None
    x, weight, mean, var = ctx.saved_tensors
    grad_x, grad_weight, grad_bias = _ghost_batch_norm_backward_op(
        grad_out, x, weight, mean, var, ctx.ghost_batch_size, ctx.eps)
    # .to() returns the tensor itself (no copy launch) when the dtype already matches.
    grad_weight = None if weight is None else grad_weight.to(weight.dtype)
    grad_bias = None if ctx.bias_dtype is None else grad_bias.to(ctx.bias_dtype)
    return grad_x, grad_weight, grad_bias, None, None


_ghost_batch_norm_op.register_autograd(_ghost_batch_norm_backward, setup_context=_ghost_batch_norm_setup_context)


def _float32_pair(value: float) -> tuple[float, float]:
    """value as high + low, both exact in fp32 (high is value rounded to fp32)."""
    high = struct.unpack("f", struct.pack("f", value))[0]
    return high, value - high


@kernel_op("fastcore_ops::ghost_batch_norm_update_running_stats", mutates_args=("running_mean", "running_var"))
def _update_running_stats_op(
    running_mean: torch.Tensor, running_var: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
    chunk_momentum: float, batch_size: int, ghost_batch_size: int, values_per_sample: int,
) -> None:
    """Fold per-chunk (mean, biased var) into the running statistics, chunk after chunk, in place."""
    C = running_mean.shape[0]
    if mean.numel():
        accumulator = backend.accumulator(torch.float64 if torch.float64 in (running_mean.dtype, running_var.dtype)
                                          else torch.float32)
        _running_stats_kernel[(backend.cdiv(C, _RUNNING_BLOCK_C),)](
            running_mean, running_var, mean, var, batch_size, C, values_per_sample,
            max(1, min(ghost_batch_size, batch_size)), *_float32_pair(chunk_momentum),
            ACC=accumulator, BLOCK_C=_RUNNING_BLOCK_C, BLOCK_K=_RUNNING_BLOCK_K)


@_update_running_stats_op.register_fake
def _(running_mean, running_var, mean, var, chunk_momentum, batch_size, ghost_batch_size, values_per_sample):
    return None


# ----------------------------------------------------------------------------------------
# Public function
# ----------------------------------------------------------------------------------------


def _fix_for_single_sample_chunks(N: int, ghost_batch_size: int) -> int:
    """The smallest ghost batch size above ``ghost_batch_size`` that leaves no chunk of one sample."""
    size = max(2, ghost_batch_size + 1)
    while size < N and N % size == 1:
        size += 1
    return size


def _check_inputs(x, running_mean, running_var, weight, bias, training, momentum, eps, ghost_batch_size) -> None:
    check_tensor("input", x, ndim=(2, 4))
    check_int("ghost_batch_size", ghost_batch_size, low=1)
    C = x.shape[1]
    given = {}
    for name, tensor in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                         ("running_var", running_var)):
        if tensor is None:
            continue
        check_tensor(name, tensor, ndim=1)
        if tensor.shape[0] != C:
            raise ValueError(
                f"{name} must have shape (C,) = ({C},) to match the channels of input (shape {tuple(x.shape)}), "
                f"got {tuple(tensor.shape)}"
            )
        given[name] = tensor
    check_same_device(input=x, **given)
    if (running_mean is None) != (running_var is None):
        raise ValueError(
            "running_mean and running_var must be given together (or both None for no running statistics), "
            f"got running_mean={'None' if running_mean is None else 'a tensor'} and "
            f"running_var={'None' if running_var is None else 'a tensor'}"
        )
    check_bool("training", training)
    check_number("momentum", momentum, low=0, high=1)
    check_number("eps", eps, low=0)

    N = x.shape[0]
    HW = math.prod(x.shape[2:])
    if N * HW > _MAX_VALUES:
        raise ValueError(f"input holds {N * HW} values per channel; ghost_batch_norm supports at most {_MAX_VALUES}")
    if (training or running_mean is None) and x.numel() and HW == 1:
        last = N - (N - 1) // ghost_batch_size * ghost_batch_size  # size of the last chunk
        if min(ghost_batch_size, last) == 1:
            if N == 1:
                fix = "normalize batches of at least 2 samples, or use eval mode with running statistics"
            else:
                fix = f"use a ghost_batch_size that leaves no chunk of one sample, e.g. " \
                      f"{_fix_for_single_sample_chunks(N, ghost_batch_size)}"
            raise ValueError(
                f"ghost_batch_size {ghost_batch_size} cuts input (N = {N} samples of 1 value per channel, shape "
                f"{tuple(x.shape)}) into a chunk of 1 sample, whose variance is undefined; {fix}"
            )


def ghost_batch_norm(
    input: torch.Tensor,
    running_mean: Optional[torch.Tensor],
    running_var: Optional[torch.Tensor],
    weight: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
    *,
    ghost_batch_size: int = 32,
) -> torch.Tensor:
    """Batch norm with statistics per chunk of ``ghost_batch_size`` samples.

    ``F.batch_norm``'s arguments, order and defaults (so ``training`` defaults to False),
    then the keyword ``ghost_batch_size``.

    Args:
        input: (N, C) or (N, C, H, W), contiguous or channels_last; the output has its layout.
        running_mean, running_var: (C,) running statistics, updated in place in training
            exactly as ``F.batch_norm`` on each chunk in order with momentum / number of
            chunks would (the unbiased variance of each chunk goes into running_var); or
            both None, and then batch statistics are used in eval too.
        weight, bias: (C,) affine parameters, or None (affine=False).
        training: per-chunk statistics if True; running statistics (``F.batch_norm`` in
            eval, a single elementwise pass) if False.
        ghost_batch_size: samples per chunk, as ``input.split(ghost_batch_size)`` cuts them;
            the last chunk may be smaller, and a size >= N gives ordinary batch norm.

    Example:
        >>> x = torch.randn(64, 8, 6, 6).to(memory_format=torch.channels_last)
        >>> running_mean, running_var = torch.zeros(8), torch.ones(8)
        >>> weight, bias = torch.ones(8), torch.zeros(8)
        >>> ghost_batch_norm(x, running_mean, running_var, weight, bias, training=True, ghost_batch_size=16).shape
        torch.Size([64, 8, 6, 6])
    """
    _check_inputs(input, running_mean, running_var, weight, bias, training, momentum, eps, ghost_batch_size)
    momentum, eps = float(momentum), float(eps)
    if training or running_mean is None:
        if rivals.kernel_runs("ghost_batch_norm", input, ghost_batch_size=ghost_batch_size):
            out, mean, var = _ghost_batch_norm_op(input, weight, bias, ghost_batch_size, eps)
            if training and running_mean is not None and input.numel():
                N = input.shape[0]
                chunks = -(-N // ghost_batch_size)
                _update_running_stats_op(running_mean, running_var, mean, var, momentum / chunks, N,
                                         ghost_batch_size, math.prod(input.shape[2:]))
            return out
    return ghost_batch_norm_reference(input, running_mean, running_var, weight, bias, training, momentum, eps,
                                      ghost_batch_size=ghost_batch_size)
