"""ALiBi attention against its PyTorch reference: slopes, values, gradients, shapes, dtypes, errors."""

import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
import triton
from hypothesis import given, settings
from hypothesis import strategies as st

from fastcore_ops.kernels import alibi_attention, alibi_slopes
from fastcore_ops.kernels import alibi as alibi_module
from fastcore_ops.kernels.alibi import alibi_attention_reference
from tests.conftest import DEVICE, FLOAT_DTYPES, TOLERANCES
from tests.hang_guard import HANG_GUARD_S

# (B, H, Tq, Tk, D). Lengths 37 and 70 are not multiples of any tile size; Tq < Tk puts
# the queries after a cached prefix; every D from 16 to 128 is allowed, 40 pads to 64.
SHAPES = [
    (1, 1, 1, 1, 16),
    (2, 2, 37, 37, 40),
    (1, 2, 70, 70, 64),
    (1, 2, 20, 70, 128),
    (1, 3, 1, 37, 64),  # decoding one token against a cache
]


def _qkv(B, H, Tq, Tk, D, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Tq, D, generator=g)
    k = torch.randn(B, H, Tk, D, generator=g)
    v = torch.randn(B, H, Tk, D, generator=g)
    return tuple(t.to(device=device, dtype=dtype).requires_grad_() for t in (q, k, v))


def _compare(q, k, v, causal=True, slopes=None, scale=None, grad_out=None):
    """Forward and dq, dk, dv against the reference (see _assert_close)."""
    dtype = q.dtype
    out = alibi_attention(q, k, v, is_causal=causal, scale=scale, slopes=slopes)
    if grad_out is None:
        grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device, dtype)
    out.backward(grad_out)
    assert out.dtype == dtype and out.shape == q.shape
    ours = (out, q.grad, k.grad, v.grad)
    references = {}
    for precision in (torch.float32, torch.float64):
        q_ref, k_ref, v_ref = (t.detach().to(precision).requires_grad_() for t in (q, k, v))
        out_ref = alibi_attention_reference(q_ref, k_ref, v_ref, is_causal=causal, scale=scale, slopes=slopes)
        out_ref.backward(grad_out.to(precision))
        references[precision] = (out_ref, q_ref.grad, k_ref.grad, v_ref.grad)
    for name, *tensors in zip(("out", "dq", "dk", "dv"), ours, *references.values()):
        _assert_close(name, *tensors)
    return out


def _assert_close(name, ours, fp32_reference, truth):
    """16-bit results within TOLERANCES of the fp32 reference rounded to their dtype. An fp32 result is judged
    against the fp64 truth, as FlashAttention's tests judge theirs: at most twice as far from it as the fp32
    reference itself (which sums in another order and errs as much), plus fp32's tolerance. Against the fp32
    reference alone, one sharp softmax on a GPU (scale 0.7, slope 1.5) left 4 of 7,104 dq entries 1.7e-5 off."""
    if ours.dtype != torch.float32:
        torch.testing.assert_close(ours, fp32_reference.to(ours.dtype), **TOLERANCES[ours.dtype],
                                   msg=lambda message: f"{name}: {message}")
        return
    error = (ours.double() - truth).abs().max().item()
    allowed = 2 * (fp32_reference.double() - truth).abs().max().item() + TOLERANCES[torch.float32]["atol"]
    assert error <= allowed, f"{name}: {error:.3g} from the fp64 reference, more than the {allowed:.3g} allowed"


# ----------------------------------------------------------------------------------------
# Slopes
# ----------------------------------------------------------------------------------------


def test_slopes_for_eight_heads_are_geometric():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([1 / 2 ** i for i in range(1, 9)]), rtol=0, atol=0)


def test_slopes_for_twelve_heads_interleave_the_sixteen_head_sequence():
    # 8 heads' slopes 2^-1..2^-8, then 16 heads' 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    expected = [2.0 ** -i for i in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]
    slopes = alibi_slopes(12)
    assert slopes.dtype == torch.float32 and slopes.shape == (12,)
    torch.testing.assert_close(slopes, torch.tensor(expected), rtol=1e-7, atol=0)


def test_slopes_for_twenty_heads_and_other_counts():
    expected = [2.0 ** (-0.5 * i) for i in range(1, 17)] + [2 ** -0.25, 2 ** -0.75, 2 ** -1.25, 2 ** -1.75]
    torch.testing.assert_close(alibi_slopes(20), torch.tensor(expected), rtol=1e-7, atol=0)
    torch.testing.assert_close(alibi_slopes(1), torch.tensor([2.0 ** -8]))
    torch.testing.assert_close(alibi_slopes(3), torch.tensor([2.0 ** -4, 2.0 ** -8, 2.0 ** -2]))
    assert alibi_slopes(5, device="meta").device.type == "meta"
    with pytest.raises(ValueError, match="n_heads must be an int >= 1, got 0"):
        alibi_slopes(0)
    with pytest.raises(TypeError, match="n_heads must be an int >= 1, got float 8.0"):
        alibi_slopes(8.0)


def test_reference_matches_sdpa_with_a_hand_built_bias(device):
    # The reference's reading of the spec, checked independently: query i sits at key
    # position i + Tk - Tq, the bias is -slope * distance, later keys are masked.
    B, H, Tq, Tk, D = 1, 2, 3, 5, 16
    q, k, v = (t.detach() for t in _qkv(B, H, Tq, Tk, D, torch.float32, device))
    slopes = torch.tensor([0.5, 0.125], device=device)
    mask = torch.full((H, Tq, Tk), float("-inf"), device=device)
    for h in range(H):
        for i in range(Tq):
            for j in range(i + Tk - Tq + 1):
                mask[h, i, j] = -slopes[h] * (i + Tk - Tq - j)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(alibi_attention_reference(q, k, v, is_causal=True, slopes=slopes), expected)


# ----------------------------------------------------------------------------------------
# Values and gradients
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_reference(shape, causal, dtype, device):
    _compare(*_qkv(*shape, dtype, device), causal)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_more_queries_than_keys_without_causal_mask(dtype, device):
    _compare(*_qkv(1, 2, 70, 37, 16, dtype, device), causal=False)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_custom_slopes_and_scale(causal, device):
    q, k, v = _qkv(1, 3, 37, 50, 64, torch.float32, device)
    # A zero slope (no bias), a steep one, and a large scale that sharpens the softmax.
    slopes = torch.tensor([0.0, 1.5, 0.01], dtype=torch.float64, device=device)
    _compare(q, k, v, causal, slopes, scale=0.7)


def test_defaults_are_sdpa_non_causal_paper_slopes_and_inverse_sqrt_scale(device):
    q, k, v = (t.detach() for t in _qkv(1, 4, 9, 9, 32, torch.float32, device))
    explicit = alibi_attention(q, k, v, None, 0.0, False, 1 / math.sqrt(32), slopes=alibi_slopes(4, device))
    torch.testing.assert_close(alibi_attention(q, k, v), explicit, rtol=0, atol=0)
    causal = alibi_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(causal, alibi_attention_reference(q, k, v, is_causal=True), **TOLERANCES[torch.float32])
    assert not torch.allclose(causal, explicit)


@pytest.mark.parametrize("heads,causal", [(1, True), (3, False), (4, True), (6, True), (8, False), (12, True)],
                         ids=["1-causal", "3-full", "4-causal", "6-causal", "8-full", "12-causal"])
def test_default_slopes_computed_in_the_kernels_match_the_reference(heads, causal, device):
    # slopes=None: the kernels compute Press et al.'s slopes from the head index, the
    # interleaved ones of head counts that are not powers of two (3, 6, 12) included.
    # Tk = 70 makes biases up to 69 slopes, so a wrong slope shows in values and gradients.
    _compare(*_qkv(1, heads, 37, 70, 16, torch.float32, device, seed=heads), causal)


@pytest.mark.parametrize("heads", [1, 3, 6, 12])
def test_default_slopes_are_alibi_slopes_to_an_ulp(heads, device):
    # With q = 0 the scores are the bias alone, so the log-sum-exp depends on the slopes
    # only: lse_i = log sum_j exp(-slope * |i + Tk - Tq - j|), here checked in float64.
    Tq, Tk, D = 3, 40, 16
    q = torch.zeros(1, heads, Tq, D, device=device)
    k, v = (torch.randn(1, heads, Tk, D, device=device) for _ in range(2))
    _, lse = torch.ops.fastcore_ops.alibi_attention(q, k, v, None, False, 0.25)
    _, lse_given = torch.ops.fastcore_ops.alibi_attention(q, k, v, alibi_slopes(heads, device), False, 0.25)
    distance = (torch.arange(Tq, device=device)[:, None] + Tk - Tq - torch.arange(Tk, device=device)).abs()
    expected = torch.logsumexp(-alibi_slopes(heads, device).double()[:, None, None] * distance, dim=-1)
    torch.testing.assert_close(lse[0].double(), expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(lse, lse_given, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_given_slopes_override_the_default_for_any_head_count(causal, device):
    q, k, v = _qkv(2, 6, 37, 45, 32, torch.float32, device)
    slopes = torch.tensor([0.9, 0.0, 0.3, 2.0, 0.05, 0.6], device=device)
    out = _compare(q, k, v, causal, slopes)
    assert not torch.allclose(out, alibi_attention(q, k, v, is_causal=causal))


def test_backward_of_an_unused_output_returns_no_gradients():
    # Gradients are not materialised (tests/kernels/test_host_side.py: no zero-fills), so
    # autograd may pass None for the output's gradient.
    assert alibi_module._alibi_backward(None, None, None) == (None,) * 6


def test_stored_log_sum_exp_is_that_of_the_biased_scores(device):
    q, k, v = (t.detach() for t in _qkv(1, 2, 37, 45, 40, torch.float32, device))
    slopes, scale = alibi_slopes(2, device), 0.2
    _, lse = torch.ops.fastcore_ops.alibi_attention(q, k, v, slopes, True, scale)
    distance = torch.arange(37, device=device)[:, None] + 8 - torch.arange(45, device=device)
    scores = (q @ k.transpose(-1, -2)) * scale - slopes[:, None, None] * distance.abs()
    expected = torch.logsumexp(scores.masked_fill(distance < 0, float("-inf")), dim=-1)
    torch.testing.assert_close(lse, expected, rtol=1e-5, atol=1e-5)


def test_any_strides_and_a_broadcast_gradient(device):
    # (B, T, H, D) projections viewed as (B, H, T, D), and out.sum()'s stride-0 gradient.
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 33, 2, 24, generator=g).to(device).transpose(1, 2).requires_grad_() for _ in range(3))
    assert not q.is_contiguous()
    out = alibi_attention(q, k, v, is_causal=True)
    out.sum().backward()
    q_ref, k_ref, v_ref = (t.detach().clone().requires_grad_() for t in (q, k, v))
    expected = alibi_attention_reference(q_ref, k_ref, v_ref, is_causal=True)
    expected.sum().backward()
    torch.testing.assert_close(out, expected, **TOLERANCES[torch.float32])
    for t, ref in ((q, q_ref), (k, k_ref), (v, v_ref)):
        torch.testing.assert_close(t.grad, ref.grad, **TOLERANCES[torch.float32])


@pytest.mark.skipif(not (alibi_module.backend.INTERPRETING or torch.cuda.is_available()),
                    reason="forces the Triton kernels' tile sizes, so needs the kernels to run")
@pytest.mark.parametrize("block_m,block_n", [(16, 32), (32, 16)])
def test_every_causal_offset_across_unequal_tiles(block_m, block_n, device, monkeypatch):
    # The loop bounds sort tiles into skipped, masked and unmasked ones by where the
    # diagonal falls; an off-by-one there shows only for some offsets Tk - Tq. Sweep one
    # period of them, with BLOCK_M != BLOCK_N both ways (one config runs untuned).
    config = [triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n})]
    for kernel in ("_alibi_forward_kernel", "_alibi_backward_dkdv_kernel", "_alibi_backward_dq_kernel"):
        monkeypatch.setattr(getattr(alibi_module, kernel), "configs", config)
    for offset in range(max(block_m, block_n) + 1):
        _compare(*_qkv(1, 1, 19, 19 + offset, 16, torch.float32, device, seed=offset), causal=True)
    for tq, tk in ((19, 50), (50, 19), (32, 32)):
        _compare(*_qkv(1, 1, tq, tk, 16, torch.float32, device), causal=False)


@settings(max_examples=10, deadline=None)
@given(
    b=st.integers(1, 2), h=st.integers(1, 3), tq=st.integers(1, 48), extra=st.integers(0, 30),
    d=st.integers(16, 128), causal=st.booleans(),
)
def test_random_shapes(b, h, tq, extra, d, causal):
    # Without the causal mask the keys may also be fewer than the queries.
    tk = tq + extra if causal else max(1, tq + extra - 15)
    _compare(*_qkv(b, h, tq, tk, d, torch.float32, DEVICE, seed=tq * 131 + d), causal)


@pytest.mark.parametrize("shape", [(0, 2, 5, 5, 16), (2, 0, 5, 5, 16), (1, 2, 0, 5, 16), (1, 2, 0, 0, 16)], ids=str)
def test_empty_inputs_give_empty_outputs(shape, device):
    q, k, v = _qkv(*shape, torch.float32, device)
    out = alibi_attention(q, k, v)
    assert out.shape == q.shape
    out.sum().backward()
    # Keys no query attends to get a zero gradient.
    for t in (q, k, v):
        assert t.grad.shape == t.shape and not t.grad.any()


# ----------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------


def _t(*shape, dtype=torch.float32, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)


@pytest.mark.parametrize(
    "args,kwargs,error,match",
    [
        ((_t(2, 5, 16), _t(2, 5, 16), _t(2, 5, 16)), {}, ValueError, "query must have 4 dimensions"),
        ((_t(1, 2, 5, 16), _t(2, 5, 16), _t(1, 2, 5, 16)), {}, ValueError, "key must have 4 dimensions"),
        (([[1.0]], _t(1, 2, 5, 16), _t(1, 2, 5, 16)), {}, TypeError, "query must be a torch.Tensor"),
        ((_t(1, 2, 5, 16, dtype=torch.int64),) * 3, {}, TypeError, "query must be a floating tensor"),
        ((_t(1, 2, 5, 16, dtype=torch.float64),) * 3, {}, TypeError, r"float64.*float16, bfloat16 or float32"),
        ((_t(1, 2, 5, 16), _t(1, 2, 5, 16, dtype=torch.float16), _t(1, 2, 5, 16)), {}, TypeError,
         "query, key and value must share one dtype, got query torch.float32, key torch.float16"),
        ((_t(1, 2, 5, 16), _t(1, 2, 5, 16, device="meta"), _t(1, 2, 5, 16)), {}, ValueError, "one device"),
        ((_t(1, 2, 5, 16), _t(2, 2, 5, 16), _t(2, 2, 5, 16)), {}, ValueError,
         r"key must have shape \(B, H, Tk, D\) = \(1, 2, Tk, 16\)"),
        ((_t(1, 2, 5, 16), _t(1, 3, 5, 16), _t(1, 3, 5, 16)), {}, ValueError, r"\(1, 2, Tk, 16\).*got \(1, 3, 5, 16\)"),
        ((_t(1, 2, 5, 16), _t(1, 2, 5, 32), _t(1, 2, 5, 32)), {}, ValueError, r"\(1, 2, Tk, 16\)"),
        ((_t(1, 2, 5, 16), _t(1, 2, 5, 16), _t(1, 2, 6, 16)), {}, ValueError,
         r"value must have key's shape \(1, 2, 5, 16\)"),
        ((_t(1, 2, 6, 16), _t(1, 2, 5, 16), _t(1, 2, 5, 16)), {"is_causal": True}, ValueError,
         "needs Tq <= Tk; got Tq = 6 > Tk = 5; pass more keys or is_causal=False"),
        ((_t(1, 2, 3, 16), _t(1, 2, 0, 16), _t(1, 2, 0, 16)), {}, ValueError, "no keys"),
        ((_t(1, 2, 5, 16),) * 3, {"is_causal": 1}, TypeError, "is_causal must be a bool, got int 1"),
        ((_t(1, 2, 5, 16),) * 3, {"attn_mask": _t(5, 5)}, ValueError, "takes no attn_mask, got Tensor; pass is_causal"),
        ((_t(1, 2, 5, 16),) * 3, {"dropout_p": 0.1}, ValueError, "no attention dropout.*got dropout_p=0.1"),
        ((_t(1, 2, 5, 16),) * 3, {"dropout_p": "0"}, TypeError, r"dropout_p must be a number in \[0, 1\], got str"),
        ((_t(1, 2, 5, 16),) * 3, {"slopes": _t(3)}, ValueError, r"slopes must have shape \(H,\) = \(2,\).*got \(3,\)"),
        ((_t(1, 2, 5, 16),) * 3, {"slopes": _t(1, 2)}, ValueError, r"slopes must have shape \(H,\)"),
        ((_t(1, 2, 5, 16),) * 3, {"slopes": _t(2, dtype=torch.int64)}, TypeError, "slopes must be a floating"),
        ((_t(1, 2, 5, 16),) * 3, {"slopes": _t(2, device="meta")}, ValueError, "slopes on meta"),
        ((_t(1, 2, 5, 16),) * 3, {"slopes": _t(2).requires_grad_()}, ValueError, r"slopes.detach\(\)"),
        ((_t(1, 2, 5, 16),) * 3, {"scale": 0.0}, ValueError, "scale must be a number > 0, got 0.0"),
        ((_t(1, 2, 5, 16),) * 3, {"scale": -1.0}, ValueError, "scale must be a number > 0"),
        ((_t(1, 2, 5, 16),) * 3, {"scale": float("inf")}, ValueError, "scale must be a finite number > 0"),
        ((_t(1, 2, 5, 16),) * 3, {"scale": True}, TypeError, "scale must be a number > 0, got bool True"),
        ((_t(1, 2, 5, 16),) * 3, {"scale": torch.tensor(0.5)}, TypeError, "scale must be a number > 0, got Tensor"),
    ],
)
def test_bad_input_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        alibi_attention(*args, **kwargs)


@pytest.mark.parametrize("head_dim", [8, 129])
def test_a_head_dim_the_kernel_cannot_take_is_refused(head_dim, device):
    """Where the kernel runs (a GPU, or the interpreter here): the reference, which CPU tensors take on a GPU
    machine, takes any head dim, so there these cases passed their check to it and failed the test."""
    q = _t(1, 2, 5, head_dim, device=device)
    with pytest.raises(ValueError, match=rf"kernel takes a head dim D = query.shape\[-1\] between 16 and 128, "
                                         rf"got {head_dim}"):
        alibi_attention(q, q, q)


# ----------------------------------------------------------------------------------------
# torch.compile, torch.export, opcheck
# ----------------------------------------------------------------------------------------


def test_torch_compile_traces_through_the_custom_op(device):
    q, k, v = _qkv(1, 2, 20, 33, 32, torch.float32, device)

    def loss_fn(q, k, v):
        return alibi_attention(q, k, v, is_causal=True).square().sum()

    compiled = torch.compile(loss_fn, backend="aot_eager", fullgraph=True)
    loss = compiled(q, k, v)
    grads = torch.autograd.grad(loss, (q, k, v))
    refs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    loss_ref = alibi_attention_reference(*refs, is_causal=True).square().sum()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-4)
    for grad, ref in zip(grads, refs):
        torch.testing.assert_close(grad, ref.grad, rtol=1e-5, atol=1e-5)


def test_torch_export_keeps_the_custom_op(device):
    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return alibi_attention(q, k, v, is_causal=False, scale=0.25)

    q, k, v = (t.detach() for t in _qkv(1, 2, 9, 12, 16, torch.float32, device))
    exported = torch.export.export(Attention(), (q, k, v))
    assert "fastcore_ops.alibi_attention" in str(exported.graph)
    torch.testing.assert_close(
        exported.module()(q, k, v), alibi_attention_reference(q, k, v, scale=0.25), **TOLERANCES[torch.float32]
    )


def test_custom_op_passes_torch_library_opcheck(device):
    q, k, v = _qkv(1, 2, 7, 9, 16, torch.float32, device)
    torch.library.opcheck(torch.ops.fastcore_ops.alibi_attention, (q, k, v, alibi_slopes(2, device), True, 0.25))
    torch.library.opcheck(torch.ops.fastcore_ops.alibi_attention, (q, k, v, None, False, 0.25))


def test_the_cpu_reference_takes_any_head_dim():
    """Only the Triton kernel needs 16 <= D <= 128; on a CPU without the interpreter the reference runs (this
    process interprets the kernels, so a child that does not)."""
    script = ("import torch; from fastcore_ops.kernels import alibi_attention; "
              "q, k, v = (torch.randn(1, 2, 5, 8, requires_grad=True) for _ in range(3)); "
              "out = alibi_attention(q, k, v, is_causal=True); out.sum().backward(); print(tuple(out.shape))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "FASTCORE_OPS_INTERPRET": "0", "TRITON_INTERPRET": "0"},
                          timeout=HANG_GUARD_S)
    assert done.returncode == 0 and done.stdout.strip() == "(1, 2, 5, 8)", done.stderr[-2000:]
