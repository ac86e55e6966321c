"""ALiBi attention (Press et al., "Train Short, Test Long"), flash-attention style.

    out = softmax(q k^T * scale - slope_h * |i - j| [+ causal mask]) v

The linear bias replaces position embeddings, so a model trained on short sequences
extrapolates to longer ones. Here the bias is recomputed from (i, j) inside each tile
instead of being stored: no (H, Tq, Tk) bias, scores or probabilities ever reach memory.
The forward pass walks key tiles with an online softmax and keeps only each row's
log-sum-exp; the backward pass recomputes the probabilities tile by tile from it.

Queries are aligned to the end of the keys (query i sits at key position i + Tk - Tq),
which is what decoding with a cached prefix needs; with is_causal=True query i sees keys
j <= i + Tk - Tq, and fully masked key tiles are skipped by the loop bounds.

Matmuls run in the input dtype with fp32 accumulation (fp32 inputs in full fp32 unless
``torch.set_float32_matmul_precision`` allows TF32); softmax statistics are fp32.
float64 is not supported.
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import torch

from ..checks import check_bool, check_int, check_number, check_same_device, check_tensor
from . import backend, rivals
from .backend import tl, triton
from .custom_op import kernel_op

_MIN_HEAD_DIM = 16  # tl.dot needs every operand dimension >= 16
_MAX_HEAD_DIM = 128  # tiles of larger heads no longer fit an SM's registers and shared memory
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# exp2 is a single hardware instruction, exp is not: scores are carried in log2 units.
_LOG2E = tl.constexpr(1.4426950408889634)
_LN2 = tl.constexpr(0.6931471805599453)


# ----------------------------------------------------------------------------------------
# Triton kernels
#
# All kernels run on a (tiles, H, B) grid: heads and batch on their own axes so neither
# is limited to 65535 alone, and consecutive programs share one head's K and V in L2.
# Strides are runtime arguments; Triton specialises the ones equal to 1. Position strides come
# in units of UNIT elements (see _position_unit), which each kernel multiplies back first.
# The autotuners key on power-of-two buckets of Tq and Tk, not the lengths themselves,
# so that decoding (Tk grows by one per step) does not re-benchmark at every step; and on
# the fp32 dot precision, whose full-fp32 and TF32 tiles differ in shared memory and speed.
# ----------------------------------------------------------------------------------------

_KEY = ["TQ_BUCKET", "TK_BUCKET", "HEAD_DIM_PADDED", "CAUSAL", "INPUT_PRECISION"]
# Under the interpreter cost is per block operation: few, large tiles. 32 still makes
# sequences of 37 or 70 span several tiles, so masked, unmasked and skipped tiles all run.
_INTERPRETER_CONFIG = triton.Config({"BLOCK_M": 32, "BLOCK_N": 32})


def _configs(*tiles: tuple[int, int, int, int]) -> list[triton.Config]:
    """One config per (BLOCK_M, BLOCK_N, num_warps, num_stages)."""
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in tiles]


# Some configs exceed an H100's 227 KB of shared memory in the worst case (fp32 at D = 128);
# Triton's autotuner skips configs that fail to launch, and each list keeps at least two
# that fit every dtype and head dim (checked by compiling them for sm_90).
_FORWARD_CONFIGS = _configs((128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2), (128, 128, 8, 3), (64, 64, 4, 4),
                            (64, 128, 4, 3))
# dK/dV programs keep a key tile and two fp32 accumulators of it resident, so their key
# tile (BLOCK_N) is the large one; dQ programs keep a query tile (BLOCK_M) resident.
# With D = 128 dK/dV's 64-query tiles spill registers; its 32-query tile does not.
_DKDV_CONFIGS = _configs((64, 128, 8, 2), (64, 128, 8, 3), (32, 128, 8, 3), (64, 64, 4, 3), (64, 64, 4, 4))
_DQ_CONFIGS = _configs((128, 64, 8, 2), (128, 64, 8, 3), (64, 64, 4, 3), (64, 64, 4, 4))
_PREPROCESS_BLOCK_M = 64


@triton.jit
def _head_base(ptr, stride_b, stride_h):
    # int64: a (B, H, T, D) tensor may hold more than 2**31 elements.
    return ptr + tl.program_id(2).to(tl.int64) * stride_b + tl.program_id(1).to(tl.int64) * stride_h


@triton.jit
def _row_base(ptr, H, T):
    # Row statistics (LSE, delta) are contiguous (B, H, T) fp32 buffers.
    return ptr + (tl.program_id(2).to(tl.int64) * H + tl.program_id(1)) * T


@triton.jit
def _load_tile(base, rows, n_rows, stride_t, stride_d, offs_d,
               HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CHECK_ROWS: tl.constexpr):
    """A [rows, HEAD_DIM_PADDED] tile, zero outside the head dim (and outside n_rows if CHECK_ROWS).

    Masks are only built where they can be false, so full tiles load without any.
    """
    ptrs = base + rows[:, None] * stride_t + offs_d[None, :] * stride_d
    if CHECK_ROWS:
        if HEAD_DIM == HEAD_DIM_PADDED:
            tile = tl.load(ptrs, mask=rows[:, None] < n_rows, other=0.0)
        else:
            tile = tl.load(ptrs, mask=(rows[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    else:
        if HEAD_DIM == HEAD_DIM_PADDED:
            tile = tl.load(ptrs)
        else:
            tile = tl.load(ptrs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)
    return tile


@triton.jit
def _store_tile(base, rows, n_rows, stride_t, stride_d, offs_d, value,
                HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr):
    ptrs = base + rows[:, None] * stride_t + offs_d[None, :] * stride_d
    if HEAD_DIM == HEAD_DIM_PADDED:
        tl.store(ptrs, value.to(base.dtype.element_ty), mask=rows[:, None] < n_rows)
    else:
        tl.store(ptrs, value.to(base.dtype.element_ty), mask=(rows[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM))


@triton.jit
def _head_slope(slopes_ptr, n_pow2, HAS_SLOPES: tl.constexpr):
    """This program's head's slope (head tl.program_id(1)), in log2 units: times log2(e).

    With HAS_SLOPES the caller's slopes_ptr[h]; else the slopes of Press et al. (see
    alibi_slopes), computed here from h and n_pow2 = the largest power of two p <= H, so no
    slopes tensor is built on the host: 2^(-8 (h+1) / p) for h < p, then every other slope
    of 2p's sequence, 2^(-4 (2 (h-p) + 1) / p). The exponent's numerator is an integer and
    p a power of two, so the exponent is exact in fp32; only exp2 rounds.
    """
    h = tl.program_id(1)
    if HAS_SLOPES:
        slope = tl.load(slopes_ptr + h).to(tl.float32)
    else:
        numerator = tl.where(h < n_pow2, 8 * (h + 1), 4 * (2 * (h - n_pow2) + 1))
        # Correctly rounded division (plain / is the approximate div.full.f32): exact here.
        # n_pow2 * 1.0, not .to(): an int argument equal to 1 reaches the kernel as a constexpr.
        slope = tl.exp2(-tl.math.div_rn(numerator.to(tl.float32), n_pow2 * 1.0))
    return slope * _LOG2E


@triton.jit
def _biased_scores(scores, distance, slope, CAUSAL: tl.constexpr):
    """Add the ALiBi bias -slope * |distance| (slope in log2 units).

    Causal tiles only keep distance >= 0, where |distance| = distance: no abs needed.
    """
    if CAUSAL:
        return scores - slope * distance.to(tl.float32)
    else:
        return scores - slope * tl.abs(distance).to(tl.float32)


@triton.jit
def _key_bounds(start_m, Tq, Tk, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Key range [0, hi) a query tile attends to, and where its masked part begins.

    Tiles before ``full`` are inside [0, Tk) and, when causal, at or before every row's
    position, so they need no mask. Causal tiles past the last row's position are never visited.
    """
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M + Tk - Tq, Tk)
        full = tl.minimum(start_m + Tk - Tq + 1, Tk) // BLOCK_N * BLOCK_N
    else:
        hi = Tk
        full = Tk // BLOCK_N * BLOCK_N
    return full, hi


@triton.jit
def _query_tile_start(CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    # Causal query tiles further down see more keys: launch those first so the last wave
    # holds the short ones instead of leaving one long tile running alone.
    if CAUSAL:
        return (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        return tl.program_id(0) * BLOCK_M


@triton.jit
def _forward_tiles(acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_kd, stride_vt, stride_vd,
                   q_pos, slope, qk_scale, Tk, lo, hi, offs_d,
                   HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CAUSAL: tl.constexpr,
                   MASKED: tl.constexpr, INPUT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr):
    """Online softmax over key tiles [lo, hi): fold each tile into the running max, sum and output."""
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + tl.arange(0, BLOCK_N)
        k = _load_tile(k_base, keys, Tk, stride_kt, stride_kd, offs_d, HEAD_DIM, HEAD_DIM_PADDED, MASKED)
        v = _load_tile(v_base, keys, Tk, stride_vt, stride_vd, offs_d, HEAD_DIM, HEAD_DIM_PADDED, MASKED)
        distance = q_pos[:, None] - keys[None, :]
        s = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION) * qk_scale
        s = _biased_scores(s, distance, slope, CAUSAL)
        if MASKED:
            valid = keys[None, :] < Tk
            if CAUSAL:
                valid = valid & (distance >= 0)
            s = tl.where(valid, s, float("-inf"))
        # Every row sees key 0 in its first tile, so m_new is finite from the first tile on
        # and exp2(m_i - m_new) never meets -inf - -inf.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=INPUT_PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@backend.autotune(_FORWARD_CONFIGS, _KEY, _INTERPRETER_CONFIG)
@triton.jit
def _alibi_forward_kernel(
    q_ptr, k_ptr, v_ptr, slopes_ptr, out_ptr, lse_ptr,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_ob, stride_oh, stride_ot, stride_od,
    H, n_pow2, Tq, Tk, qk_scale, TQ_BUCKET, TK_BUCKET,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CAUSAL: tl.constexpr, HAS_SLOPES: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, UNIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # One program per query tile of one head: its output rows and their log-sum-exp.
    stride_qt, stride_kt, stride_vt, stride_ot = stride_qt * UNIT, stride_kt * UNIT, stride_vt * UNIT, stride_ot * UNIT
    start_m = _query_tile_start(CAUSAL, BLOCK_M)
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    q = _load_tile(_head_base(q_ptr, stride_qb, stride_qh), rows, Tq, stride_qt, stride_qd, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, True)
    k_base = _head_base(k_ptr, stride_kb, stride_kh)
    v_base = _head_base(v_ptr, stride_vb, stride_vh)
    slope = _head_slope(slopes_ptr, n_pow2, HAS_SLOPES)
    q_pos = rows + (Tk - Tq)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PADDED], tl.float32)
    full, hi = _key_bounds(start_m, Tq, Tk, CAUSAL, BLOCK_M, BLOCK_N)
    acc, m_i, l_i = _forward_tiles(acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_kd, stride_vt, stride_vd,
                                   q_pos, slope, qk_scale, Tk, 0, full, offs_d,
                                   HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, False, INPUT_PRECISION, BLOCK_N)
    acc, m_i, l_i = _forward_tiles(acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_kd, stride_vt, stride_vd,
                                   q_pos, slope, qk_scale, Tk, full, hi, offs_d,
                                   HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, True, INPUT_PRECISION, BLOCK_N)

    out = acc / l_i[:, None]
    _store_tile(_head_base(out_ptr, stride_ob, stride_oh), rows, Tq, stride_ot, stride_od, offs_d, out,
                HEAD_DIM, HEAD_DIM_PADDED)
    # Stored in natural-log units (the logsumexp of the scores), converted back in backward.
    tl.store(_row_base(lse_ptr, H, Tq) + rows, (m_i + tl.log2(l_i)) * _LN2, mask=rows < Tq)


@triton.jit
def _alibi_backward_preprocess_kernel(
    out_ptr, do_ptr, delta_ptr,
    stride_ob, stride_oh, stride_ot, stride_od,
    stride_dob, stride_doh, stride_dot, stride_dod,
    H, Tq,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, UNIT: tl.constexpr, BLOCK_M: tl.constexpr,
):
    # delta_i = sum_d dO_id * O_id = sum_j P_ij dP_ij: the softmax backward's row term.
    stride_ot, stride_dot = stride_ot * UNIT, stride_dot * UNIT
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    o = _load_tile(_head_base(out_ptr, stride_ob, stride_oh), rows, Tq, stride_ot, stride_od, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, True)
    do = _load_tile(_head_base(do_ptr, stride_dob, stride_doh), rows, Tq, stride_dot, stride_dod, offs_d,
                    HEAD_DIM, HEAD_DIM_PADDED, True)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(_row_base(delta_ptr, H, Tq) + rows, delta, mask=rows < Tq)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                stride_qt, stride_qd, stride_dot, stride_dod,
                keys, slope, qk_scale, Tq, Tk, lo, hi, offs_d,
                HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CAUSAL: tl.constexpr,
                MASKED: tl.constexpr, INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr):
    """Accumulate dK and dV of one key tile over query tiles [lo, hi), in transposed [keys, queries] form."""
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + tl.arange(0, BLOCK_M)
        q = _load_tile(q_base, rows, Tq, stride_qt, stride_qd, offs_d, HEAD_DIM, HEAD_DIM_PADDED, MASKED)
        do = _load_tile(do_base, rows, Tq, stride_dot, stride_dod, offs_d, HEAD_DIM, HEAD_DIM_PADDED, MASKED)
        if MASKED:
            lse = tl.load(lse_base + rows, mask=rows < Tq, other=0.0)
            delta = tl.load(delta_base + rows, mask=rows < Tq, other=0.0)
        else:
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        distance = (rows + (Tk - Tq))[None, :] - keys[:, None]
        s_t = tl.dot(k, tl.trans(q), input_precision=INPUT_PRECISION) * qk_scale
        s_t = _biased_scores(s_t, distance, slope, CAUSAL) - (lse * _LOG2E)[None, :]
        if MASKED:
            # Masked before exp2, so dropped entries give exactly 0 and never overflow.
            valid = rows[None, :] < Tq
            if CAUSAL:
                valid = valid & (distance >= 0)
            s_t = tl.where(valid, s_t, float("-inf"))
        p_t = tl.exp2(s_t)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=INPUT_PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=INPUT_PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=INPUT_PRECISION)
    return dk, dv


@backend.autotune(_DKDV_CONFIGS, _KEY, _INTERPRETER_CONFIG)
@triton.jit
def _alibi_backward_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, slopes_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dot, stride_dod,
    stride_dkb, stride_dkh, stride_dkt, stride_dkd,
    stride_dvb, stride_dvh, stride_dvt, stride_dvd,
    H, n_pow2, Tq, Tk, scale, qk_scale, TQ_BUCKET, TK_BUCKET,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CAUSAL: tl.constexpr, HAS_SLOPES: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, UNIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # One program per key tile: it owns those rows of dK and dV, so no atomics are needed.
    # Keys past Tk are not masked inside the loop: each key row only feeds its own
    # (unstored) dK and dV rows.
    stride_qt, stride_kt, stride_vt = stride_qt * UNIT, stride_kt * UNIT, stride_vt * UNIT
    stride_dot, stride_dkt, stride_dvt = stride_dot * UNIT, stride_dkt * UNIT, stride_dvt * UNIT
    start_n = tl.program_id(0) * BLOCK_N
    keys = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    k = _load_tile(_head_base(k_ptr, stride_kb, stride_kh), keys, Tk, stride_kt, stride_kd, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, True)
    v = _load_tile(_head_base(v_ptr, stride_vb, stride_vh), keys, Tk, stride_vt, stride_vd, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, True)
    q_base = _head_base(q_ptr, stride_qb, stride_qh)
    do_base = _head_base(do_ptr, stride_dob, stride_doh)
    lse_base = _row_base(lse_ptr, H, Tq)
    delta_base = _row_base(delta_ptr, H, Tq)
    slope = _head_slope(slopes_ptr, n_pow2, HAS_SLOPES)

    q_end = tl.cdiv(Tq, BLOCK_M) * BLOCK_M
    q_full = Tq // BLOCK_M * BLOCK_M
    if CAUSAL:
        # Query i sees key j when i >= j - (Tk - Tq): earlier query tiles are skipped, and
        # tiles whose first row sees the tile's last key need no causal mask.
        lo = tl.maximum(start_n - (Tk - Tq), 0) // BLOCK_M * BLOCK_M
        mid = tl.minimum(tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - (Tk - Tq), 0), BLOCK_M) * BLOCK_M, q_end)
    else:
        lo = 0
        mid = 0
    dk = tl.zeros([BLOCK_N, HEAD_DIM_PADDED], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM_PADDED], tl.float32)
    # Causal diagonal tiles, then full tiles, then the partial last query tile.
    dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                         stride_qt, stride_qd, stride_dot, stride_dod, keys, slope, qk_scale, Tq, Tk, lo, mid,
                         offs_d, HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, True, INPUT_PRECISION, BLOCK_M)
    dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                         stride_qt, stride_qd, stride_dot, stride_dod, keys, slope, qk_scale, Tq, Tk,
                         mid, tl.maximum(mid, q_full),
                         offs_d, HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, False, INPUT_PRECISION, BLOCK_M)
    dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                         stride_qt, stride_qd, stride_dot, stride_dod, keys, slope, qk_scale, Tq, Tk,
                         tl.maximum(mid, q_full), q_end,
                         offs_d, HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, True, INPUT_PRECISION, BLOCK_M)
    _store_tile(_head_base(dk_ptr, stride_dkb, stride_dkh), keys, Tk, stride_dkt, stride_dkd, offs_d, dk * scale,
                HEAD_DIM, HEAD_DIM_PADDED)
    _store_tile(_head_base(dv_ptr, stride_dvb, stride_dvh), keys, Tk, stride_dvt, stride_dvd, offs_d, dv,
                HEAD_DIM, HEAD_DIM_PADDED)


@triton.jit
def _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_kd, stride_vt, stride_vd,
              q_pos, slope, qk_scale, Tk, lo, hi, offs_d,
              HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CAUSAL: tl.constexpr,
              MASKED: tl.constexpr, INPUT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr):
    """Accumulate dQ of one query tile over key tiles [lo, hi)."""
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + tl.arange(0, BLOCK_N)
        k = _load_tile(k_base, keys, Tk, stride_kt, stride_kd, offs_d, HEAD_DIM, HEAD_DIM_PADDED, MASKED)
        v = _load_tile(v_base, keys, Tk, stride_vt, stride_vd, offs_d, HEAD_DIM, HEAD_DIM_PADDED, MASKED)
        distance = q_pos[:, None] - keys[None, :]
        s = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION) * qk_scale
        s = _biased_scores(s, distance, slope, CAUSAL) - lse[:, None]
        if MASKED:
            valid = keys[None, :] < Tk
            if CAUSAL:
                valid = valid & (distance >= 0)
            s = tl.where(valid, s, float("-inf"))
        p = tl.exp2(s)
        dp = tl.dot(do, tl.trans(v), input_precision=INPUT_PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=INPUT_PRECISION)
    return dq


@backend.autotune(_DQ_CONFIGS, _KEY, _INTERPRETER_CONFIG)
@triton.jit
def _alibi_backward_dq_kernel(
    q_ptr, k_ptr, v_ptr, slopes_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dot, stride_dod,
    stride_dqb, stride_dqh, stride_dqt, stride_dqd,
    H, n_pow2, Tq, Tk, scale, qk_scale, TQ_BUCKET, TK_BUCKET,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PADDED: tl.constexpr, CAUSAL: tl.constexpr, HAS_SLOPES: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, UNIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # One program per query tile: it owns those rows of dQ (a second pass over the keys
    # instead of atomics from the dK/dV kernel, so the result is deterministic).
    stride_qt, stride_kt, stride_vt = stride_qt * UNIT, stride_kt * UNIT, stride_vt * UNIT
    stride_dot, stride_dqt = stride_dot * UNIT, stride_dqt * UNIT
    start_m = _query_tile_start(CAUSAL, BLOCK_M)
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    q = _load_tile(_head_base(q_ptr, stride_qb, stride_qh), rows, Tq, stride_qt, stride_qd, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, True)
    do = _load_tile(_head_base(do_ptr, stride_dob, stride_doh), rows, Tq, stride_dot, stride_dod, offs_d,
                    HEAD_DIM, HEAD_DIM_PADDED, True)
    lse = tl.load(_row_base(lse_ptr, H, Tq) + rows, mask=rows < Tq, other=0.0) * _LOG2E
    delta = tl.load(_row_base(delta_ptr, H, Tq) + rows, mask=rows < Tq, other=0.0)
    k_base = _head_base(k_ptr, stride_kb, stride_kh)
    v_base = _head_base(v_ptr, stride_vb, stride_vh)
    slope = _head_slope(slopes_ptr, n_pow2, HAS_SLOPES)
    q_pos = rows + (Tk - Tq)

    dq = tl.zeros([BLOCK_M, HEAD_DIM_PADDED], tl.float32)
    full, hi = _key_bounds(start_m, Tq, Tk, CAUSAL, BLOCK_M, BLOCK_N)
    dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_kd, stride_vt, stride_vd,
                   q_pos, slope, qk_scale, Tk, 0, full, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, False, INPUT_PRECISION, BLOCK_N)
    dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_kd, stride_vt, stride_vd,
                   q_pos, slope, qk_scale, Tk, full, hi, offs_d,
                   HEAD_DIM, HEAD_DIM_PADDED, CAUSAL, True, INPUT_PRECISION, BLOCK_N)
    _store_tile(_head_base(dq_ptr, stride_dqb, stride_dqh), rows, Tq, stride_dqt, stride_dqd, offs_d, dq * scale,
                HEAD_DIM, HEAD_DIM_PADDED)


# ----------------------------------------------------------------------------------------
# Pure-PyTorch reference: the specification the kernels are tested against.
# ----------------------------------------------------------------------------------------


def _largest_power_of_two_at_most(n: int) -> int:
    """p = 2^floor(log2 n) for n >= 1 (1 for n = 0, which launches nothing), in Python ints."""
    return 1 << max(n.bit_length() - 1, 0)


def _geometric_slopes(n: int) -> list[float]:
    # 2^(-8/n * i) for i = 1..n, each power taken directly rather than by repeated products.
    return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]


def alibi_slopes(n_heads: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The per-head ALiBi slopes of Press et al., as a float32 tensor of shape (n_heads,).

    For a power of two n they are 2^(-8/n * i), i = 1..n. Otherwise, as in the paper,
    the slopes of the closest lower power of two p come first, followed by every other
    slope of 2p's sequence (the ones falling between them) until there are n_heads.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
        >>> alibi_slopes(12)[8:]  # 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
        tensor([0.7071, 0.3536, 0.1768, 0.0884])
    """
    check_int("n_heads", n_heads, low=1)
    # A new tensor per call, not a cached one: callers may modify it in place, and a cached
    # tensor would outlive the inference mode, fake mode or CUDA stream it was made under.
    # Building it from a list is a host-to-device copy on CUDA; alibi_attention's default
    # (slopes=None) avoids it by computing the slopes inside the kernels.
    return torch.tensor(_slope_values(n_heads), dtype=torch.float32, device=device)


@functools.lru_cache(maxsize=64)
def _slope_values(n_heads: int) -> tuple[float, ...]:
    """alibi_slopes' values as Python floats (immutable, so safe to cache)."""
    closest = _largest_power_of_two_at_most(n_heads)
    return tuple(_geometric_slopes(closest) + _geometric_slopes(2 * closest)[0::2][: n_heads - closest])


def alibi_attention_reference(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    slopes: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(query key^T * scale + bias [+ causal mask]) value in fp32 (fp64 for fp64 inputs, the truth the tests
    judge fp32 by) with the (H, Tq, Tk) bias materialised."""
    Tq, D = query.shape[2:]
    Tk = key.shape[2]
    device = query.device
    slopes = alibi_slopes(query.shape[1], device) if slopes is None else slopes
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    query_positions = torch.arange(Tq, device=device) + (Tk - Tq)
    distance = query_positions[:, None] - torch.arange(Tk, device=device)[None, :]
    bias = -slopes.to(compute)[:, None, None] * distance.abs().to(compute)
    scores = torch.matmul(query.to(compute), key.to(compute).transpose(-1, -2)) * scale + bias
    if is_causal:
        scores = scores.masked_fill(distance < 0, float("-inf"))
    probabilities = torch.softmax(scores, dim=-1)
    return torch.matmul(probabilities, value.to(compute)).to(query.dtype)


# ----------------------------------------------------------------------------------------
# Custom ops: torch.library registration, fake implementations and autograd
#
# The ops hold only the Triton path; the public function sends other devices to the
# reference, which PyTorch differentiates, compiles and exports by itself.
# ----------------------------------------------------------------------------------------


def _input_precision(dtype: torch.dtype) -> str:
    """How tl.dot multiplies fp32 tiles: PyTorch's own fp32 matmul setting decides.

    At the default ("highest") that is full fp32 on CUDA cores; after
    ``torch.set_float32_matmul_precision("high")`` it is TF32 on tensor cores.
    16-bit inputs always use tensor cores and ignore this.
    """
    if dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest":
        return "ieee"
    return "tf32"


def _launch_shape(q: torch.Tensor, k: torch.Tensor, scale: float, causal: bool, has_slopes: bool) -> dict:
    """The scalar and constexpr arguments every attention kernel shares."""
    H, Tq, D = q.shape[1:]
    Tk = k.shape[2]
    return dict(
        H=H, n_pow2=_largest_power_of_two_at_most(H), Tq=Tq, Tk=Tk, qk_scale=scale * math.log2(math.e),
        TQ_BUCKET=backend.next_power_of_2(Tq), TK_BUCKET=backend.next_power_of_2(Tk),
        HEAD_DIM=D, HEAD_DIM_PADDED=backend.next_power_of_2(D), CAUSAL=causal, HAS_SLOPES=has_slopes,
        INPUT_PRECISION=_input_precision(q.dtype),
    )


def _position_unit(*tensors: torch.Tensor) -> int:
    """The unit the kernels take position strides in: 8 where every tensor's is a multiple of 8 elements but
    not all of 16 (which a launch marks itself), else 1.

    A launch marks only multiples of 16, so at head dim 40 the compiler could not see that each position's
    row starts 16 bytes into an aligned block, and loaded 16 bits at a time: on sm_90 the forward took 191
    registers (1 CTA an SM, not 2), the preprocess 72, and dK/dV's 4-warp tiles spilled.
    """
    strides = [t.stride(2) for t in tensors]
    return 8 if all(s % 8 == 0 for s in strides) and not all(s % 16 == 0 for s in strides) else 1


def _strides(unit: int, *tensors: torch.Tensor) -> list[int]:
    """The (B, H, T, D) tensors' strides in turn, each position stride in units of ``unit`` elements."""
    return [s for t in tensors for s in (t.stride(0), t.stride(1), t.stride(2) // unit, t.stride(3))]


def _grid(length: int, heads: int, batch: int, block: str):
    return lambda meta: (backend.cdiv(length, meta[block]), heads, batch)


# slopes=None: the kernels compute Press et al.'s slopes from the head index, so the
# default path builds nothing from host data (no host-to-device copy for the host to wait
# on). The kernels then get q as a stand-in pointer, never read (HAS_SLOPES=False).
@kernel_op("fastcore_ops::alibi_attention")
def _alibi_attention_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: Optional[torch.Tensor], causal: bool, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    B, H, Tq, D = q.shape
    out = q.new_empty((B, H, Tq, D))
    lse = q.new_empty((B, H, Tq), dtype=torch.float32)
    if out.numel():
        unit = _position_unit(q, k, v, out)
        _alibi_forward_kernel[_grid(Tq, H, B, "BLOCK_M")](
            q, k, v, q if slopes is None else slopes, out, lse, *_strides(unit, q, k, v, out),
            UNIT=unit, **_launch_shape(q, k, scale, causal, slopes is not None))
    return out, lse


@_alibi_attention_op.register_fake
def _(q, k, v, slopes, causal, scale):
    B, H, Tq, D = q.shape
    return q.new_empty((B, H, Tq, D)), q.new_empty((B, H, Tq), dtype=torch.float32)


# Three launches and 7 GEMMs per (query tile, key tile) pair: the dK/dV kernel recomputes
# S^T = K Q^T and dP^T = V dO^T and accumulates dV += P^T dO and dK += dS^T Q; the dQ kernel
# recomputes S = Q K^T and dP = dO V^T and accumulates dQ += dS K. FlashAttention-2 does 5:
# it adds each tile's dS K into dQ with atomics from inside the dK/dV loop. We keep the
# deterministic second pass instead, because atomics
#   - make dQ depend on the order in which programs finish (fp32 addition is not
#     associative), so two runs on the same inputs give different gradients;
#   - need an fp32 dQ buffer that is zero-filled first (one more launch) and converted to the
#     input dtype afterwards (another), where the dQ kernel here writes dQ once, in place.
# The price is the 2 recomputed GEMMs per tile pair: 7 instead of 5, 40% more backward FLOPs
# than FlashAttention-2, which itself chooses the atomics.
@kernel_op("fastcore_ops::alibi_attention_backward")
def _alibi_attention_backward_op(
    grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
    lse: torch.Tensor, slopes: Optional[torch.Tensor], causal: bool, scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    dq = torch.empty_like(q)
    if q.numel() == 0:  # no queries: keys and values get a zero gradient, which no kernel writes
        return dq, torch.zeros_like(k), torch.zeros_like(v)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    shape = _launch_shape(q, k, scale, causal, slopes is not None)
    slopes = q if slopes is None else slopes  # a stand-in pointer, never read (HAS_SLOPES=False)
    delta = torch.empty_like(lse)
    unit = _position_unit(q, k, v, out, grad_out, dq, dk, dv)
    _alibi_backward_preprocess_kernel[(backend.cdiv(Tq, _PREPROCESS_BLOCK_M), H, B)](
        out, grad_out, delta, *_strides(unit, out, grad_out), H, Tq,
        HEAD_DIM=D, HEAD_DIM_PADDED=shape["HEAD_DIM_PADDED"], UNIT=unit, BLOCK_M=_PREPROCESS_BLOCK_M)
    _alibi_backward_dkdv_kernel[_grid(Tk, H, B, "BLOCK_N")](
        q, k, v, slopes, grad_out, lse, delta, dk, dv, *_strides(unit, q, k, v, grad_out, dk, dv),
        scale=scale, UNIT=unit, **shape)
    _alibi_backward_dq_kernel[_grid(Tq, H, B, "BLOCK_M")](
        q, k, v, slopes, grad_out, lse, delta, dq, *_strides(unit, q, k, v, grad_out, dq),
        scale=scale, UNIT=unit, **shape)
    return dq, dk, dv


@_alibi_attention_backward_op.register_fake
def _(grad_out, q, k, v, out, lse, slopes, causal, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _alibi_setup_context(ctx, inputs, output):
    q, k, v, slopes, ctx.causal, ctx.scale = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)
    # lse gets no gradient: without this, autograd would zero-fill a (B, H, Tq) gradient
    # for it on every backward, a launch whose result is never read.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(q, k, v, slopes, out, lse)  # slopes None: computed in the kernels


def _alibi_backward(ctx, grad_out, _grad_lse):
    if grad_out is None:  # out took no part in the loss (grads are not materialised)
        return None, None, None, None, None, None
    q, k, v, slopes, out, lse = ctx.saved_tensors
    dq, dk, dv = _alibi_attention_backward_op(grad_out, q, k, v, out, lse, slopes, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None, None  # slopes are fixed data: no gradient


_alibi_attention_op.register_autograd(_alibi_backward, setup_context=_alibi_setup_context)


# ----------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------


def _check_inputs(q, k, v, attn_mask, dropout_p, causal, scale, slopes) -> None:
    for name, t in (("query", q), ("key", k), ("value", v)):
        check_tensor(name, t, ndim=4)
    if slopes is not None:
        check_tensor("slopes", slopes)
        check_same_device(query=q, key=k, value=v, slopes=slopes)
    else:
        check_same_device(query=q, key=k, value=v)
    if attn_mask is not None:
        raise ValueError(
            f"alibi_attention computes its own bias and takes no attn_mask, got {type(attn_mask).__name__}; "
            f"pass is_causal=True for a causal mask, or use F.scaled_dot_product_attention for other masks"
        )
    if check_number("dropout_p", dropout_p, low=0, high=1) != 0:
        raise ValueError(
            f"alibi_attention applies no attention dropout (the kernel never stores the probabilities), "
            f"got dropout_p={dropout_p}; pass dropout_p=0.0"
        )
    if q.dtype not in _DTYPES:
        raise TypeError(
            f"query has dtype {q.dtype}, but alibi_attention computes in float16, bfloat16 or float32; "
            f"convert query, key and value with .float()"
        )
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"query, key and value must share one dtype, got query {q.dtype}, key {k.dtype}, value {v.dtype}; "
            f"convert them with .to(query.dtype)"
        )
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    if k.shape[:2] != (B, H) or k.shape[3] != D:
        raise ValueError(
            f"key must have shape (B, H, Tk, D) = ({B}, {H}, Tk, {D}) to match query of shape {tuple(q.shape)}, "
            f"got {tuple(k.shape)}"
        )
    if v.shape != k.shape:
        raise ValueError(f"value must have key's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if backend.use_triton(q):  # the PyTorch reference takes any head dim
        check_kernel_head_dim(D)
    check_bool("is_causal", causal)
    if causal and Tq > Tk:
        raise ValueError(
            f"causal attention aligns the Tq queries with the last Tq of the Tk keys, so it needs Tq <= Tk; "
            f"got Tq = {Tq} > Tk = {Tk}; pass more keys or is_causal=False"
        )
    if Tk == 0 and Tq > 0:
        raise ValueError(f"key and value hold no keys (Tk = 0) for Tq = {Tq} queries; attention needs at least one key")
    if slopes is not None:
        if tuple(slopes.shape) != (H,):
            raise ValueError(f"slopes must have shape (H,) = ({H},), one per head, got {tuple(slopes.shape)}")
        if slopes.requires_grad:
            raise ValueError("slopes requires grad, but ALiBi slopes are fixed data; pass slopes.detach()")
    if scale is not None and not math.isfinite(check_number("scale", scale, low=0, low_open=True)):
        raise ValueError(f"scale must be a finite number > 0, got {scale}")


def check_kernel_head_dim(head_dim: int) -> None:
    """ValueError unless the Triton kernel computes heads of ``head_dim`` (16 to 128): ``alibi_attention`` asks
    where the kernel runs, the alibi surgery of every model it operates (it may run on a GPU later).

        >>> check_kernel_head_dim(64)
    """
    if not _MIN_HEAD_DIM <= head_dim <= _MAX_HEAD_DIM:
        raise ValueError(
            f"the Triton kernel takes a head dim D = query.shape[-1] between {_MIN_HEAD_DIM} and {_MAX_HEAD_DIM}, "
            f"got {head_dim}; split or pad heads to a size in that range"
        )


def alibi_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    slopes: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention with ALiBi linear biases, without storing any (Tq, Tk) matrix.

    Takes ``F.scaled_dot_product_attention``'s arguments in its order, with its defaults
    (so pass ``is_causal=True`` for a decoder), then the keyword ``slopes``. The bias is
    ALiBi's own, so ``attn_mask`` must be None, and there is no attention dropout, so
    ``dropout_p`` must be 0: a ported call that relies on either is refused, not ignored.

    Args:
        query: (B, H, Tq, D); float16, bfloat16 or float32; any strides. Where the Triton kernel
            runs (CUDA tensors, or Triton's interpreter) 16 <= D <= 128; the CPU reference takes any D.
        key, value: (B, H, Tk, D), query's dtype and device. Queries are aligned to the end
            of the keys (query i at key position i + Tk - Tq), as when decoding with a cached
            prefix; causal attention needs Tq <= Tk.
        is_causal: query i sees only keys j <= i + Tk - Tq.
        scale: the scores' factor; default 1 / sqrt(D).
        slopes: (H,) per-head slopes; default ``alibi_slopes(H)``, which the kernels compute
            from the head index (no slopes tensor is built). Not differentiated.

    Returns the (B, H, Tq, D) output in query's dtype. Gradients flow to query, key and value.

    Example:
        >>> q, k, v = (torch.randn(2, 4, 48, 16, requires_grad=True) for _ in range(3))
        >>> out = alibi_attention(q, k, v, is_causal=True)  # slopes alibi_slopes(4)
        >>> out.shape
        torch.Size([2, 4, 48, 16])
        >>> out.sum().backward()
    """
    _check_inputs(query, key, value, attn_mask, dropout_p, is_causal, scale, slopes)
    D = query.shape[3]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    if rivals.kernel_runs("alibi_attention", query, causal=is_causal, keys=backend.size_bucket(key.shape[2]),
                          slopes="default" if slopes is None else "given"):
        # Default slopes (None) are computed inside the kernels: nothing is built from host data.
        slopes = None if slopes is None else slopes.to(torch.float32).contiguous()
        return _alibi_attention_op(query, key, value, slopes, is_causal, scale)[0]
    return alibi_attention_reference(query, key, value, is_causal=is_causal, scale=scale, slopes=slopes)
