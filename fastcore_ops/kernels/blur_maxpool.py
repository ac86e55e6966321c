"""Blur max pool: a stride-1 max pool then BlurPool's blur, fused: anti-aliased max pooling (Zhang, "Making
Convolutional Networks Shift-Invariant Again"), which is how BlurPool replaces a strided max pool.

``blur_maxpool2d`` never writes the pooled image: each output takes the max of the windows its blur reads, and
only their argmax offsets, one byte a pooled pixel, are kept for the backward, which routes the blur's gradient
to each window's argmax as ``F.max_pool2d`` does. The kernels walk the row bands of :mod:`.blurpool`'s.

Layouts: any strides (contiguous and channels_last included); outputs follow the input's layout. Arithmetic is
fp32 for fp16, bf16 and fp32 storage, fp64 for fp64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checks import check_int, check_tensor
from . import backend, rivals
from .backend import tl, triton
from .blurpool import (_INTERPRETER_ROWS, _TILE_KEY, _TILED, _address, _band_grid, _blur_backward,
                       _blurpool2d_eager, _lane, _rows_of_words, _store_outputs, _strided_size, _tuning_key,
                       blurpool2d_reference)
from .custom_op import kernel_op
from .layout import empty_like_layout, is_channels_last

# Row-major window offsets are stored in uint8, which bounds the max-pool window.
_MAX_POOL_KERNEL = 15


# ----------------------------------------------------------------------------------------
# Triton kernels
#
# Bands of rows tiled and keyed as .blurpool's row kernels are (see its section on them); the autotuning key
# adds the pool's size and padding, which change a kernel's work as its stride does.
# ----------------------------------------------------------------------------------------

_POOL_KEY = [*_TILE_KEY, "KERNEL", "STRIDE", "PADDING"]


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
                 PADDING: tl.constexpr, GROUP: tl.constexpr, ARG_WORD: tl.constexpr, WHOLE_WORDS: tl.constexpr,
                 TAP1: tl.constexpr):
    """Pooled row ``ph`` at the group's windows, ``pooled`` = (max0, at0, max1, at1, ...): stores the argmax
    where this program owns it, and returns the row's horizontal blur, [1, 2, 1] / 4, 0 off the pooled image,
    for each of the group's GROUP outputs (output i's taps read windows i * STRIDE .. i * STRIDE + 2).
    ``pooled_image`` = (Hp, pooled_ok, arg_pointers, arg_stride_h). With ARG_WORD > 1 the owned offsets, of
    windows 1 .. ARG_WORD, are stored as one aligned word, into the argmax rows' padding past Wp unless
    WHOLE_WORDS (Wp a multiple of the word). TAP1: ``ph`` is the row under an output row's blur tap 1, o * STRIDE,
    which is on the pooled image for every output row."""
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
    # 0 * inf would be NaN: positions off the pooled image are selected away, not multiplied by 0. Each output's
    # tap 1 window, o * STRIDE, is on it for every output there is, and from stride 2 on no other output reads it;
    # the windows of the argmax word are on it where WHOLE_WORDS: Wp, a multiple of its size, does not cut it.
    taps = ()
    for j in tl.static_range(len(pooled) // 2):
        if j == 1 or (STRIDE >= 2 and j % STRIDE == 1) or (WHOLE_WORDS and j >= 1 and j <= ARG_WORD):
            taps += (pooled[2 * j],)
        else:
            taps += (tl.where(pooled_ok[j], pooled[2 * j], 0.0),)
    blurred = ()
    for i in tl.static_range(GROUP):
        # Weighted before summed, so no sum overflows.
        sides = tl.fma(taps[i * STRIDE], 0.25, taps[i * STRIDE + 2] * 0.25)
        blurred += (tl.where(row_ok, tl.fma(taps[i * STRIDE + 1], 0.5, sides), 0.0),)
    return blurred


@triton.jit
def _one_pooled_row(window, ph, image, pooled_image, store, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                    PADDING: tl.constexpr, ACC: tl.constexpr, KEEP: tl.constexpr, GROUP: tl.constexpr,
                    WORD: tl.constexpr, ARG_WORD: tl.constexpr, WHOLE_WORDS: tl.constexpr, TAP1: tl.constexpr):
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
    blurred = _blur_pooled(pooled, ph, pooled_image, store, KERNEL, STRIDE, PADDING, GROUP, ARG_WORD, WHOLE_WORDS,
                           TAP1)
    return blurred, window


@triton.jit
def _two_pooled_rows(window, ph, image, pooled_image, store0, store1, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                     PADDING: tl.constexpr, ACC: tl.constexpr, KEEP: tl.constexpr, GROUP: tl.constexpr,
                     WORD: tl.constexpr, ARG_WORD: tl.constexpr, WHOLE_WORDS: tl.constexpr, TAP1: tl.constexpr):
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
    blurred0 = _blur_pooled(first, ph, pooled_image, store0, KERNEL, STRIDE, PADDING, GROUP, ARG_WORD, WHOLE_WORDS,
                            TAP1 == 0)
    blurred1 = _blur_pooled(second, ph + 1, pooled_image, store1, KERNEL, STRIDE, PADDING, GROUP, ARG_WORD,
                            WHOLE_WORDS, TAP1 == 1)
    return blurred0, blurred1, window


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
    WHOLE_WORDS: tl.constexpr, ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr,
):
    # Each output blurs 3 x 3 pooled positions, each the max of a KERNEL x KERNEL window; the pooled image is
    # never stored, only the argmax offsets, one byte each, for backward. The max is separable: each input row's
    # maxes over the windows of the pooled columns an output's blur reads (_row_maxes) are taken once and kept,
    # in ``window``, for the KERNEL pooled rows that read them; each pooled row's vertical max is taken once, and
    # kept, as its horizontal blur, for the next output row where they share it (two of three at stride 1, one
    # at stride 2), like .blurpool._blurpool_forward_kernel; two pooled rows taken together share the vertical max of
    # their common input rows. At stride 2 an output row takes 2 input rows and 2 pooled rows, against
    # 3 x KERNEL input rows loaded and compared for 3 windows per output.
    #
    # With GROUP = 2 (see _forward_group), each element of the tile is 2 neighbouring outputs, which share a
    # pooled column: 5 windows over 7 input columns a row at stride 2, not 2 x 3 over 2 x 5, each pooled pixel's
    # max and argmax taken once; the rows are read in aligned words of up to 8 bytes (WORD elements), and the
    # argmax bytes the group owns in a pooled row written as one word. The tile is then BLOCK_C x GROUP channels
    # by BLOCK_W / GROUP groups: as many elements, on as many threads. The argmax rows are padded to whole words (see
    # _argmax_buffer); WHOLE_WORDS says Wp needs no padding, so no window of an argmax word is off the image.
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
                                                 PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, WHOLE_WORDS, 1)
    if STRIDE == 2:
        above, window = _one_pooled_row(window, ph, image, pooled_image, False, KERNEL, STRIDE, PADDING, ACC, KEEP,
                                        GROUP, WORD, ARG_WORD, WHOLE_WORDS, False)
    # Unrolled twice: the kept rows then move between registers every other output row, not every one.
    for oh in tl.range(first_row, last_row, loop_unroll_factor=2 if KEEP else 1):
        ph = oh * STRIDE - 1  # pooled rows ph, ph + 1, ph + 2 under blur taps 0, 1, 2
        if STRIDE == 1:
            # Tap 2's row is owned by the next output row's tap 1: this program's unless that row is past the
            # band (the next band's, which stores it before its loop).
            below, window = _one_pooled_row(window, ph + 2, image, pooled_image, oh + 1 < last_row, KERNEL, STRIDE,
                                            PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, WHOLE_WORDS, False)
        elif STRIDE == 2:
            middle, below, window = _two_pooled_rows(window, ph + 1, image, pooled_image, True, True, KERNEL,
                                                     STRIDE, PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, WHOLE_WORDS, 0)
        else:
            # Not told that ph + 1 is under tap 1: at stride 3 NHWC that left 8 bytes spilled on sm_90 (176
            # registers without, 168 with).
            above, middle, window = _two_pooled_rows(window, ph, image, pooled_image, True, True, KERNEL, STRIDE,
                                                     PADDING, ACC, KEEP, GROUP, WORD, ARG_WORD, WHOLE_WORDS, -1)
            below, window = _one_pooled_row(window, ph + 2, image, pooled_image, True, KERNEL, STRIDE, PADDING, ACC,
                                            KEEP, GROUP, WORD, ARG_WORD, WHOLE_WORDS, False)
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
# Pure-PyTorch reference: the specification the kernels are tested against.
# ----------------------------------------------------------------------------------------


def blur_maxpool2d_reference(
    input: torch.Tensor, kernel_size: int, stride: int | None = None, padding: int = 0
) -> torch.Tensor:
    """Stride-1 max pooling followed by BlurPool, as two PyTorch ops."""
    stride = kernel_size if stride is None else stride
    return blurpool2d_reference(F.max_pool2d(input, kernel_size, stride=1, padding=padding), stride)


# ----------------------------------------------------------------------------------------
# Custom ops: torch.library registration, fake implementations and autograd
# ----------------------------------------------------------------------------------------


def _pooled_size(size: int, kernel_size: int, padding: int) -> int:
    return size + 2 * padding - kernel_size + 1


def _forward_group(strides: tuple[int, ...], offset: int, width: int, pooled_width: int,
                   stride: int) -> dict[str, int | bool]:
    """How each element of the blur max pool forward's tile works: its GROUP of outputs, 2 where neighbouring
    outputs share pooled columns (stride 1 or 2), the kernel may read the input, of these ``strides``, ``offset``
    (its data's address in elements, :func:`_address`) and ``width``, in aligned words of up to 4 elements a row
    (rows of unit column stride, every other stride, the offset and the width multiples of 4, so that a word is
    all on a row or all off it), and the output rows hold whole pairs, which are stored as one word; 1 otherwise.
    A group's argmax bytes are written as one word (the argmax rows padded to whole words: :func:`_argmax_buffer`),
    and WHOLE_WORDS says that the ``pooled_width`` needs no padding, so that no window of a word is off the pooled
    image.

        >>> resnet_stem = (64 * 112 * 112, 112 * 112, 112, 1)
        >>> _forward_group(resnet_stem, 0, 112, 112, 2), _forward_group(resnet_stem, 0, 112, 112, 3)
        ({'GROUP': 2, 'WHOLE_WORDS': True}, {'GROUP': 1, 'WHOLE_WORDS': True})
        >>> _forward_group(resnet_stem, 0, 112, 111, 2)  # VGG's 2 x 2 pool: the words' last windows are checked
        {'GROUP': 2, 'WHOLE_WORDS': False}
        >>> _forward_group(resnet_stem, 0, 112, 110, 2)["GROUP"]  # 3 x 3 unpadded: 55 outputs a row, no pairs
        1
    """
    words = _rows_of_words(strides, offset, 4) and width % 4 == 0
    pairs = _strided_size(pooled_width, stride) % 2 == 0
    return {"GROUP": 2 if words and pairs and stride <= 2 else 1, "WHOLE_WORDS": pooled_width % 4 == 0}


def _argmax_buffer(x: torch.Tensor, shape: tuple[int, int, int, int]) -> torch.Tensor:
    """The forward's argmax offsets, one byte a pooled pixel of ``shape``, in ``x``'s layout; channels-first,
    each row padded to whole 4-byte words (a view of its first ``shape[3]`` bytes), so that the forward may write
    a group's offsets as one word whatever the pooled width.

        >>> _argmax_buffer(torch.empty(1, 2, 8, 8), (1, 2, 7, 7)).stride()
        (112, 56, 8, 1)
    """
    if is_channels_last(x):
        return empty_like_layout(x, shape, dtype=torch.uint8)
    N, C, Hp, Wp = shape
    return torch.empty((N, C, Hp, -(-Wp // 4) * 4), dtype=torch.uint8, device=x.device)[..., :Wp]


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
    aligned = all(_rows_of_words(layout, offset, group) for layout, offset in zip(strides, offsets))
    return group if group in (2, 4) and aligned and width % group == 0 and pooled_width % group == 0 else 1


@kernel_op("fastcore_ops::blur_maxpool2d")
def _blur_maxpool2d_op(
    x: torch.Tensor, kernel_size: int, stride: int, padding: int
) -> tuple[torch.Tensor, torch.Tensor]:
    N, C, H, W = x.shape
    Hp, Wp = _pooled_size(H, kernel_size, padding), _pooled_size(W, kernel_size, padding)
    Ho, Wo = _strided_size(Hp, stride), _strided_size(Wp, stride)
    out = empty_like_layout(x, (N, C, Ho, Wo))
    argmax = _argmax_buffer(x, (N, C, Hp, Wp))
    if out.numel():
        grouping = _forward_group(x.stride(), _address(x), W, Wp, stride)
        _blur_maxpool_forward[x.stride(1) == 1][_band_grid(N, C, Ho, Wo, grouping["GROUP"])](
            x, out, argmax, C, H, W, Hp, Wp, Ho, Wo, *x.stride(), *out.stride(), *argmax.stride(),
            **_tuning_key(C, Ho * Wo, x.stride(1)), KERNEL=kernel_size, STRIDE=stride, PADDING=padding, **grouping,
            ACC=backend.accumulator(x.dtype))
    return out, argmax


@_blur_maxpool2d_op.register_fake
def _(x, kernel_size, stride, padding):
    N, C, H, W = x.shape
    Hp, Wp = _pooled_size(H, kernel_size, padding), _pooled_size(W, kernel_size, padding)
    out = empty_like_layout(x, (N, C, _strided_size(Hp, stride), _strided_size(Wp, stride)))
    return out, _argmax_buffer(x, (N, C, Hp, Wp))


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
# Public function
# ----------------------------------------------------------------------------------------


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
    if rivals.kernel_runs("blur_maxpool2d", input, kernel_size=kernel_size, stride=stride, padding=padding):
        return _blur_maxpool2d_op(input, kernel_size, stride, padding)[0]
    return _blurpool2d_eager(F.max_pool2d(input, kernel_size, stride=1, padding=padding), stride)
