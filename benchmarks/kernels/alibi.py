"""ALiBi attention cases: GPT-2 small's heads (B=8 on a GPU, H=12, D=64), causal, T of 512, 2048 and 4096.

Timed against two materialised-bias paths and one speed limit:
- ``reference``: ``alibi_attention_reference``, softmax(q kᵀ·scale + bias) v in fp32, the bias
  built on every call (what a model without a fused kernel does);
- ``sdpa_bias``: ``F.scaled_dot_product_attention`` with the (H, T, T) bias and causal mask as an
  explicit ``attn_mask``, built once and cached (the strongest unfused path: PyTorch's efficient
  attention with an additive mask);
- ``sdpa``: ``F.scaled_dot_product_attention(is_causal=True)`` with no bias at all, which runs
  FlashAttention: the speed limit ALiBi should come close to;
- ``flex``: FlexAttention, compiled, with the ALiBi bias as its score modification and a causal
  block mask (on CUDA, where the installed torch has it: its backward does not run on a CPU).

The goals are against the last two: what a user with a recent torch would otherwise run, and the limit.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import _get_current_dispatch_mode

from fastcore_ops.kernels import alibi as kernels
from fastcore_ops.kernels import alibi_attention, alibi_slopes
from fastcore_ops.kernels.alibi import alibi_attention_reference

from . import Case, CorrectnessCase, Goal, KernelSpec, Traffic, element_size
from .compile_cases import KernelCase, multiples_of_16

HEADS, HEAD_DIM = 12, 64
# A short length, where launches and memory decide, and two where the matmuls do (docs/kernels.md).
GPU_BATCH, GPU_LENGTHS = 8, (512, 2048, 4096)
LONG = 2048  # from here attention is compute-bound on an H100 or H200
# The CPU reference stores B·H·T² fp32 scores several times over; 2048 keeps it within memory and minutes.
CPU_BATCH, CPU_LENGTHS = 1, (512, 1024, 2048)
TINY = 1, (24,)  # the small mode's, which runs Triton's interpreter: not a multiple of a block


def _attended_pairs(tq: int, tk: int, causal: bool) -> int:
    """(query, key) pairs that take part: query i sees keys j <= i + tk - tq when causal."""
    if not causal:
        return tq * tk
    return tq * (tk - tq) + tq * (tq + 1) // 2


def _flops(b: int, h: int, tq: int, tk: int, d: int, causal: bool) -> tuple[float, float]:
    """Useful matmul FLOPs: forward QKᵀ and PV (2 each per pair and dim); backward two and a half times that."""
    pairs = b * h * _attended_pairs(tq, tk, causal)
    return 4.0 * pairs * d, 12.0 * pairs * d


def _traffic(b: int, h: int, tq: int, tk: int, d: int, e: int, causal: bool) -> tuple[Traffic, Traffic]:
    """Modelled DRAM bytes; e is the inputs' element size.

    Ours reads q, k, v and writes the output and an fp32 log-sum-exp per row; the backward reads
    them again with the output gradient, and writes dq, dk and dv (dk, dv accumulated on chip).
    The reference works in fp32 on (B, H, Tq, Tk) matrices: scores, biased scores, mask fill,
    softmax and the probabilities each cross DRAM, and the backward retraces them.
    """
    nq, nk, s, p2 = b * h * tq * d, b * h * tk * d, b * h * tq * tk, tq * tk
    rows = b * h * tq
    c, upcast = int(causal), int(e < 4)
    ours = Traffic(
        forward=2 * e * nq + 2 * e * nk + 4 * rows,
        forward_backward=9 * e * nq + 8 * e * nk + 24 * rows,
        temporaries=8 * rows,  # log-sum-exp and the backward's rowwise dot(o, do)
    )
    nqk = nq + nk
    reference = Traffic(
        forward=(36 + 8 * c) * s + (40 + 10 * c) * p2 + 4 * h * p2 + 8 * nqk + upcast * (e + 4) * 2 * nqk,
        forward_backward=((72 + 16 * c) * s + (40 + 11 * c) * p2 + 4 * h * p2 + 24 * nqk
                          + upcast * (e + 4) * 4 * nqk),
        temporaries=12 * s + 4 * h * p2 + upcast * 4 * (nq + 2 * nk),
    )
    return ours, reference


@functools.lru_cache(maxsize=4)
def _cached_slopes(heads: int, device: torch.device) -> torch.Tensor:
    """The slopes made once, as a user's module would: made per call they are a host-to-device copy, which no
    CUDA graph can capture (the reference and FlexAttention went uncaptured in reports/lent-gpu-h200-20261204)."""
    return alibi_slopes(heads, device)


@functools.lru_cache(maxsize=1)
def _cached_bias_mask(heads: int, tq: int, tk: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The (H, Tq, Tk) additive mask that sdpa_bias needs: -slope·distance, -inf above the diagonal."""
    positions = torch.arange(tq, device=device)[:, None] + (tk - tq) - torch.arange(tk, device=device)[None, :]
    bias = -_cached_slopes(heads, device)[:, None, None] * positions.abs()
    return bias.masked_fill(positions < 0, float("-inf")).to(dtype)


def _sdpa_with_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    mask = _cached_bias_mask(q.shape[1], q.shape[2], k.shape[2], q.dtype, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _sdpa_without_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@functools.cache
def _compiled_flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


@functools.lru_cache(maxsize=8)
def _causal_block_mask(tq: int, tk: int, device: torch.device):
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, q, k: q + (tk - tq) >= k, None, None, tq, tk, device=device)


def flex_alibi(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, compiled: bool = True) -> torch.Tensor:
    """Causal ALiBi attention through FlexAttention: the bias as a score modification, the mask as block sparsity.

    ``compiled``: through ``torch.compile`` (how FlexAttention is fast), else eager (a CPU check of its values).
    """
    from torch.nn.attention.flex_attention import flex_attention

    tq, tk = q.shape[2], k.shape[2]
    slopes = _cached_slopes(q.shape[1], q.device)

    def alibi_bias(score, b, h, query, key):
        return score - slopes[h] * (query + (tk - tq) - key).abs()

    if compiled and _get_current_dispatch_mode() is not None:
        # Under a dispatch mode (the launch recorder's) Dynamo traces FlexAttention's dense fallback, fails, and
        # keeps failing for later calls (reports/lent-gpu-h200-20261204): refuse before compiling anything.
        raise NotImplementedError("compiled FlexAttention cannot run under a dispatch mode")
    attend = _compiled_flex_attention() if compiled else flex_attention
    return attend(q, k, v, score_mod=alibi_bias, block_mask=_causal_block_mask(tq, tk, q.device))


def _flex_available(device: torch.device) -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return device.type == "cuda"


def cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    """The timed sizes (GPT-2 small's: ``batch`` is the CNN kernels')."""
    on_gpu = device.type == "cuda"
    batch, lengths = TINY if tiny else (GPU_BATCH, GPU_LENGTHS) if on_gpu else (CPU_BATCH, CPU_LENGTHS)
    result = []
    for length in lengths:
        shape = (batch, HEADS, length, HEAD_DIM)

        def make(shape=shape):
            return tuple(torch.randn(shape, device=device, dtype=dtype).requires_grad_() for _ in range(3))

        ours, reference = _traffic(batch, HEADS, length, length, HEAD_DIM, element_size(dtype), causal=True)
        result.append(Case(
            "alibi_attention", f"{batch}x{HEADS}x{length}x{HEAD_DIM} causal", make,
            _ours, _reference, ours, reference,
            flops=_flops(batch, HEADS, length, length, HEAD_DIM, causal=True),
            others={"sdpa_bias": _sdpa_with_bias, "sdpa": _sdpa_without_bias,
                    **({"flex": flex_alibi} if _flex_available(device) else {})},
            shape=shape,
        ))
    return result


def _ours(q, k, v):
    return alibi_attention(q, k, v, is_causal=True)


def _reference(q, k, v):
    return alibi_attention_reference(q, k, v, is_causal=True, slopes=_cached_slopes(q.shape[1], q.device))


def correctness_cases(small: bool) -> list[CorrectnessCase]:
    shapes = [(1, 4, 33, 32)] if small else [(2, 12, 1000, 64), (1, 8, 257, 128), (3, 4, 33, 32)]
    result = []
    for batch, heads, length, head_dim in shapes:
        def make(dtype, device, shape=(batch, length, heads, head_dim)):  # (B, T, H, D), as GPT code holds them
            return [torch.randn(shape, device=device, dtype=dtype).requires_grad_() for _ in range(3)]

        for causal in (True, False):
            result.append(CorrectnessCase(
                "alibi_attention", f"{batch}x{heads}x{length}x{head_dim}{' causal' if causal else ''}",
                "transposed (B, T, H, D)", make, lambda leaves: tuple(t.transpose(1, 2) for t in leaves),
                lambda q, k, v, causal=causal: alibi_attention(q, k, v, is_causal=causal),
                lambda q, k, v, causal=causal: alibi_attention_reference(q, k, v, is_causal=causal)))
    return result


def _long(case: Case) -> bool:
    return case.shape[2] >= LONG


def _step_inputs(device, dtype, tiny):
    shape = (1, 2, 16, 16) if tiny else (GPU_BATCH, HEADS, 2048, HEAD_DIM)
    return tuple(torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))


def _position_unit(head_dim: int) -> int:
    """The unit the op passes position strides in (kernels._position_unit) on contiguous tensors."""
    return kernels._position_unit(torch.empty(1, 1, 1, head_dim, device="meta"))


def _launch(names: list[str], head_dim: int) -> dict[str, int]:
    """The integer arguments of GPT-2 small's attention (12 heads, 1024 positions) at this head dim, on
    contiguous (B, H, T, D) tensors: every stride but the head dim's, which is 1, the position's in units
    of UNIT elements, as the op passes it."""
    heads, length = 12, 1024
    strides = {"b": heads * length * head_dim, "h": length * head_dim, "t": head_dim // _position_unit(head_dim)}
    values = {"H": heads, "n_pow2": kernels._largest_power_of_two_at_most(heads), "Tq": length, "Tk": length,
              "TQ_BUCKET": length, "TK_BUCKET": length}
    values.update({name: strides[name[-1]] for name in names if name.startswith("stride_") and name[-1] in strides})
    return {name: value for name, value in values.items() if name in names}


def _compile_cases():
    data, stats = "bf16", "fp32"  # bf16 q, k, v and gradients; fp32 slopes (when given), LSE and delta
    pointers = {
        "q_ptr": data, "k_ptr": data, "v_ptr": data, "out_ptr": data, "do_ptr": data,
        "dq_ptr": data, "dk_ptr": data, "dv_ptr": data,
        "slopes_ptr": stats, "lse_ptr": stats, "delta_ptr": stats,
    }
    # The CTAs an SM is meant to hold (docs/kernels.md): two of the forward, one of either backward kernel.
    attention = ((kernels._alibi_forward_kernel, 2), (kernels._alibi_backward_dkdv_kernel, 1),
                 (kernels._alibi_backward_dq_kernel, 1))
    # Head dim 64 needs no head-dim masks, 40 (padded to 64) does; causal and not. Slopes
    # computed in the kernels (the default: slopes_ptr is then q, never read) or given.
    for head_dim, causal, has_slopes in ((64, True, False), (64, False, False), (40, True, False), (64, True, True)):
        constexprs = {"HEAD_DIM": head_dim, "HEAD_DIM_PADDED": 64, "CAUSAL": causal, "HAS_SLOPES": has_slopes,
                      "INPUT_PRECISION": "tf32", "UNIT": _position_unit(head_dim)}
        for kernel, ctas_per_sm in attention:
            names = kernel.fn.arg_names
            kernel_pointers = {n: t for n, t in pointers.items() if n in names}
            if not has_slopes:
                kernel_pointers["slopes_ptr"] = data
            yield KernelCase(
                kernel, kernel_pointers, constexprs,
                floats=("qk_scale", "scale"),
                unit_strides=tuple(n for n in names if n.startswith("stride_") and n.endswith("d")),  # head dim
                divisible=multiples_of_16(_launch(names, head_dim)), ctas_per_sm=ctas_per_sm,
            )
    for head_dim in (64, 40):
        yield KernelCase(
            kernels._alibi_backward_preprocess_kernel, {"out_ptr": data, "do_ptr": data, "delta_ptr": stats},
            {"HEAD_DIM": head_dim, "HEAD_DIM_PADDED": 64, "UNIT": _position_unit(head_dim),
             "BLOCK_M": kernels._PREPROCESS_BLOCK_M},
            unit_strides=("stride_od", "stride_dod"),
            divisible=multiples_of_16(_launch(kernels._alibi_backward_preprocess_kernel.arg_names, head_dim)),
        )


# The rival a user would run: SDPA with the ALiBi bias as a mask built once (the speed limit, SDPA
# without a bias, and FlexAttention are timed beside it in the benchmark cases).
SPEC = KernelSpec("alibi_attention", _ours, _sdpa_with_bias, _step_inputs, forward_launches=1, backward_launches=3,
                  benchmark_cases=cases, correctness_cases=correctness_cases, compile_cases=_compile_cases,
                  goals=(Goal("flex", 1.0, "at least FlexAttention's speed with ALiBi as its score modification"),
                         Goal("sdpa", 1 / 1.5, "within 1.5x of SDPA's flash path without a bias, from T = 2048",
                              applies_to=_long)),
                  rival_text="SDPA with the ALiBi bias as a mask built once",
                  launches_text="backward: row terms, dK and dV, dQ")
