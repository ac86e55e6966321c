"""BlurPool: anti-aliased downsampling (Zhang, "Making Convolutional Networks Shift-Invariant Again").

``blurpool2d`` low-pass filters every channel with the 3x3 binomial filter
([1, 2, 1] outer [1, 2, 1] / 16, zero "same" padding) and keeps every ``stride``-th
output, in one pass: only the kept outputs are computed, no full-resolution
intermediate is written. :mod:`.blur_maxpool` fuses a stride-1 max pool in front of it,
on the row bands, words and stores of this module's kernels.

Layouts: any strides (contiguous and channels_last included); outputs follow the input's
layout. Arithmetic is fp32 for fp16, bf16 and fp32 storage, fp64 for fp64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from ..checks import check_int, check_tensor
from . import backend, rivals
from .backend import tl, triton
from .custom_op import kernel_op
from .layout import empty_like_layout


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
def _store_outputs(outputs, outputs_ok, offset, value, PACKED: tl.constexpr):
    """Store the group's output ``value``s at ``outputs`` + ``offset``. PACKED: side by side in one word, where the
    group fits in 64 bits; the caller's promise that its outputs are all in the image or none and the word
    aligned (see _blur_words, and blur_maxpool._forward_group). Each on its own otherwise."""
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
        # which a later training step could not save for backward. Compiling is asked first:
        # torch.compile cannot trace is_inference() (fullgraph refused the reference).
        if type(kernel) is torch.Tensor and not torch.compiler.is_compiling() and not kernel.is_inference():
            _FILTERS[key] = kernel
    return kernel.expand(channels, 1, 3, 3)


def blurpool2d_reference(input: torch.Tensor, stride: int = 2) -> torch.Tensor:
    """BlurPool as a depthwise convolution (what the kernel replaces)."""
    channels = input.shape[1]
    return F.conv2d(input, binomial_filter(channels, input.dtype, input.device), stride=stride, padding=1,
                    groups=channels)


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


def _rows_of_words(strides: tuple[int, ...], offset: int, word: int) -> bool:
    """Whether the rows of a tensor of these ``strides`` and ``offset`` (:func:`_address`) are of unit column
    stride and start on a word of ``word`` elements: its other strides and its offset multiples of the word.

        >>> _rows_of_words((128 * 56 * 56, 56 * 56, 56, 1), 0, 4), _rows_of_words((6 * 7, 7, 1, 1), 0, 4)
        (True, False)
    """
    return strides[3] == 1 and all(size % word == 0 for size in (*strides[:3], offset))


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
            if word > 1 and _rows_of_words(strides, offset, word) and width % word == 0:
                packed = 4 * element_size <= 8 and _rows_of_words(out_strides, out_offset, 4) and out_width % 4 == 0
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
    if stride != 2 or in_width != 2 * width or not _rows_of_words(in_strides, in_offset, store_word):
        return 1
    for group in (8 // element_size, 4 // element_size):
        if group > 1 and 2 * group % store_word == 0 and _rows_of_words(strides, offset, group) and width % group == 0:
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
    if rivals.kernel_runs("blurpool2d", input, stride=stride):
        return _blurpool2d_op(input, stride)
    return _blurpool2d_eager(input, stride)
