"""BlurPool: anti-aliased downsampling (Zhang, "Making Convolutional Networks Shift-Invariant Again").

``blurpool2d`` low-pass filters every channel with the 3x3 binomial filter
([1, 2, 1] outer [1, 2, 1] / 16, zero "same" padding) and keeps every ``stride``-th
output, in one pass: only the kept outputs are computed, no full-resolution
intermediate is written. ``blur_maxpool2d`` fuses a stride-1 max pool in front of it,
which is how BlurPool replaces a strided max pool.

Layouts: any strides (contiguous and channels_last included); outputs follow the input's
layout. Arithmetic is fp32 for fp16, bf16 and fp32 storage, fp64 for fp64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from ..checks import check_int, check_tensor
from . import backend
from .backend import tl, triton
from .custom_op import kernel_op
from .layout import empty_like_layout

# Row-major window offsets are stored in uint8, which bounds the max-pool window.
_MAX_POOL_KERNEL = 15


# ----------------------------------------------------------------------------------------
# Triton kernels
#
# Every kernel works on a [BLOCK_C, BLOCK_P] tile: BLOCK_C channels of one sample by
# BLOCK_P pixels of a flattened image plane. Strides are runtime arguments, and Triton
# specialises the one equal to 1, so the same kernel coalesces along pixels for NCHW and
# along channels for NHWC. The autotuner keys on the layout (CHANNELS_INNER: the channel
# stride is 1) and on power-of-two buckets of the channels and the tile's pixels, so that a
# new image size in the same bucket reuses the tuning; the three are not specialised on. It
# keys on the constexprs that change a kernel's work too (the stride; the pool's size and
# padding): Triton's autotuner leaves them out of its key, and on the H200 a stride-1 blur ran
# the config tuned for the stride-2 blur with as many channels and outputs (their buckets match).
# ----------------------------------------------------------------------------------------

# (BLOCK_C, BLOCK_P) tiles of 1024 elements, 4 warps each.
_TILE_CONFIGS = [triton.Config({"BLOCK_C": c, "BLOCK_P": p}, num_warps=4)
                 for c, p in ((4, 256), (1, 1024), (8, 128), (32, 32), (64, 16), (128, 8))]
# The blur's backward at NCHW (its first config) gives each output's gradient loads and input stores their own
# 16-bit address: at 8 outputs a thread it took 72 registers on sm_90 (7 CTAs an SM, not 8), at 4 it takes 40.
_BLUR_BACKWARD_CONFIGS = [triton.Config({"BLOCK_C": 2, "BLOCK_P": 256}, num_warps=4), *_TILE_CONFIGS]
_TILE_KEY = ["C_BUCKET", "P_BUCKET", "CHANNELS_INNER"]
_TILED = triton.jit(do_not_specialize=_TILE_KEY)
_BLUR_KEY = [*_TILE_KEY, "STRIDE"]
_POOL_KEY = [*_TILE_KEY, "KERNEL", "STRIDE", "PADDING"]
_INTERPRETER_TILE = triton.Config({"BLOCK_C": 32, "BLOCK_P": 256})


@triton.jit
def _binomial_tap(k: tl.constexpr):
    # Taps of [1, 2, 1] / 4 for k = 0, 1, 2, written as arithmetic on the constexpr index.
    return (2 - (k - 1) * (k - 1)) * 0.25


@triton.jit
def _tile(C, P, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    """Channel and flattened-pixel indices of this program's tile, and its bounds mask."""
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[:, None]
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)[None, :]
    return c, p, (c < C) & (p < P)


@triton.jit
def _channel_offset(c, stride_n, stride_c):
    # int64 so that offsets into batches of more than 2**31 elements stay exact.
    return tl.program_id(2).to(tl.int64) * stride_n + c.to(tl.int64) * stride_c


# The forward walks down bands of BLOCK_H output rows, BLOCK_C channels by BLOCK_W columns at a
# time (first configs: NCHW, along columns, 4 outputs a thread so that a thread's per-row work is shared;
# the others along channels, for NHWC, where each thread holds 8 consecutive channels: 16-byte loads of
# bf16, and per-thread work spread over 8 outputs).
_ROW_CONFIGS = [
    triton.Config({"BLOCK_C": 8, "BLOCK_W": 64, "BLOCK_H": 8}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "BLOCK_W": 16, "BLOCK_H": 8}, num_warps=4),
    triton.Config({"BLOCK_C": 32, "BLOCK_W": 32, "BLOCK_H": 8}, num_warps=4),
    triton.Config({"BLOCK_C": 64, "BLOCK_W": 16, "BLOCK_H": 8}, num_warps=4),
    triton.Config({"BLOCK_C": 128, "BLOCK_W": 8, "BLOCK_H": 8}, num_warps=4),
    triton.Config({"BLOCK_C": 256, "BLOCK_W": 8, "BLOCK_H": 8}, num_warps=8),
]
_INTERPRETER_ROWS = triton.Config({"BLOCK_C": 32, "BLOCK_W": 16, "BLOCK_H": 4})


@triton.jit
def _word_lane(words, COLUMN: tl.constexpr, WORD: tl.constexpr, ELEMENT: tl.constexpr, ACC: tl.constexpr):
    """Column COLUMN, counted from the first of ``words`` (integers of WORD ELEMENT values each), as ACC. COLUMN is
    never negative: the interpreter's // and % would round a negative one towards zero."""
    return _lane(words[COLUMN // WORD], COLUMN % WORD, ELEMENT, ACC)


@triton.jit
def _blurred_row(x_ptr, row, H, columns, columns_ok, stride_h, GROUP: tl.constexpr, STRIDE: tl.constexpr,
                 WORD: tl.constexpr, ACC: tl.constexpr):
    """The horizontal blur of input row ``row`` for each of the GROUP outputs of a tile element, a tuple (0 off the
    image).

    WORD = 1: ``columns`` are the offsets of the element's one output's three tap columns, ``columns_ok`` their
    bounds masks. Otherwise they are the offsets of the aligned words of WORD elements that hold the group's tap
    columns, from the word before the group's first output's tap 1 (``ow * STRIDE``, a word's first) on, and
    whether each word is on the image: a word is all on it or all off it (see _blur_words), and one off it reads
    as zeros, the filter's padding. The columns' masks are made once a band and the row is clamped, then selected
    away off the image: masks made a row and an element were most of the stride-1 NCHW loop on sm_90 (52.4
    instructions an output, 31.0 then)."""
    kept_row = tl.minimum(tl.maximum(row, 0), H - 1)
    on_image = (row >= 0) & (row < H)
    blurred = ()
    if WORD == 1:
        value = tl.zeros(columns_ok[0].shape, dtype=ACC)
        for kw in tl.static_range(3):
            tap = tl.load(x_ptr + kept_row * stride_h + columns[kw], mask=columns_ok[kw], other=0.0)
            value += tap.to(ACC) * _binomial_tap(kw)
        blurred += (tl.where(on_image, value, 0.0),)
    else:
        element = x_ptr.dtype.element_ty
        word_type = tl.int64 if WORD * element.primitive_bitwidth == 64 else tl.int32
        words = ()
        for k in tl.static_range(len(columns)):
            address = (x_ptr + kept_row * stride_h + columns[k]).to(tl.pointer_type(word_type))
            words += (tl.load(address, mask=columns_ok[k], other=0),)
        for i in tl.static_range(GROUP):
            value = tl.zeros(columns_ok[0].shape, dtype=ACC)
            for kw in tl.static_range(3):
                value += _word_lane(words, WORD + i * STRIDE - 1 + kw, WORD, element, ACC) * _binomial_tap(kw)
            blurred += (tl.where(on_image, value, 0.0),)
    return blurred


@backend.autotune(_ROW_CONFIGS, [*_BLUR_KEY, "GROUP", "WORD"], _INTERPRETER_ROWS)
@_TILED
def _blurpool_forward_kernel(
    x_ptr, out_ptr, C, H, W, Ho, Wo,
    stride_n, stride_c, stride_h, stride_w,
    out_stride_n, out_stride_c, out_stride_h, out_stride_w, C_BUCKET, P_BUCKET, CHANNELS_INNER,
    STRIDE: tl.constexpr, GROUP: tl.constexpr, WORD: tl.constexpr, PACKED: tl.constexpr, ACC: tl.constexpr,
    BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr,
):
    # The filter is separable: each input row is blurred horizontally once, and an output row is
    # [1, 2, 1] / 4 of three such rows. Walking down the band, a row blurred for one output row is
    # kept for the next where they share it (two of three at stride 1, one at stride 2): 3 loads
    # per output at stride 1 and 6 at stride 2, against 9 for a 3 x 3 window per output, and no
    # division per pixel.
    #
    # With GROUP > 1 (NCHW rows that hold whole aligned words: see _blur_words), each element of the tile is
    # GROUP neighbouring outputs of a row, which read their columns in words of WORD elements: at stride 1, 4
    # outputs bf16 read 3 words a row (the outer two 32 bits wide, a lane of each used), where 12 loads of 16
    # bits read the taps' columns, each shifted by one; with PACKED, the 4 are stored as one word. The tile is
    # then BLOCK_C channels by BLOCK_W / GROUP groups: as many outputs, on GROUP times fewer threads.
    bands = tl.cdiv(Ho, BLOCK_H)
    sample = tl.program_id(0) // bands
    first_row = (tl.program_id(0) % bands) * BLOCK_H
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[:, None]
    ow = (tl.program_id(2) * (BLOCK_W // GROUP) + tl.arange(0, BLOCK_W // GROUP)[None, :]) * GROUP  # group's first
    group_ok = (c < C) & (ow < Wo)
    x_ptr += sample.to(tl.int64) * stride_n + c.to(tl.int64) * stride_c
    out_ptr += sample.to(tl.int64) * out_stride_n + c.to(tl.int64) * out_stride_c
    columns = ()
    columns_ok = ()
    if WORD == 1:
        for kw in tl.static_range(3):
            column = ow * STRIDE - 1 + kw
            columns += (column * stride_w,)
            columns_ok += (group_ok & (column >= 0) & (column < W),)
    else:
        for k in tl.static_range(-1, ((GROUP - 1) * STRIDE + 1) // WORD + 1):
            column = ow * STRIDE + k * WORD  # the word's first; stride_w is 1
            columns += (column,)
            columns_ok += (group_ok & (column >= 0) & (column < W),)
    outputs = ()
    outputs_ok = ()
    for i in tl.static_range(GROUP):
        outputs += (out_ptr + (ow + i) * out_stride_w,)
        outputs_ok += ((c < C) & (ow + i < Wo),)
    above = _blurred_row(x_ptr, first_row * STRIDE - 1, H, columns, columns_ok, stride_h, GROUP, STRIDE, WORD, ACC)
    middle = ()
    for i in tl.static_range(GROUP):
        middle += (tl.zeros((BLOCK_C, BLOCK_W // GROUP), dtype=ACC),)
    if STRIDE == 1:
        middle = _blurred_row(x_ptr, first_row, H, columns, columns_ok, stride_h, GROUP, STRIDE, WORD, ACC)
    for i in range(BLOCK_H):
        oh = first_row + i
        center = oh * STRIDE
        if STRIDE >= 3:
            above = _blurred_row(x_ptr, center - 1, H, columns, columns_ok, stride_h, GROUP, STRIDE, WORD, ACC)
        if STRIDE >= 2:
            middle = _blurred_row(x_ptr, center, H, columns, columns_ok, stride_h, GROUP, STRIDE, WORD, ACC)
        below = _blurred_row(x_ptr, center + 1, H, columns, columns_ok, stride_h, GROUP, STRIDE, WORD, ACC)
        value = ()
        row_ok = ()
        for g in tl.static_range(GROUP):
            value += (0.25 * above[g] + 0.5 * middle[g] + 0.25 * below[g],)
            row_ok += (outputs_ok[g] & (oh < Ho),)
        _store_outputs(outputs, row_ok, oh * out_stride_h, value, PACKED)
        if STRIDE == 1:
            above = middle
            middle = below
        if STRIDE == 2:
            above = below


@backend.autotune(_BLUR_BACKWARD_CONFIGS, [*_BLUR_KEY, "GROUP"], _INTERPRETER_TILE)
@_TILED
def _blurpool_backward_kernel(
    grad_out_ptr, grad_in_ptr, C, H, W, Ho, Wo,
    stride_n, stride_c, stride_h, stride_w,
    in_stride_n, in_stride_c, in_stride_h, in_stride_w, C_BUCKET, P_BUCKET, CHANNELS_INNER,
    STRIDE: tl.constexpr, GROUP: tl.constexpr, ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
):
    # For STRIDE >= 2. Tap k of output o reads input o * STRIDE - 1 + k, so input o * STRIDE + r
    # hears from output o through tap r + 1 (r = 0, 1) and from output o + 1 through tap 0
    # (r = STRIDE - 1), and from no other. Each program therefore reads its outputs' 2 x 2
    # gradient neighbourhoods once and writes the STRIDE x STRIDE input pixels under each: no
    # atomics, no masked-off taps, no division per input pixel (a gather of 9 parity-masked taps
    # per input pixel is instruction-bound).
    #
    # With GROUP > 1 (stride 2, NCHW rows of whole aligned words: see _blur_backward_group), each element of
    # the tile is GROUP neighbouring outputs of a row, whose gradients come in one word a row (and the lane
    # after them from the next word), and whose 2 x GROUP input pixels a row go out in 64-bit words.
    if GROUP == 1:
        c, p, valid = _tile(C, Ho * Wo, BLOCK_C, BLOCK_P)
        oh = p // Wo
        ow = p % Wo
        here = grad_out_ptr + _channel_offset(c, stride_n, stride_c) + oh * stride_h + ow * stride_w
        down = valid & (oh + 1 < Ho)
        right = valid & (ow + 1 < Wo)
        g00 = tl.load(here, mask=valid, other=0.0).to(ACC)
        g01 = tl.load(here + stride_w, mask=right, other=0.0).to(ACC)
        g10 = tl.load(here + stride_h, mask=down, other=0.0).to(ACC)
        g11 = tl.load(here + stride_h + stride_w, mask=down & right, other=0.0).to(ACC)
        grad_in_ptr += _channel_offset(c, in_stride_n, in_stride_c)
        for rh in tl.static_range(STRIDE):
            ih = oh * STRIDE + rh
            row_ok = valid & (ih < H)
            # This input row's weights on output rows oh and oh + 1 (0 where it hears nothing).
            top = (2 - rh * rh) * 0.25 if rh <= 1 else 0.0  # tap rh + 1
            bottom = 0.25 if rh == STRIDE - 1 else 0.0  # tap 0
            for rw in tl.static_range(STRIDE):
                iw = ow * STRIDE + rw
                left = (2 - rw * rw) * 0.25 if rw <= 1 else 0.0
                right_of = 0.25 if rw == STRIDE - 1 else 0.0
                # Only the taps that exist are added: 0 * inf would put a NaN where the gradient is 0.
                value = tl.zeros((BLOCK_C, BLOCK_P), dtype=ACC)
                if top * left != 0.0:
                    value += (top * left) * g00
                if top * right_of != 0.0:
                    value += (top * right_of) * g01
                if bottom * left != 0.0:
                    value += (bottom * left) * g10
                if bottom * right_of != 0.0:
                    value += (bottom * right_of) * g11
                tl.store(grad_in_ptr + ih * in_stride_h + iw * in_stride_w, value.to(grad_in_ptr.dtype.element_ty),
                         mask=row_ok & (iw < W))
    else:
        _grouped_blur_backward(grad_out_ptr, grad_in_ptr, C, H, Ho, Wo, stride_n, stride_c, stride_h,
                               in_stride_n, in_stride_c, in_stride_h, GROUP, ACC, BLOCK_C, BLOCK_P)


@triton.jit
def _gradient_lanes(address, own_ok, after_ok, GROUP: tl.constexpr, WORD_TYPE: tl.constexpr, ELEMENT: tl.constexpr,
                    ACC: tl.constexpr):
    """The GROUP gradients of the word at ``address`` and the one after it (0 where masked off), as ACC."""
    own = tl.load(address.to(tl.pointer_type(WORD_TYPE)), mask=own_ok, other=0)
    after = tl.load((address + GROUP).to(tl.pointer_type(WORD_TYPE)), mask=after_ok, other=0)
    lanes = ()
    for i in tl.static_range(GROUP):
        lanes += (_lane(own, i, ELEMENT, ACC),)
    return lanes + (_lane(after, 0, ELEMENT, ACC),)


@triton.jit
def _grouped_blur_backward(grad_out_ptr, grad_in_ptr, C, H, Ho, Wo, stride_n, stride_c, stride_h,
                           in_stride_n, in_stride_c, in_stride_h, GROUP: tl.constexpr, ACC: tl.constexpr,
                           BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    """_blurpool_backward_kernel at stride 2 for tile elements of GROUP outputs (see there). Input pixel 2o hears
    only from output o, through tap 1 (1/2); 2o + 1 from o and o + 1 through taps 2 and 0 (1/4 each); the same
    down the rows. So a row's vertical sums are taken once an output, and each input row is its horizontal pass
    over them: no product with a weight of 0, so an infinite gradient reaches only the pixels it should."""
    c, p, valid = _tile(C, Ho * Wo // GROUP, BLOCK_C, BLOCK_P // GROUP)
    groups = Wo // GROUP
    oh = p // groups
    ow = (p % groups) * GROUP
    element = grad_out_ptr.dtype.element_ty
    word_type = tl.int64 if GROUP * element.primitive_bitwidth == 64 else tl.int32
    here = grad_out_ptr + _channel_offset(c, stride_n, stride_c) + oh * stride_h + ow
    down = valid & (oh + 1 < Ho)
    right = valid & (ow + GROUP < Wo)
    # The group's gradients and the one after them, in this output row and the one below.
    above = _gradient_lanes(here, valid, right, GROUP, word_type, element, ACC)
    below = _gradient_lanes(here + stride_h, down, down & right, GROUP, word_type, element, ACC)
    grad_in_ptr += _channel_offset(c, in_stride_n, in_stride_c) + 2 * ow
    WORD_OUT: tl.constexpr = 64 // element.primitive_bitwidth  # input pixels a 64-bit store takes
    for rh in tl.static_range(2):
        vertical = ()
        for i in tl.static_range(GROUP + 1):
            if rh == 0:
                vertical += (0.5 * above[i],)
            else:
                vertical += (0.25 * above[i] + 0.25 * below[i],)
        pixels = ()
        for i in tl.static_range(GROUP):
            pixels += (0.5 * vertical[i], 0.25 * vertical[i] + 0.25 * vertical[i + 1])
        row_ok = valid & (oh * 2 + rh < H)
        row = grad_in_ptr + (oh * 2 + rh) * in_stride_h
        for k in tl.static_range(2 * GROUP // WORD_OUT):
            word = ()
            for i in tl.static_range(WORD_OUT):
                word += (pixels[k * WORD_OUT + i],)
            _store_outputs((row + k * WORD_OUT,), (row_ok,), 0, word, True)


@triton.jit
def _take_max(best, best_at, value, value_at):
    """Merge the max of a later run of a window's positions (``value``, at ``value_at``) into the max of an
    earlier run (``best``, at ``best_at``): the later one wins when strictly greater or NaN, so that merged in
    row-major order ties keep the first maximum and the last NaN wins, as in PyTorch's max_pool2d."""
    # Greater and NaN exclude each other, so xor is their or; an or is compiled as two selects.
    better = (value > best) ^ (value != value)
    # The max itself needs no select: the NaN-propagating max is the winner's value in every case.
    return tl.maximum(best, value, propagate_nan=tl.PropagateNan.ALL), tl.where(better, value_at, best_at)


@triton.jit
def _take_maxes(earlier, later):
    """_take_max for each window of two rows' maxes, (max0, at0, max1, at1, ...) as _row_maxes gives them."""
    merged = ()
    for j in tl.static_range(len(earlier) // 2):
        merged += _take_max(earlier[2 * j], earlier[2 * j + 1], later[2 * j], later[2 * j + 1])
    return merged


@triton.jit
def _window_maxes(v, p, KERNEL: tl.constexpr):
    """The max of each KERNEL-wide window of a strip of values ``v`` at positions ``p``, with its position:
    (max0, at0, max1, at1, ...) for the windows starting at strip columns 0, 1, ..., len(v) - KERNEL.

    The strip is cut into blocks of KERNEL columns; a window is the max of the columns from its first to the end
    of that one's block (a suffix, shared by the windows starting in the block), then of the next block's
    columns up to its last, in row-major order: 5 windows of 3 over 7 columns take 8 merges, not 10. Above
    KERNEL = 3 those columns' running maxes (prefixes) are shared too (van Herk, Gil and Werman), which saves
    merges; at 3 it saves none and took 11 more registers on sm_90 at NHWC (139 against 128), so there each
    window merges them one by one."""
    suffix = ()  # built from the right: suffix[0:2] is the max of the columns from t to the end of t's block
    for t in tl.static_range(len(v) - 1, -1, -1):
        if (t + 1) % KERNEL == 0 or t == len(v) - 1:
            suffix = (v[t], p[t]) + suffix
        else:
            suffix = _take_max(v[t], p[t], suffix[0], suffix[1]) + suffix
    prefix = ()  # prefix[2t:2t + 2]: the max of the columns from the start of t's block to t
    for t in tl.static_range(len(v)):
        if t % KERNEL == 0:
            prefix += (v[t], p[t])
        else:
            prefix += _take_max(prefix[2 * t - 2], prefix[2 * t - 1], v[t], p[t])
    windows = ()
    for j in tl.static_range(len(v) - KERNEL + 1):
        window = (suffix[2 * j], suffix[2 * j + 1])
        if j % KERNEL != 0 and KERNEL > 3:
            window = _take_max(window[0], window[1], prefix[2 * (j + KERNEL - 1)], prefix[2 * (j + KERNEL - 1) + 1])
        elif j % KERNEL != 0:
            for t in tl.static_range((j // KERNEL + 1) * KERNEL, j + KERNEL):
                window = _take_max(window[0], window[1], v[t], p[t])
        windows += window
    return windows


@triton.jit
def _lane(word, LANE: tl.constexpr, ELEMENT: tl.constexpr, ACC: tl.constexpr):
    """Element LANE of an integer ``word`` of ELEMENT values (lane 0 in the low bits, as little-endian memory
    holds them), as ACC."""
    bits = word >> (LANE * ELEMENT.primitive_bitwidth)
    if ELEMENT.primitive_bitwidth == 16:
        bits = bits.to(tl.int16)
    else:
        bits = bits.to(tl.int32)
    return bits.to(ELEMENT, bitcast=True).to(ACC)


@triton.jit
def _word_column(words, masks, T: tl.constexpr, PADDING: tl.constexpr, WORD: tl.constexpr, ELEMENT: tl.constexpr,
                 ACC: tl.constexpr):
    """Strip column T (see _row_maxes) from the ``words`` that hold the strip, as ACC: -inf where its word is off
    the image, as every word but the group's own (the one holding strip column PADDING + 1) can be."""
    value = _lane(words[(T - 1 - PADDING) // WORD - (-1 - PADDING) // WORD], (T - 1 - PADDING) % WORD, ELEMENT, ACC)
    if (T - 1 - PADDING) // WORD != 0:
        value = tl.where(masks[(T - 1 - PADDING) // WORD - (-1 - PADDING) // WORD], value, float("-inf"))
    return value


@triton.jit
def _row_maxes(row, image, KERNEL: tl.constexpr, PADDING: tl.constexpr, WORD: tl.constexpr, ACC: tl.constexpr):
    """The maxes of input row ``row`` over the KERNEL-wide windows of the pooled columns the group's outputs read,
    each with its position: (max0, at0, max1, at1, ...), by _window_maxes.

    ``image`` = (H, stride_h, pointers, masks, at). The strip is the columns under those windows, ``at`` the
    strip column each one's position is. With WORD = 1 ``pointers`` are the strip's columns, clamped to the
    image: padding is a copy of the nearest pixel of the same window, with that pixel's position. Otherwise
    they are the aligned words of WORD elements that hold the strip, the group's own word (holding the column
    under its first output's tap 1, PADDING + 1 into the strip) at index -((-1 - PADDING) // WORD), and a
    column off the image is -inf at its nearest pixel's position: to its left it comes first in its window, so
    it wins only a tie with -inf, which the pixel would win; to its right it never wins. (The group's own word
    is on the image whenever its outputs are.) Rows are clamped, with the positions of the rows they copy. So
    padding never changes a window's max nor, in row-major order, the position of its first max or last NaN.
    A position is the clamped row * KERNEL + the strip column."""
    H, stride_h, pointers, masks, at = image
    row = tl.minimum(tl.maximum(row, 0), H - 1)
    v = ()
    p = ()
    if WORD == 1:
        for t in tl.static_range(len(at)):
            v += (tl.load(pointers[t] + row * stride_h, mask=masks[t]).to(ACC),)
    else:
        element = pointers[0].dtype.element_ty
        words = ()
        for k in tl.static_range(len(pointers)):
            address = pointers[k] + row * stride_h
            if WORD * element.primitive_bitwidth == 64:
                words += (tl.load(address.to(tl.pointer_type(tl.int64)), mask=masks[k]),)
            else:
                words += (tl.load(address.to(tl.pointer_type(tl.int32)), mask=masks[k]),)
        for t in tl.static_range(len(at)):
            v += (_word_column(words, masks, t, PADDING, WORD, element, ACC),)
    for t in tl.static_range(len(at)):
        p += (at[t] + row * KERNEL,)
    return _window_maxes(v, p, KERNEL)


@triton.jit
def _column_maxes(rows, first: tl.constexpr, count: tl.constexpr):
    """The vertical max of ``rows[first:first + count]`` (_row_maxes, in row order), for each window."""
    pooled = rows[first]
    for i in tl.static_range(first + 1, first + count):
        pooled = _take_maxes(pooled, rows[i])
    return pooled


@triton.jit
def _rows_max(first, count: tl.constexpr, image, KERNEL: tl.constexpr, PADDING: tl.constexpr, WORD: tl.constexpr,
              ACC: tl.constexpr):
    """_column_maxes of the _row_maxes of input rows first .. first + count - 1, taken one row at a time."""
    pooled = _row_maxes(first, image, KERNEL, PADDING, WORD, ACC)
    for i in tl.static_range(1, count):
        pooled = _take_maxes(pooled, _row_maxes(first + i, image, KERNEL, PADDING, WORD, ACC))
    return pooled


@triton.jit
def _blur_pooled(pooled, ph, pooled_image, store, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                 PADDING: tl.constexpr, GROUP: tl.constexpr, ARG_WORD: tl.constexpr, TAP1: tl.constexpr):
    """Pooled row ``ph`` at the group's windows, ``pooled`` = (max0, at0, max1, at1, ...): stores the argmax
    where this program owns it, and returns the row's horizontal blur, [1, 2, 1] / 4, 0 off the pooled image,
    for each of the group's GROUP outputs (output i's taps read windows i * STRIDE .. i * STRIDE + 2).
    ``pooled_image`` = (Hp, pooled_ok, arg_pointers, arg_stride_h). With ARG_WORD > 1 the owned offsets, of
    windows 1 .. ARG_WORD, are stored as one aligned word. TAP1: ``ph`` is the row under an output row's blur
    tap 1, o * STRIDE, which is on the pooled image for every output row."""
    Hp, pooled_ok, arg_pointers, arg_stride_h = pooled_image
    row_ok = True if TAP1 else (ph >= 0) & (ph < Hp)
    # Positions are row * KERNEL + strip column, and window j starts at strip column j: this makes them
    # row-major offsets i * KERNEL + j in the window.
    origin = (ph - PADDING) * KERNEL
    if ARG_WORD > 1:
        # Lane l holds window 1 + l's offset: the sum of its position << 8 l, less each lane's origin, is the
        # word of offsets (each below 256, so no lane carries into the next).
        word = pooled[3].to(tl.uint32)
        for lane in tl.static_range(1, ARG_WORD):
            word += pooled[2 * lane + 3].to(tl.uint32) << (8 * lane)
        lanes: tl.constexpr = 0x01010101 if ARG_WORD == 4 else 0x0101
        steps: tl.constexpr = 0x03020100 if ARG_WORD == 4 else 0x0100
        word -= (origin + 1).to(tl.uint32) * lanes + steps
        address = arg_pointers[1] + ph * arg_stride_h
        mask = pooled_ok[1] & row_ok & store
        if ARG_WORD == 4:
            tl.store(address.to(tl.pointer_type(tl.uint32)), word, mask=mask)
        else:
            tl.store(address.to(tl.pointer_type(tl.uint16)), word.to(tl.uint16), mask=mask)
    else:
        for i in tl.static_range(GROUP):
            for kw in tl.static_range(3):
                # Each pooled position is stored by exactly one output: blur tap k reads column o * STRIDE + (k - 1),
                # tap 1 always owns it, tap 2 unless stride 1 gives it to the next output's tap 1, tap 0 only
                # from stride 3 on: STRIDE >= (k + 2) % 3 + 1. The caller says the same for rows with ``store``.
                if STRIDE >= (kw + 2) % 3 + 1:
                    tl.store(arg_pointers[i * STRIDE + kw] + ph * arg_stride_h,
                             (pooled[2 * (i * STRIDE + kw) + 1] - (origin + i * STRIDE + kw)).to(tl.uint8),
                             mask=pooled_ok[i * STRIDE + kw] & row_ok & store)
    # 0 * inf would be NaN: positions off the pooled image are selected away, not multiplied by 0. Windows 1 ..
    # ARG_WORD are on it wherever the group is: tap 1's column, o * STRIDE, for every output, and the others in
    # the argmax word, which Wp, a multiple of its size, does not cut.
    taps = ()
    for j in tl.static_range(len(pooled) // 2):
        taps += (pooled[2 * j] if j >= 1 and j <= ARG_WORD else tl.where(pooled_ok[j], pooled[2 * j], 0.0),)
    blurred = ()
    for i in tl.static_range(GROUP):
        # Weighted before summed, so no sum overflows.
        sides = tl.fma(taps[i * STRIDE], 0.25, taps[i * STRIDE + 2] * 0.25)
        blurred += (tl.where(row_ok, tl.fma(taps[i * STRIDE + 1], 0.5, sides), 0.0),)
    return blurred


@triton.jit
def _one_pooled_row(window, ph, image, pooled_image, store, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                    PADDING: tl.constexpr, ACC: tl.constexpr, KEEP: tl.constexpr, GROUP: tl.constexpr,
                    WORD: tl.constexpr, ARG_WORD: tl.constexpr, TAP1: tl.constexpr):
    """Pooled row ``ph``'s _blur_pooled, and the ``window`` for pooled row ph + 1.

    With KEEP, ``window`` holds the row maxes of input rows ph - PADDING .. ph - PADDING + KERNEL - 2 and only
    the next input row is loaded; without (large kernels, whose kept rows would not fit in registers), it is
    empty and the pooled row takes all its input rows."""
    if KEEP:
        rows = window + (_row_maxes(ph - PADDING + KERNEL - 1, image, KERNEL, PADDING, WORD, ACC),)
        pooled = _column_maxes(rows, 0, KERNEL)
        window = rows[1:]
    else:
        pooled = _rows_max(ph - PADDING, KERNEL, image, KERNEL, PADDING, WORD, ACC)
    return _blur_pooled(pooled, ph, pooled_image, store, KERNEL, STRIDE, PADDING, GROUP, ARG_WORD, TAP1), window


@triton.jit
def _two_pooled_rows(window, ph, image, pooled_image, store0, store1, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                     PADDING: tl.constexpr, ACC: tl.constexpr, KEEP: tl.constexpr, GROUP: tl.constexpr,
                     WORD: tl.constexpr, ARG_WORD: tl.constexpr, TAP1: tl.constexpr):
    """_one_pooled_row for pooled rows ph and ph + 1 together: their windows share KERNEL - 1 input rows, whose
    vertical max is taken once (KERNEL merges a window for the two rows, not 2 (KERNEL - 1)). TAP1: which of the
    two is under tap 1 of an output row (0 or 1)."""
    if KERNEL == 1:
        first = _row_maxes(ph - PADDING, image, KERNEL, PADDING, WORD, ACC)
        second = _row_maxes(ph + 1 - PADDING, image, KERNEL, PADDING, WORD, ACC)
    elif KEEP:
        rows = window
        for i in tl.static_range(KERNEL - 1, KERNEL + 1):
            rows += (_row_maxes(ph - PADDING + i, image, KERNEL, PADDING, WORD, ACC),)
        shared = _column_maxes(rows, 1, KERNEL - 1)
        first = _take_maxes(rows[0], shared)
        second = _take_maxes(shared, rows[KERNEL])
        window = rows[2:]
    else:
        shared = _rows_max(ph + 1 - PADDING, KERNEL - 1, image, KERNEL, PADDING, WORD, ACC)
        first = _take_maxes(_row_maxes(ph - PADDING, image, KERNEL, PADDING, WORD, ACC), shared)
        second = _take_maxes(shared, _row_maxes(ph - PADDING + KERNEL, image, KERNEL, PADDING, WORD, ACC))
    blurred0 = _blur_pooled(first, ph, pooled_image, store0, KERNEL, STRIDE, PADDING, GROUP, ARG_WORD, TAP1 == 0)
    blurred1 = _blur_pooled(second, ph + 1, pooled_image, store1, KERNEL, STRIDE, PADDING, GROUP, ARG_WORD,
                            TAP1 == 1)
    return blurred0, blurred1, window


@triton.jit
def _store_outputs(outputs, outputs_ok, offset, value, PACKED: tl.constexpr):
    """Store the group's output ``value``s at ``outputs`` + ``offset``. PACKED: side by side in one word, where the
    group fits in 64 bits; the caller's promise that its outputs are all in the image or none and the word
    aligned (see _forward_group, _blur_words). Each on its own otherwise."""
    element = outputs[0].dtype.element_ty
    BITS: tl.constexpr = element.primitive_bitwidth
    if PACKED and len(value) * BITS <= 64 and BITS >= 16:
        word_type = tl.uint64 if len(value) * BITS == 64 else tl.uint32
        lane_type = tl.uint16 if BITS == 16 else tl.uint32
        word = value[0].to(element).to(lane_type, bitcast=True).to(word_type)
        for i in tl.static_range(1, len(value)):
            word = word | (value[i].to(element).to(lane_type, bitcast=True).to(word_type) << (i * BITS))
        tl.store((outputs[0] + offset).to(tl.pointer_type(word_type)), word, mask=outputs_ok[0])
    else:
        for i in tl.static_range(len(value)):
            tl.store(outputs[i] + offset, value[i].to(element), mask=outputs_ok[i])


@triton.jit
def _blurs(above, middle, below):
    """The vertical blur, [1, 2, 1] / 4, of three pooled rows' horizontal blurs, for each output of the group."""
    value = ()
    for i in tl.static_range(len(middle)):
        value += (tl.fma(middle[i], 0.5, tl.fma(above[i], 0.25, below[i] * 0.25)),)
    return value


# The fused forward walks down bands of BLOCK_H output rows, BLOCK_C channels by BLOCK_W columns at a time, with
# one autotuner a layout (indexed by CHANNELS_INNER), each offering only its own tiles: NCHW's along columns;
# NHWC's along channels, 8 channels a thread, 16 bytes of bf16, and the last 4, for half the registers. An NHWC
# tile on NCHW holds 8 outputs a thread with their kept row maxes, and spilled 456 to 512 bytes on sm_90.
_POOL_ROW_CONFIGS = {
    False: [
        triton.Config({"BLOCK_C": 2, "BLOCK_W": 64, "BLOCK_H": 8}, num_warps=4),
        triton.Config({"BLOCK_C": 8, "BLOCK_W": 16, "BLOCK_H": 8}, num_warps=4),
    ],
    True: [
        triton.Config({"BLOCK_C": 32, "BLOCK_W": 32, "BLOCK_H": 8}, num_warps=4),
        triton.Config({"BLOCK_C": 64, "BLOCK_W": 16, "BLOCK_H": 8}, num_warps=4),
        triton.Config({"BLOCK_C": 128, "BLOCK_W": 8, "BLOCK_H": 8}, num_warps=4),
        triton.Config({"BLOCK_C": 64, "BLOCK_W": 8, "BLOCK_H": 8}, num_warps=4),
    ],
}
# Input rows' maxes are kept for the pooled rows below them up to this kernel size; above, a pooled row takes
# all its input rows (KERNEL - 1 kept rows of 6 values a pixel would not fit in registers).
_KEPT_ROWS_MAX_KERNEL = tl.constexpr(5)


@_TILED
def _blur_maxpool_forward_kernel(
    x_ptr, out_ptr, argmax_ptr, C, H, W, Hp, Wp, Ho, Wo,
    stride_n, stride_c, stride_h, stride_w,
    out_stride_n, out_stride_c, out_stride_h, out_stride_w,
    arg_stride_n, arg_stride_c, arg_stride_h, arg_stride_w, C_BUCKET, P_BUCKET, CHANNELS_INNER,
    KERNEL: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr, GROUP: tl.constexpr,
    ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr,
):
    # Each output blurs 3 x 3 pooled positions, each the max of a KERNEL x KERNEL window; the pooled image is
    # never stored, only the argmax offsets, one byte each, for backward. The max is separable: each input row's
    # maxes over the windows of the pooled columns an output's blur reads (_row_maxes) are taken once and kept,
    # in ``window``, for the KERNEL pooled rows that read them; each pooled row's vertical max is taken once, and
    # kept, as its horizontal blur, for the next output row where they share it (two of three at stride 1, one
    # at stride 2), like _blurpool_forward_kernel; two pooled rows taken together share the vertical max of
    # their common input rows. At stride 2 an output row takes 2 input rows and 2 pooled rows, against
    # 3 x KERNEL input rows loaded and compared for 3 windows per output.
    #
    # With GROUP = 2 (see _forward_group), each element of the tile is 2 neighbouring outputs, which share a
    # pooled column: 5 windows over 7 input columns a row at stride 2, not 2 x 3 over 2 x 5, each pooled pixel's
    # max and argmax taken once; the rows are read in aligned words of up to 8 bytes (WORD elements), and the
    # argmax bytes the group owns in a pooled row written as one word. The tile is then BLOCK_C x GROUP channels
    # by BLOCK_W / GROUP groups: as many elements, on as many threads.
    KEEP: tl.constexpr = KERNEL <= _KEPT_ROWS_MAX_KERNEL
    BITS: tl.constexpr = x_ptr.dtype.element_ty.primitive_bitwidth
    WORD: tl.constexpr = 1 if GROUP == 1 else (4 if GROUP * STRIDE % 4 == 0 and BITS <= 16 else (
        2 if GROUP * STRIDE % 2 == 0 and BITS <= 32 else 1))
    ARG_WORD: tl.constexpr = GROUP * STRIDE if WORD > 1 and STRIDE <= 2 else 1
    WINDOWS: tl.constexpr = (GROUP - 1) * STRIDE + 3
    bands = tl.cdiv(Ho, BLOCK_H)
    sample = tl.program_id(0) // bands
    first_row = (tl.program_id(0) % bands) * BLOCK_H
    last_row = tl.minimum(first_row + BLOCK_H, Ho)
    c = tl.program_id(1) * (BLOCK_C * GROUP) + tl.arange(0, BLOCK_C * GROUP)[:, None]
    # The group's first output column.
    ow = (tl.program_id(2) * (BLOCK_W // GROUP) + tl.arange(0, BLOCK_W // GROUP)[None, :]) * GROUP
    channels_ok = c < C
    x_ptr += sample.to(tl.int64) * stride_n + c.to(tl.int64) * stride_c
    argmax_ptr += sample.to(tl.int64) * arg_stride_n + c.to(tl.int64) * arg_stride_c
    out_ptr += sample.to(tl.int64) * out_stride_n + c.to(tl.int64) * out_stride_c
    first_iw = ow * STRIDE - 1 - PADDING  # the strip's first input column
    at = ()
    for t in tl.static_range(WINDOWS + KERNEL - 1):
        at += (tl.minimum(tl.maximum(first_iw + t, 0), W - 1) - first_iw,)
    pointers = ()
    masks = ()
    if WORD == 1:
        for t in tl.static_range(WINDOWS + KERNEL - 1):
            pointers += (x_ptr + (first_iw + at[t]) * stride_w,)  # clamped: see _row_maxes
            masks += (channels_ok,)
    else:
        # The words from the strip's first column's to its last's, counted from the group's own (see _row_maxes).
        for k in tl.static_range((-1 - PADDING) // WORD, (WINDOWS + KERNEL - 3 - PADDING) // WORD + 1):
            column = ow * STRIDE + k * WORD  # the word's first
            pointers += (x_ptr + column,)
            masks += (channels_ok & (column >= 0) & (column < W),)  # W too: the word is on the image or off it
    image = (H, stride_h, pointers, masks, at)
    pooled_ok = ()
    arg_pointers = ()
    for j in tl.static_range(WINDOWS):
        pw = ow * STRIDE - 1 + j
        pooled_ok += (channels_ok & (ow < Wo) & (pw >= 0) & (pw < Wp),)
        arg_pointers += (argmax_ptr + pw * arg_stride_w,)
    pooled_image = (Hp, pooled_ok, arg_pointers, arg_stride_h)
    outputs = ()
    outputs_ok = ()
    for i in tl.static_range(GROUP):
        outputs += (out_ptr + (ow + i) * out_stride_w,)
        outputs_ok += (channels_ok & (ow + i < Wo),)

    # ``window``: the row maxes of the KERNEL - 1 input rows before the next pooled row's last.
    ph = first_row * STRIDE - 1
    window = ()
    if KEEP:
        for i in tl.static_range(KERNEL - 1):
            window += (_row_maxes(ph - PADDING + i, image, KERNEL, PADDING, WORD, ACC),)
    # The pooled rows the band's first output row shares with the one above it, whose argmax that row stores
    # (its tap 2 at stride 2); at stride 1 this row's tap 1 owns the second.
    above = ()
    middle = ()
    for i in tl.static_range(GROUP):
        above += (tl.zeros((BLOCK_C * GROUP, BLOCK_W // GROUP), dtype=ACC),)
        middle += (tl.zeros((BLOCK_C * GROUP, BLOCK_W // GROUP), dtype=ACC),)
    if STRIDE == 1:
        above, middle, window = _two_pooled_rows(window, ph, image, pooled_image, False, True, KERNEL, STRIDE,
                                                 PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, 1)
    if STRIDE == 2:
        above, window = _one_pooled_row(window, ph, image, pooled_image, False, KERNEL, STRIDE, PADDING, ACC, KEEP,
                                        GROUP, WORD, ARG_WORD, False)
    # Unrolled twice: the kept rows then move between registers every other output row, not every one.
    for oh in tl.range(first_row, last_row, loop_unroll_factor=2 if KEEP else 1):
        ph = oh * STRIDE - 1  # pooled rows ph, ph + 1, ph + 2 under blur taps 0, 1, 2
        if STRIDE == 1:
            # Tap 2's row is owned by the next output row's tap 1: this program's unless that row is past the
            # band (the next band's, which stores it before its loop).
            below, window = _one_pooled_row(window, ph + 2, image, pooled_image, oh + 1 < last_row, KERNEL, STRIDE,
                                            PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, False)
        elif STRIDE == 2:
            middle, below, window = _two_pooled_rows(window, ph + 1, image, pooled_image, True, True, KERNEL,
                                                     STRIDE, PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, 0)
        else:
            # Not told that ph + 1 is under tap 1: at stride 3 NHWC that left 8 bytes spilled on sm_90 (176
            # registers without, 168 with).
            above, middle, window = _two_pooled_rows(window, ph, image, pooled_image, True, True, KERNEL, STRIDE,
                                                     PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, -1)
            below, window = _one_pooled_row(window, ph + 2, image, pooled_image, True, KERNEL, STRIDE, PADDING, ACC,
                                            KEEP, GROUP, WORD, ARG_WORD, False)
        _store_outputs(outputs, outputs_ok, oh * out_stride_h, _blurs(above, middle, below), GROUP > 1)
        if STRIDE == 1:
            above = middle
            middle = below
        if STRIDE == 2:
            above = below
        # From stride 4 on, pooled rows ph + 3 .. ph + STRIDE - 2 are read by no output: the kept rows step over
        # them, loading only the rows they keep.
        if KEEP:
            for g in tl.static_range(STRIDE - 3):
                if g >= STRIDE - 3 - (KERNEL - 1):
                    window = (window + (_row_maxes(ph + 3 + g - PADDING + KERNEL - 1, image, KERNEL, PADDING, WORD,
                                                   ACC),))[1:]


_blur_maxpool_forward = {channels_inner: backend.autotune(configs, [*_POOL_KEY, "GROUP"], _INTERPRETER_ROWS)(
    _blur_maxpool_forward_kernel) for channels_inner, configs in _POOL_ROW_CONFIGS.items()}


# The max pool's backward walks down bands of BLOCK_H input rows, BLOCK_C channels by BLOCK_W columns at a time
# (first config: NCHW, along columns, 4 a thread; last: NHWC, 4 channels a thread: at 8, 16 bytes of bf16, it
# took 80 registers on sm_90, 6 CTAs an SM, against 48). Each band first routes the KERNEL - 1 pooled rows above
# its first row that reach into it, so bands are 16 rows, not 8.
_ROUTE_CONFIGS = [triton.Config({"BLOCK_C": c, "BLOCK_W": w, "BLOCK_H": 16}, num_warps=4)
                  for c, w in ((8, 64), (2, 256), (32, 32), (128, 8), (64, 16), (32, 16))]


@triton.jit
def _window_row(offset, column: tl.constexpr, KERNEL: tl.constexpr):
    """The window row of the argmax ``offset`` (row * KERNEL + column, row-major) where its column is ``column``,
    as uint32; a number >= KERNEL where it is not (255, a position off the pooled image, included).

    That is (offset - column) / KERNEL where the division is exact. Multiplying by the inverse of an odd number
    modulo 2**32 divides its multiples exactly and sends every other number above 2**32 / KERNEL; an even KERNEL,
    odd * 2**s, divides by its odd part and rotates right by s (Granlund and Montgomery, 1994). So a window
    column costs one multiply-add and one compare, not a division, a remainder and two compares."""
    LOW_BIT: tl.constexpr = KERNEL & -KERNEL
    ODD: tl.constexpr = KERNEL // LOW_BIT
    SHIFT: tl.constexpr = (LOW_BIT >> 1) - (LOW_BIT >> 3)  # log2 of 1, 2, 4, 8: KERNEL is at most 15
    # Newton's step doubles the correct low bits of an inverse: an odd number is its own inverse modulo 8.
    INVERSE_6: tl.constexpr = ODD * (2 - ODD * ODD) % 2**32
    INVERSE_12: tl.constexpr = INVERSE_6 * (2 - ODD * INVERSE_6) % 2**32
    INVERSE_24: tl.constexpr = INVERSE_12 * (2 - ODD * INVERSE_12) % 2**32
    INVERSE: tl.constexpr = INVERSE_24 * (2 - ODD * INVERSE_24) % 2**32
    row = offset.to(tl.uint32) * INVERSE + (0 - column * INVERSE) % 2**32
    if SHIFT > 0:
        row = (row >> SHIFT) | (row << (32 - SHIFT))
    return row


@triton.jit
def _routed(offset, grad, column: tl.constexpr, KERNEL: tl.constexpr, STRIDE: tl.constexpr):
    """The gradient ``grad`` of a pooled position whose argmax is ``offset`` where that lies in window column
    ``column`` (0 elsewhere), and its window row there (_window_row)."""
    row = _window_row(offset, column, KERNEL)
    if STRIDE >= 3:
        # From stride 3 on the forward stores no offset where no output reads the pooled position (its gradient
        # is 0 there): such a byte holds whatever memory did, so it must not give the row.
        row = tl.where(grad != 0.0, row, KERNEL)
    return tl.where(row < KERNEL, grad, 0.0), row


@triton.jit
def _routed_row(ph, pooled_image, KERNEL: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr,
                GROUP: tl.constexpr, ACC: tl.constexpr):
    """Pooled row ``ph``'s gradient as it reaches each of the GROUP input columns of a tile element: for each,
    the sum of the gradients whose argmax lies in that column (0 where none does), then for each the window row
    where it lies, as one tuple.

    Every window of a pooled row with its argmax in an input column puts it in the same input row: two windows
    of that row with their argmax at (r, w) and (r', w) both hold both pixels, and the first maximum (last NaN)
    in row-major order is the same pixel in each. So a pooled row reaches an input column as one sum in one
    row, and an input pixel costs KERNEL window columns for its KERNEL pooled rows, not KERNEL x KERNEL
    windows. Input column i + e (e < GROUP) holds window column j of pooled column i + e + PADDING - j.
    ``pooled_image`` = (grad_words, arg_words, words_ok, stride_h, arg_stride_h): the words of GROUP pooled
    positions from the one holding pooled column i + PADDING - KERNEL + 1 to the one holding i + GROUP - 1 +
    PADDING, each all on the pooled image or all off it (a GROUP of 1: single positions, masked where off)."""
    grad_words, arg_words, words_ok, stride_h, arg_stride_h = pooled_image
    NEAREST: tl.constexpr = PADDING - KERNEL + 1  # the leftmost pooled column read, counted from the element's
    SKEW: tl.constexpr = NEAREST - NEAREST // GROUP * GROUP  # its lane in the first word (constexprs floor)
    offsets = ()
    grads = ()
    if GROUP == 1:
        # Window column 0's position first, as the columns are routed: the other order took NHWC tiles of 8
        # channels a thread to 72 registers and 8 bytes spilled on Triton 3.6's sm_90 (79 registers on 3.8's).
        for k in tl.static_range(KERNEL - 1, -1, -1):
            offsets = (tl.load(arg_words[k] + ph * arg_stride_h, mask=words_ok[k], other=255),) + offsets
            grads = (tl.load(grad_words[k] + ph * stride_h, mask=words_ok[k], other=0.0).to(ACC),) + grads
    else:
        element = grad_words[0].dtype.element_ty
        grad_type = tl.uint64 if GROUP * element.primitive_bitwidth == 64 else tl.uint32
        arg_type = tl.uint32 if GROUP == 4 else tl.uint16
        arg_lanes = ()
        grad_lanes = ()
        for k in tl.static_range(len(grad_words)):
            arg_lanes += (tl.load((arg_words[k] + ph * arg_stride_h).to(tl.pointer_type(arg_type)),
                                  mask=words_ok[k], other=-1).to(tl.uint32),)
            grad_lanes += (tl.load((grad_words[k] + ph * stride_h).to(tl.pointer_type(grad_type)),
                                   mask=words_ok[k], other=0),)
        for at in tl.static_range(SKEW, SKEW + GROUP + KERNEL - 1):  # pooled column NEAREST + at - SKEW
            offsets += ((arg_lanes[at // GROUP] >> (8 * (at % GROUP))) & 0xFF,)
            grads += (_lane(grad_lanes[at // GROUP], at % GROUP, element, ACC),)
    totals = ()
    rows = ()
    for e in tl.static_range(GROUP):
        total, row = _routed(offsets[e + PADDING - NEAREST], grads[e + PADDING - NEAREST], 0, KERNEL, STRIDE)
        for j in tl.static_range(1, KERNEL):
            grad, row_j = _routed(offsets[e + PADDING - j - NEAREST], grads[e + PADDING - j - NEAREST], j, KERNEL,
                                  STRIDE)
            total += grad
            row = tl.minimum(row, row_j)  # every routed column gives the same row, the others >= KERNEL
        totals += (total,)
        rows += (row,)
    return totals + rows


@backend.autotune(_ROUTE_CONFIGS, [*_POOL_KEY, "GROUP"], _INTERPRETER_ROWS)
@_TILED
def _max_pool_backward_kernel(
    grad_pooled_ptr, argmax_ptr, grad_in_ptr, C, H, W, Hp, Wp,
    stride_n, stride_c, stride_h, stride_w,
    arg_stride_n, arg_stride_c, arg_stride_h, arg_stride_w,
    in_stride_n, in_stride_c, in_stride_h, in_stride_w, C_BUCKET, P_BUCKET, CHANNELS_INNER,
    KERNEL: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr, GROUP: tl.constexpr,
    ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr,
):
    # The stride-1 max pool's backward from its one-byte argmax offsets (STRIDE: the blur's, after it): each
    # input pixel gets the gradient of every pooled position whose window holds it at its argmax. No atomics.
    # Pooled row ph's windows cover input rows ph - PADDING .. ph - PADDING + KERNEL - 1, so walking down the
    # band, input row ih is complete once pooled row ih + PADDING is routed (_routed_row): ``routed`` keeps the
    # sums of the KERNEL - 1 input rows below it that earlier pooled rows reached, and the new pooled row adds
    # to all KERNEL rows by its window row. Column masks are made once a band.
    #
    # With GROUP > 1 (NCHW rows of whole aligned words: see _max_pool_backward_group), each element of the tile is
    # GROUP neighbouring input columns, which read the pooled row in words: at 3 x 3, 4 columns in bf16 read 3
    # words of offsets and 3 of gradients, where each column shifted by one read 4 bytes and 4 gradients alone;
    # the 4 are stored as one word. The tile is then BLOCK_C channels by BLOCK_W / GROUP groups.
    bands = tl.cdiv(H, BLOCK_H)
    sample = tl.program_id(0) // bands
    first_row = (tl.program_id(0) % bands) * BLOCK_H
    last_row = tl.minimum(first_row + BLOCK_H, H)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[:, None]
    iw = (tl.program_id(2) * (BLOCK_W // GROUP) + tl.arange(0, BLOCK_W // GROUP)[None, :]) * GROUP  # group's first
    channels_ok = c < C
    grad_pooled_ptr += sample.to(tl.int64) * stride_n + c.to(tl.int64) * stride_c
    argmax_ptr += sample.to(tl.int64) * arg_stride_n + c.to(tl.int64) * arg_stride_c
    grad_in_ptr += sample.to(tl.int64) * in_stride_n + c.to(tl.int64) * in_stride_c
    grad_words = ()
    arg_words = ()
    words_ok = ()
    for k in tl.static_range((PADDING - KERNEL + 1) // GROUP, (GROUP - 1 + PADDING) // GROUP + 1):
        pw = iw + k * GROUP  # the word's first pooled column
        grad_words += (grad_pooled_ptr + pw * stride_w,)
        arg_words += (argmax_ptr + pw * arg_stride_w,)
        words_ok += (channels_ok & (pw >= 0) & (pw < Wp),)
    pooled_image = (grad_words, arg_words, words_ok, stride_h, arg_stride_h)
    outputs = ()
    outputs_ok = ()
    for e in tl.static_range(GROUP):
        outputs += (grad_in_ptr + (iw + e) * in_stride_w,)
        outputs_ok += (channels_ok & (iw + e < W),)

    # routed[r * GROUP + e]: input row first_row + r at the group's column e, from the pooled rows above
    # first_row + PADDING that reach it.
    routed = ()
    for r in tl.static_range((KERNEL - 1) * GROUP):
        routed += (tl.zeros((BLOCK_C, BLOCK_W // GROUP), dtype=ACC),)
    for above in tl.static_range(1, KERNEL):
        ph = first_row + PADDING - above
        from_above = _routed_row(tl.minimum(tl.maximum(ph, 0), Hp - 1), pooled_image, KERNEL, STRIDE, PADDING,
                                 GROUP, ACC)
        on_image = (ph >= 0) & (ph < Hp)  # a clamped row, selected away off the image
        reached_band = ()
        for r in tl.static_range(KERNEL - 1):
            for e in tl.static_range(GROUP):
                reached_band += (routed[r * GROUP + e] + tl.where(on_image & (from_above[GROUP + e] == r + above),
                                                                  from_above[e], 0.0),)
        routed = reached_band
    # Input rows from Hp - PADDING on are under no pooled row of their own: the loop stops before them, so that
    # each of its pooled rows is on the image, and the rows after it get only what already reached them. Unrolled
    # twice, so that the kept rows move between registers every other row (on sm_90 at 5 x 5 NCHW: 51.0
    # instructions an input pixel, 54.2 without; at 3 x 3 NHWC 48 registers, 56 without).
    for ih in tl.range(first_row, tl.minimum(last_row, Hp - PADDING), loop_unroll_factor=2):
        reached = _routed_row(ih + PADDING, pooled_image, KERNEL, STRIDE, PADDING, GROUP, ACC)
        sums = ()
        for r in tl.static_range(KERNEL):
            for e in tl.static_range(GROUP):
                routed_here = tl.where(reached[GROUP + e] == r, reached[e], 0.0)
                sums += (routed[r * GROUP + e] + routed_here if r < KERNEL - 1 else routed_here,)
        _store_outputs(outputs, outputs_ok, ih * in_stride_h, sums[:GROUP], GROUP > 1)
        routed = sums[GROUP:]
    after = tl.maximum(first_row, Hp - PADDING)
    for r in tl.static_range(KERNEL - 1):
        row_ok = ()
        for e in tl.static_range(GROUP):
            row_ok += (outputs_ok[e] & (after + r < last_row),)
        _store_outputs(outputs, row_ok, (after + r) * in_stride_h, routed[r * GROUP:(r + 1) * GROUP], GROUP > 1)


# ----------------------------------------------------------------------------------------
# Pure-PyTorch references: the specification the kernels are tested against.
# ----------------------------------------------------------------------------------------


# The 3x3 filter per (dtype, device), built once: a tensor made from host values on a GPU is a
# host-to-device copy the host waits for, which on every call would distort the reference's timing.
_FILTERS: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}


def binomial_filter(channels: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The depthwise 3x3 binomial filter, shape (channels, 1, 3, 3), a view of one cached 3x3 tensor.

        >>> binomial_filter(2, torch.float32, "cpu")[1, 0]
        tensor([[0.0625, 0.1250, 0.0625],
                [0.1250, 0.2500, 0.1250],
                [0.0625, 0.1250, 0.0625]])
    """
    key = (dtype, torch.device(device))
    kernel = _FILTERS.get(key)
    if kernel is None:
        taps = torch.tensor([1.0, 2.0, 1.0], dtype=dtype, device=device)
        kernel = torch.outer(taps, taps) / 16
        # Only a plain tensor is kept: not a tracer's fake one, nor one made in inference mode,
        # which a later training step could not save for backward.
        if type(kernel) is torch.Tensor and not kernel.is_inference() and not torch.compiler.is_compiling():
            _FILTERS[key] = kernel
    return kernel.expand(channels, 1, 3, 3)


def blurpool2d_reference(input: torch.Tensor, stride: int = 2) -> torch.Tensor:
    """BlurPool as a depthwise convolution (what the kernel replaces)."""
    channels = input.shape[1]
    return F.conv2d(input, binomial_filter(channels, input.dtype, input.device), stride=stride, padding=1,
                    groups=channels)


def blur_maxpool2d_reference(
    input: torch.Tensor, kernel_size: int, stride: int | None = None, padding: int = 0
) -> torch.Tensor:
    """Stride-1 max pooling followed by BlurPool, as two PyTorch ops."""
    stride = kernel_size if stride is None else stride
    return blurpool2d_reference(F.max_pool2d(input, kernel_size, stride=1, padding=padding), stride)


def _blurpool2d_eager(input: torch.Tensor, stride: int) -> torch.Tensor:
    """The reference's values, arranged for PyTorch's CPU convolutions (oneDNN), where no kernel runs.

    Measured on a 2-core AVX-512/bf16 CPU with ResNet-20's shapes (batch 128, forward and
    backward): oneDNN's depthwise 3x3 at stride 2 costs about 10x its stride-1 pass in bf16
    (15 ms against 1.5 ms at 16 x 32 x 32), so in reduced precision the blur runs at stride 1 and
    every ``stride``-th output is kept: a bf16 ResNet-20 step with BlurPool went from 207 to
    173 ms (163 without BlurPool). In fp32 the strided convolution is the faster one and stays.
    The filter's separability does not pay here: two 1-D depthwise passes, or shifted adds,
    measured slower than oneDNN's single 3x3 pass in every layout and dtype but contiguous fp32.
    """
    if stride > 1 and input.device.type == "cpu" and _computes_in_reduced_precision(input):
        return blurpool2d_reference(input, 1)[:, :, ::stride, ::stride]
    return blurpool2d_reference(input, stride)


def _computes_in_reduced_precision(input: torch.Tensor) -> bool:
    device = input.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device) != torch.float32
    return input.dtype in (torch.bfloat16, torch.float16)


# ----------------------------------------------------------------------------------------
# Custom ops: torch.library registration, fake implementations and autograd
#
# The ops hold only the Triton path; the public functions send other devices to the
# references, which PyTorch differentiates, compiles and exports by itself.
# ----------------------------------------------------------------------------------------


def _strided_size(size: int, stride: int) -> int:
    # Outputs of a 3-tap filter with padding 1: (size + 2 - 3) // stride + 1.
    return (size - 1) // stride + 1


def _pooled_size(size: int, kernel_size: int, padding: int) -> int:
    return size + 2 * padding - kernel_size + 1


def _tuning_key(C: int, pixels: int, channel_stride: int) -> dict[str, int]:
    """The autotuner's key for a launch over ``pixels`` pixels of ``C`` channels (see _TILE_KEY)."""
    return {"C_BUCKET": backend.size_bucket(C), "P_BUCKET": backend.size_bucket(pixels),
            "CHANNELS_INNER": int(channel_stride == 1)}


def _launch_tiled(kernel, shape: tuple[int, int, int], channel_stride: int, *args, **constants) -> None:
    """Launch a ``_TILED`` kernel over ``shape`` = (samples, channels, pixels), one program a tile."""
    N, C, pixels = shape

    def grid(meta):
        return backend.cdiv(pixels, meta["BLOCK_P"]), backend.cdiv(C, meta["BLOCK_C"]), N

    kernel[grid](*args, **_tuning_key(C, pixels, channel_stride), **constants)


def _band_grid(N: int, C: int, Ho: int, Wo: int, group: int = 1):
    """The grid of a kernel walking bands of BLOCK_H rows of the Ho x Wo image it writes: row bands of every
    sample first (the grid's first axis is the one without a 65535 cap), then blocks of BLOCK_C x ``group``
    channels, then of BLOCK_W columns (a tile of ``group`` outputs an element keeps BLOCK_C x BLOCK_W elements)."""
    return lambda meta: (N * backend.cdiv(Ho, meta["BLOCK_H"]), backend.cdiv(C, meta["BLOCK_C"] * group),
                         backend.cdiv(Wo, meta["BLOCK_W"]))


def _address(tensor: torch.Tensor) -> int:
    """The address of ``tensor``'s first element, in elements: what a word's alignment is judged by (a view's
    storage offset, and its allocation's, which PyTorch aligns but memory from DLPack or ``from_blob`` need not be).
    A fake tensor (a tracer's, or the host-side checks') has no memory: its allocation is taken as aligned.

        >>> _address(torch.zeros(8)[3:]) % 8
        3
    """
    if isinstance(tensor, FakeTensor):
        return tensor.storage_offset()
    return tensor.data_ptr() // tensor.element_size()


def _blur_words(strides: tuple[int, ...], offset: int, width: int, out_strides: tuple[int, ...], out_offset: int,
                out_width: int, stride: int, element_size: int) -> dict[str, int | bool]:
    """How _blurpool_forward_kernel's tile elements read and write, for an input of these ``strides``, ``offset``
    (its data's address, :func:`_address`) and ``width``, in elements of ``element_size`` bytes, and an output of
    the ``out_`` ones: GROUP outputs an element, their columns read in aligned WORDs of elements, stored as one
    word if PACKED.

    Groups of 4 at stride 1 and 2 where the input's rows are of unit column stride and every other stride, the
    offset and the width are multiples of a word of 64 bits (else 32): a word is then all on a row or all off
    it. The 4 outputs are packed into one word where they fit in 64 bits and the output's strides, offset and
    width are multiples of 4 as well. Else 1 output an element, read a column at a time.

        >>> nchw = (128 * 56 * 56, 56 * 56, 56, 1)
        >>> _blur_words(nchw, 0, 56, (128 * 28 * 28, 28 * 28, 28, 1), 0, 28, 2, 2)  # bf16
        {'GROUP': 4, 'WORD': 4, 'PACKED': True}
        >>> _blur_words((128 * 14 * 14, 14 * 14, 14, 1), 0, 14, (128 * 14 * 14, 14 * 14, 14, 1), 0, 14, 1, 2)
        {'GROUP': 4, 'WORD': 2, 'PACKED': False}
        >>> _blur_words((56 * 56 * 128, 1, 56 * 128, 128), 0, 56, (28 * 28 * 128, 1, 28 * 128, 128), 0, 28, 2, 2)
        {'GROUP': 1, 'WORD': 1, 'PACKED': False}
    """
    if strides[3] == 1 and stride <= 2 and element_size <= 4:
        for word in (8 // element_size, 4 // element_size):
            if word > 1 and all(size % word == 0 for size in (*strides[:3], offset, width)):
                packed = 4 * element_size <= 8 and out_strides[3] == 1 and all(
                    size % 4 == 0 for size in (*out_strides[:3], out_offset, out_width))
                return {"GROUP": 4, "WORD": word, "PACKED": packed}
    return {"GROUP": 1, "WORD": 1, "PACKED": False}


def _blur_backward_group(strides: tuple[int, ...], offset: int, width: int, in_strides: tuple[int, ...],
                         in_offset: int, in_width: int, stride: int, element_size: int) -> int:
    """The outputs each element of _blurpool_backward_kernel's tile takes (its GROUP), for a gradient of these
    ``strides``, ``offset`` (its data's address, :func:`_address`) and ``width`` and an input gradient of the
    ``in_`` ones, in elements of ``element_size`` bytes.

    At stride 2, rows of unit column stride on both sides and an input twice as wide as the output: 4 outputs
    (2 in 32-bit floats) where their gradients fill a 64-bit word, else 2 where they fill a 32-bit one, each
    word aligned (the gradient's strides, offset and width multiples of the group) and the input's strides and
    offset multiples of a 64-bit word, which its stores write. 1 otherwise.

        >>> _blur_backward_group((128 * 28 * 28, 28 * 28, 28, 1), 0, 28, (128 * 56 * 56, 56 * 56, 56, 1), 0, 56, 2, 2)
        4
        >>> _blur_backward_group((128 * 14 * 14, 14 * 14, 14, 1), 0, 14, (128 * 28 * 28, 28 * 28, 28, 1), 0, 28, 2, 2)
        2
        >>> _blur_backward_group((128 * 7 * 7, 7 * 7, 7, 1), 0, 7, (128 * 14 * 14, 14 * 14, 14, 1), 0, 14, 2, 2)
        1
    """
    store_word = 8 // element_size
    aligned_input = all(size % store_word == 0 for size in (*in_strides[:3], in_offset))
    if stride != 2 or strides[3] != 1 or in_strides[3] != 1 or in_width != 2 * width or not aligned_input:
        return 1
    for group in (8 // element_size, 4 // element_size):
        if group > 1 and 2 * group % store_word == 0 and all(size % group == 0 for size in (*strides[:3], offset,
                                                                                             width)):
            return group
    return 1


def _blur(x: torch.Tensor, out: torch.Tensor, stride: int) -> torch.Tensor:
    """Write ``x`` blurred and subsampled by ``stride`` into ``out`` (its shape already the strided one)."""
    N, C, H, W = x.shape
    Ho, Wo = out.shape[2:]
    if out.numel():
        words = _blur_words(x.stride(), _address(x), W, out.stride(), _address(out), Wo, stride,
                            x.element_size())
        _blurpool_forward_kernel[_band_grid(N, C, Ho, Wo)](
            x, out, C, H, W, Ho, Wo, *x.stride(), *out.stride(), **_tuning_key(C, Ho * Wo, x.stride(1)),
            STRIDE=stride, **words, ACC=backend.accumulator(x.dtype))
    return out


@kernel_op("fastcore_ops::blurpool2d")
def _blurpool2d_op(x: torch.Tensor, stride: int) -> torch.Tensor:
    N, C, H, W = x.shape
    return _blur(x, empty_like_layout(x, (N, C, _strided_size(H, stride), _strided_size(W, stride))), stride)


@_blurpool2d_op.register_fake
def _(x, stride):
    N, C, H, W = x.shape
    return empty_like_layout(x, (N, C, _strided_size(H, stride), _strided_size(W, stride)))


def _blur_backward(grad_out: torch.Tensor, height: int, width: int, stride: int) -> torch.Tensor:
    """The gradient of a ``height`` x ``width`` image from its strided blur's gradient ``grad_out``."""
    N, C, Ho, Wo = grad_out.shape
    grad_in = empty_like_layout(grad_out, (N, C, height, width))
    if stride == 1:  # the filter is symmetric and its padding zero, so a stride-1 blur is its own adjoint
        return _blur(grad_out, grad_in, 1)
    if grad_in.numel():  # a program per output, writing the pixels under it
        group = _blur_backward_group(grad_out.stride(), _address(grad_out), Wo, grad_in.stride(), _address(grad_in),
                                     width, stride, grad_out.element_size())
        _launch_tiled(_blurpool_backward_kernel, (N, C, Ho * Wo), grad_out.stride(1),
                      grad_out, grad_in, C, height, width, Ho, Wo, *grad_out.stride(), *grad_in.stride(),
                      STRIDE=stride, GROUP=group, ACC=backend.accumulator(grad_out.dtype))
    return grad_in


@kernel_op("fastcore_ops::blurpool2d_backward")
def _blurpool2d_backward_op(grad_out: torch.Tensor, height: int, width: int, stride: int) -> torch.Tensor:
    return _blur_backward(grad_out, height, width, stride)


@_blurpool2d_backward_op.register_fake
def _(grad_out, height, width, stride):
    return empty_like_layout(grad_out, (grad_out.shape[0], grad_out.shape[1], height, width))


def _blurpool2d_setup_context(ctx, inputs, output):
    x, ctx.stride = inputs
    ctx.height, ctx.width = x.shape[2:]


def _blurpool2d_backward(ctx, grad_out):
    return _blurpool2d_backward_op(grad_out, ctx.height, ctx.width, ctx.stride), None


_blurpool2d_op.register_autograd(_blurpool2d_backward, setup_context=_blurpool2d_setup_context)


def _forward_group(strides: tuple[int, ...], offset: int, width: int, pooled_width: int, stride: int) -> int:
    """The outputs each element of the blur max pool forward's tile computes (its GROUP): 2 where neighbouring
    outputs share pooled columns (stride 1 or 2) and the kernel may read the input, of these ``strides``,
    ``offset`` (its data's address in elements, :func:`_address`) and ``width``, in aligned words of up to 4
    elements a row and write its argmax, ``pooled_width`` bytes a row in its layout, in words of up to 4 bytes:
    rows of unit column stride, every other stride, the offset and both widths multiples of 4 (the outputs are
    the op's own allocations, which PyTorch aligns), so that a word is all on a row or all off it. 1 otherwise.

        >>> resnet_stem = (64 * 112 * 112, 112 * 112, 112, 1)
        >>> _forward_group(resnet_stem, 0, 112, 112, 2), _forward_group(resnet_stem, 0, 112, 112, 3)
        (2, 1)
    """
    words = strides[3] == 1 and all(size % 4 == 0 for size in (*strides[:3], offset, width, pooled_width))
    return 2 if words and stride <= 2 else 1


def _max_pool_backward_group(strides: tuple[tuple[int, ...], ...], offsets: tuple[int, ...], width: int,
                             pooled_width: int, element_size: int) -> int:
    """The input columns each element of the max pool backward's tile routes (its GROUP), for its pooled gradient,
    argmax and input gradient of these ``strides`` and ``offsets`` (their data's addresses, :func:`_address`),
    the gradients in elements of ``element_size`` bytes: a word of 64 bits of gradients (4 in 16 bits, 2 in 32)
    where each tensor's rows are of unit column stride and its other strides and its offset are multiples of
    the word, as are ``width`` and ``pooled_width``, so that a word is all on a row or all off it. 1 otherwise.

        >>> resnet_stem = (64 * 112 * 112, 112 * 112, 112, 1)
        >>> _max_pool_backward_group((resnet_stem,) * 3, (0, 0, 0), 112, 112, 2)
        4
        >>> _max_pool_backward_group((resnet_stem,) * 3, (0, 0, 0), 112, 112, 4), _max_pool_backward_group(
        ...     (resnet_stem,) * 3, (0, 0, 0), 112, 111, 4)
        (2, 1)
    """
    group = 8 // element_size
    aligned = all(layout[3] == 1 and all(size % group == 0 for size in (*layout[:3], offset))
                  for layout, offset in zip(strides, offsets))
    return group if group in (2, 4) and aligned and width % group == 0 and pooled_width % group == 0 else 1


@kernel_op("fastcore_ops::blur_maxpool2d")
def _blur_maxpool2d_op(
    x: torch.Tensor, kernel_size: int, stride: int, padding: int
) -> tuple[torch.Tensor, torch.Tensor]:
    N, C, H, W = x.shape
    Hp, Wp = _pooled_size(H, kernel_size, padding), _pooled_size(W, kernel_size, padding)
    Ho, Wo = _strided_size(Hp, stride), _strided_size(Wp, stride)
    out = empty_like_layout(x, (N, C, Ho, Wo))
    argmax = empty_like_layout(x, (N, C, Hp, Wp), dtype=torch.uint8)
    if out.numel():
        group = _forward_group(x.stride(), _address(x), W, Wp, stride)
        _blur_maxpool_forward[x.stride(1) == 1][_band_grid(N, C, Ho, Wo, group)](
            x, out, argmax, C, H, W, Hp, Wp, Ho, Wo, *x.stride(), *out.stride(), *argmax.stride(),
            **_tuning_key(C, Ho * Wo, x.stride(1)), KERNEL=kernel_size, STRIDE=stride, PADDING=padding, GROUP=group,
            ACC=backend.accumulator(x.dtype))
    return out, argmax


@_blur_maxpool2d_op.register_fake
def _(x, kernel_size, stride, padding):
    N, C, H, W = x.shape
    Hp, Wp = _pooled_size(H, kernel_size, padding), _pooled_size(W, kernel_size, padding)
    out = empty_like_layout(x, (N, C, _strided_size(Hp, stride), _strided_size(Wp, stride)))
    return out, empty_like_layout(x, (N, C, Hp, Wp), dtype=torch.uint8)


@kernel_op("fastcore_ops::blur_maxpool2d_backward")
def _blur_maxpool2d_backward_op(
    grad_out: torch.Tensor, argmax: torch.Tensor, height: int, width: int, kernel_size: int, stride: int, padding: int
) -> torch.Tensor:
    # Two passes: the blur's backward to the pooled image's gradient, then the max pool's routing.
    # Fused, each input pixel would redo the blur's taps for each of the K x K windows holding it,
    # which is instruction-bound; the pooled gradient in between costs a write and a read.
    N, C = grad_out.shape[:2]
    Hp, Wp = argmax.shape[2:]
    grad_pooled = _blur_backward(grad_out, Hp, Wp, stride)
    grad_in = empty_like_layout(grad_out, (N, C, height, width))
    if grad_in.numel():
        tensors = (grad_pooled, argmax, grad_in)
        group = _max_pool_backward_group(tuple(t.stride() for t in tensors), tuple(map(_address, tensors)), width, Wp,
                                         grad_out.element_size())
        _max_pool_backward_kernel[_band_grid(N, C, height, width)](
            grad_pooled, argmax, grad_in, C, height, width, Hp, Wp,
            *grad_pooled.stride(), *argmax.stride(), *grad_in.stride(),
            **_tuning_key(C, height * width, grad_pooled.stride(1)),
            KERNEL=kernel_size, STRIDE=stride, PADDING=padding, GROUP=group, ACC=backend.accumulator(grad_out.dtype))
    return grad_in


@_blur_maxpool2d_backward_op.register_fake
def _(grad_out, argmax, height, width, kernel_size, stride, padding):
    return empty_like_layout(grad_out, (grad_out.shape[0], grad_out.shape[1], height, width))


def _blur_maxpool2d_setup_context(ctx, inputs, output):
    x, ctx.kernel_size, ctx.stride, ctx.padding = inputs
    ctx.height, ctx.width = x.shape[2:]
    ctx.save_for_backward(output[1])
    # The argmax never receives a gradient: without this, autograd would zero-fill one for it, a
    # pooled-size buffer, on every backward.
    ctx.set_materialize_grads(False)


def _blur_maxpool2d_backward(ctx, grad_out, _grad_argmax):
    if grad_out is None:  # not materialized: no gradient reached the output
        return None, None, None, None
    (argmax,) = ctx.saved_tensors
    grad_in = _blur_maxpool2d_backward_op(
        grad_out, argmax, ctx.height, ctx.width, ctx.kernel_size, ctx.stride, ctx.padding)
    return grad_in, None, None, None


_blur_maxpool2d_op.register_autograd(_blur_maxpool2d_backward, setup_context=_blur_maxpool2d_setup_context)


# ----------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------


def blurpool2d(input: torch.Tensor, stride: int = 2) -> torch.Tensor:
    """Blur each channel with the 3x3 binomial filter and downsample by ``stride``.

    Equal, values and gradients, to a depthwise ``F.conv2d`` with the filter
    [1, 2, 1] x [1, 2, 1] / 16, padding 1 and the given stride.

    Example:
        >>> x = torch.randn(2, 16, 32, 32)
        >>> blurpool2d(x).shape
        torch.Size([2, 16, 16, 16])
    """
    check_tensor("input", input, ndim=4)
    check_int("stride", stride, low=1)
    if backend.use_triton(input) or input.numel() == 0:  # empty inputs launch nothing, on any device
        return _blurpool2d_op(input, stride)
    return _blurpool2d_eager(input, stride)


def blur_maxpool2d(input: torch.Tensor, kernel_size: int, stride: int | None = None, padding: int = 0) -> torch.Tensor:
    """Anti-aliased max pooling: stride-1 ``max_pool2d`` then ``blurpool2d(·, stride)``, fused.

    Takes ``F.max_pool2d``'s first arguments with their meaning (``stride`` defaults to
    ``kernel_size``), so a call to it becomes a call to this. Gradients go to each window's
    arg-max exactly as ``F.max_pool2d``'s do (first maximum in row-major order wins ties).

    Example:
        >>> x = torch.randn(2, 16, 32, 32)
        >>> blur_maxpool2d(x, 3, 2, 1).shape  # what replaces ResNet's 3x3 stride-2 max pool
        torch.Size([2, 16, 16, 16])
    """
    check_tensor("input", input, ndim=4)
    check_int("kernel_size", kernel_size, low=1, high=_MAX_POOL_KERNEL)
    stride = kernel_size if stride is None else check_int("stride", stride, low=1)
    check_int("padding", padding, low=0, high=kernel_size // 2)
    for name, size in zip(("height", "width"), input.shape[2:]):
        if size and _pooled_size(size, kernel_size, padding) < 1:
            raise ValueError(
                f"input's {name} {size} is smaller than kernel_size {kernel_size} with padding {padding}; "
                f"use a smaller kernel_size or more padding"
            )
    if backend.use_triton(input) or input.numel() == 0:  # empty inputs launch nothing, on any device
        return _blur_maxpool2d_op(input, kernel_size, stride, padding)[0]
    return _blurpool2d_eager(F.max_pool2d(input, kernel_size, stride=1, padding=padding), stride)
