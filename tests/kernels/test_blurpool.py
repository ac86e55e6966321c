"""BlurPool kernels against their PyTorch references: values, gradients, layouts, dtypes, errors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastcore_ops.kernels import blur_maxpool2d, blurpool2d
import fastcore_ops.kernels.blurpool as blurpool_module
from fastcore_ops.kernels.blurpool import blur_maxpool2d_reference, blurpool2d_reference
from tests.conftest import FLOAT_DTYPES, TOLERANCES

SHAPES = [(1, 1, 1, 1), (2, 3, 7, 5), (2, 16, 8, 9), (1, 33, 13, 16)]
LAYOUTS = [torch.contiguous_format, torch.channels_last]


def _input(shape, dtype, layout, device, generator_seed=0, integers=False):
    g = torch.Generator().manual_seed(generator_seed)
    # Small integers make ties in max pooling common, which is what the argmax routing must survive.
    x = torch.randint(-2, 3, shape, generator=g).float() if integers else torch.randn(shape, generator=g)
    return x.to(device=device, dtype=dtype).contiguous(memory_format=layout).requires_grad_()


def _compare(op, reference, x, *args):
    """Forward and backward of op against reference run in fp32 (fp64 for fp64)."""
    dtype = x.dtype
    out = op(x, *args)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device, dtype)
    out.backward(grad_out)

    compute = torch.float64 if dtype == torch.float64 else torch.float32
    x_ref = x.detach().to(compute).requires_grad_()
    out_ref = reference(x_ref, *args)
    out_ref.backward(grad_out.to(compute))

    torch.testing.assert_close(out, out_ref.to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(x.grad, x_ref.grad.to(dtype), **TOLERANCES[dtype])
    return out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "nhwc"])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_blurpool2d_matches_reference(shape, stride, layout, dtype, device):
    x = _input(shape, dtype, layout, device)
    out = _compare(blurpool2d, blurpool2d_reference, x, stride)
    if layout == torch.channels_last and shape[1] > 1:
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert x.grad.is_contiguous(memory_format=torch.channels_last)


# NCHW rows read in words (see blurpool._blur_words, _blur_backward_group): (width, first column kept of a wider
# image, dtype), the forward's grouping at stride 1 and 2, and the outputs an element of the stride-2 backward.
WORD_CASES = [
    (16, 0, torch.float16, {1: (4, 4, True), 2: (4, 4, True)}, 4),  # 64-bit words, outputs packed
    (12, 0, torch.float16, {1: (4, 4, True), 2: (4, 4, False)}, 2),  # 6 outputs a row at stride 2: each on its own
    (14, 0, torch.float16, {1: (4, 2, False), 2: (4, 2, False)}, 1),  # 32-bit words; 7 gradients a row
    (14, 0, torch.float32, {1: (4, 2, False), 2: (4, 2, False)}, 1),  # 64-bit words of two floats
    (16, 0, torch.float32, {1: (4, 2, False), 2: (4, 2, False)}, 2),
    (16, 1, torch.float16, {1: (1, 1, False), 2: (1, 1, False)}, 4),  # a view one column in; its gradients are whole
]


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("width,first_column,dtype,grouping,backward_group", WORD_CASES, ids=str)
def test_blurpool2d_reads_aligned_rows_in_words(width, first_column, dtype, grouping, backward_group, stride,
                                                device):
    wide = _input((2, 3, 7, width + first_column), dtype, torch.contiguous_format, device)
    x = wide.detach()[..., first_column:].requires_grad_()
    out = _compare(blurpool2d, blurpool2d_reference, x, stride)
    words = blurpool_module._blur_words(x.stride(), blurpool_module._address(x), width, out.stride(),
                                        blurpool_module._address(out), out.shape[3], stride, x.element_size())
    assert (words["GROUP"], words["WORD"], words["PACKED"]) == grouping[stride]
    if stride == 2:  # the backward's gradients: fresh tensors, as autograd's are here
        group = blurpool_module._blur_backward_group(out.stride(), blurpool_module._address(out), out.shape[3],
                                                     x.grad.stride(), blurpool_module._address(x.grad), width, 2,
                                                     x.element_size())
        assert group == backward_group


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "nhwc"])
@pytest.mark.parametrize("kernel_size,stride,padding", [(3, 2, 1), (3, 1, 1), (2, 3, 1), (3, 4, 0)])
@pytest.mark.parametrize("shape", SHAPES[2:], ids=str)
def test_blur_maxpool2d_matches_reference(shape, kernel_size, stride, padding, layout, dtype, device):
    x = _input(shape, dtype, layout, device, integers=True)
    _compare(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, stride, padding)


def test_blur_maxpool2d_routes_ties_and_nan_like_max_pool(device):
    x = torch.zeros(1, 2, 6, 6, device=device)
    x[0, 1, 2, 3] = float("nan")
    x.requires_grad_()
    out = blur_maxpool2d(x, 3, 2, 1)
    out.backward(torch.ones_like(out))
    x_ref = x.detach().clone().requires_grad_()
    ref = blur_maxpool2d_reference(x_ref, 3, 2, 1)
    ref.backward(torch.ones_like(ref))
    torch.testing.assert_close(out, ref, equal_nan=True)
    torch.testing.assert_close(x.grad, x_ref.grad)


def _max_pool_offsets(x, kernel_size, padding):
    """F.max_pool2d's stride-1 argmax as blur_maxpool2d keeps it: the row-major offset i * K + j in each window."""
    _, indices = torch.nn.functional.max_pool2d(x, kernel_size, 1, padding, return_indices=True)
    rows = torch.arange(indices.shape[2], device=x.device).view(-1, 1)
    columns = torch.arange(indices.shape[3], device=x.device)
    width = x.shape[3]
    return (indices // width - rows + padding) * kernel_size + (indices % width - columns + padding)


def _read_by_the_blur(size, stride, device):
    """Which pooled rows (or columns) of ``size`` some output's blur reads: o * stride - 1 .. o * stride + 1."""
    position = torch.arange(size, device=device)
    outputs = (size - 1) // stride + 1
    return ((position + 1) % stride <= 2) & (position <= (outputs - 1) * stride + 1)


def _check_argmax(x, kernel_size, stride, padding):
    """The forward's argmax bytes equal F.max_pool2d's, at every pooled position the blur reads."""
    _, argmax = torch.ops.fastcore_ops.blur_maxpool2d(x.detach(), kernel_size, stride, padding)
    expected = _max_pool_offsets(x.detach(), kernel_size, padding)
    read = (_read_by_the_blur(argmax.shape[2], stride, x.device).view(-1, 1)
            & _read_by_the_blur(argmax.shape[3], stride, x.device))
    assert torch.equal(argmax.long()[..., read], expected[..., read])


def _alternating_layouts(cases):
    """Each case in one layout, the layouts taking turns: the kernel's code is the same in both (only the
    strides differ), so every layout still meets every kernel size and stride at half the interpreter's time."""
    return [pytest.param(*case, LAYOUTS[i % 2], id=f"{'-'.join(map(str, case))}-{('nchw', 'nhwc')[i % 2]}")
            for i, case in enumerate(cases)]


# 14 rows: with the interpreter's bands of 4 output rows (8 on a GPU) the output heights here (4 to 14) mostly
# end in a partial band, and 11 columns a partial column block.
@pytest.mark.parametrize("kernel_size,padding,stride,layout", _alternating_layouts(
    [(k, p, s) for k, p in [(3, 0), (3, 1), (5, 0), (5, 1), (5, 2), (7, 3)] for s in (1, 2, 3)]))
def test_blur_maxpool2d_routes_ties_like_max_pool2d(kernel_size, padding, stride, layout, device):
    # Values 0, 1, 2: nearly every window holds its max more than once, and the first in row-major order must win.
    g = torch.Generator().manual_seed(kernel_size * 10 + padding)
    x = torch.randint(0, 3, (2, 3, 14, 11), generator=g).float()
    x = x.to(device).contiguous(memory_format=layout).requires_grad_()
    _check_argmax(x, kernel_size, stride, padding)
    _compare(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, stride, padding)


# The max pool's backward finds an argmax's window row by an exact division (_window_row): a multiplication by
# the inverse of the kernel size's odd part, and for an even size a rotation by 1 (6), 2 (4) or 3 (8) bits. The
# tests above meet sizes 2, 3, 5 and 7 only.
@pytest.mark.parametrize("kernel_size,padding,layout", _alternating_layouts(
    [(1, 0), (4, 1), (6, 3), (8, 2), (15, 7)]))
def test_blur_maxpool2d_routes_every_kernel_size_like_max_pool2d(kernel_size, padding, layout, device):
    g = torch.Generator().manual_seed(kernel_size)
    x = torch.randint(0, 3, (2, 3, 14, 11), generator=g).float()
    x = x.to(device).contiguous(memory_format=layout).requires_grad_()
    _compare(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, 2, padding)


@pytest.mark.parametrize("kernel_size,stride,padding,layout", _alternating_layouts(
    [(3, 2, 1), (3, 2, 1), (3, 1, 1), (3, 3, 0), (2, 2, 1), (5, 2, 2), (5, 4, 2), (3, 5, 1)]))
def test_blur_maxpool2d_takes_nan_and_minus_inf_like_max_pool2d(kernel_size, stride, padding, layout, device):
    g = torch.Generator().manual_seed(stride)
    x = torch.randint(0, 3, (2, 3, 13, 10), generator=g).float()
    nan, inf = float("nan"), float("inf")
    x[0, 0, 4, 3] = x[0, 0, 4, 5] = x[0, 0, 5, 4] = x[0, 0, 6, 4] = nan  # windows with several: the last wins
    x[0, 1, 0, 0] = x[1, 2, -1, -1] = x[1, 2, 0, -1] = nan  # at the corners, next to padding
    x[1, 0, :5, :5] = -inf  # windows of -inf and padding: the first pixel, never padding
    x[0, 2, -4:, :] = -inf
    x[1, 1] = -inf  # a whole plane
    x = x.to(device).contiguous(memory_format=layout).requires_grad_()
    _check_argmax(x, kernel_size, stride, padding)
    out = blur_maxpool2d(x, kernel_size, stride, padding)
    grad_out = torch.randn(out.shape, generator=g).to(device)
    out.backward(grad_out)
    x_ref = x.detach().clone().requires_grad_()
    ref = blur_maxpool2d_reference(x_ref, kernel_size, stride, padding)
    ref.backward(grad_out)
    assert out.isnan().any() and (out == -inf).any()
    torch.testing.assert_close(out, ref, equal_nan=True)
    torch.testing.assert_close(x.grad, x_ref.grad)


# NCHW rows whose width, strides and pooled width are multiples of 4 take the forward's grouped path: two outputs
# an element, rows read in aligned words, -inf for the columns off the image, the argmax bytes written as words.
@pytest.mark.parametrize("kernel_size,stride,padding", [(3, 2, 1), (3, 1, 1), (5, 2, 2), (5, 1, 2), (1, 2, 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_blur_maxpool2d_grouped_rows_take_ties_nan_and_minus_inf_like_max_pool2d(kernel_size, stride, padding, dtype,
                                                                                 device):
    g = torch.Generator().manual_seed(kernel_size * 10 + stride)
    x = torch.randint(0, 3, (2, 3, 13, 12), generator=g).float()
    nan, inf = float("nan"), float("inf")
    x[0, 0, 4, 0] = x[0, 0, 4, 11] = x[0, 0, 5, 1] = x[0, 0, 6, 10] = x[0, 0, 6, 5] = nan  # at both edges
    x[0, 1, :, :3] = -inf  # windows of -inf and padding, left and right: the first pixel, never padding
    x[1, 0, :, -3:] = -inf
    x[1, 1] = -inf
    x = x.to(device=device, dtype=dtype).requires_grad_()
    pooled_width = 12 + 2 * padding - kernel_size + 1
    assert blurpool_module._forward_group(x.stride(), blurpool_module._address(x), 12, pooled_width, stride) == 2
    _check_argmax(x, kernel_size, stride, padding)
    out = blur_maxpool2d(x, kernel_size, stride, padding)
    grad_out = torch.randn(out.shape, generator=g).to(device, dtype)
    out.backward(grad_out)
    x_ref = x.detach().float().requires_grad_()
    ref = blur_maxpool2d_reference(x_ref, kernel_size, stride, padding)
    ref.backward(grad_out.float())
    assert out.isnan().any() and (out == -inf).any()
    torch.testing.assert_close(out, ref.to(dtype), equal_nan=True, **TOLERANCES[dtype])
    torch.testing.assert_close(x.grad, x_ref.grad.to(dtype), **TOLERANCES[dtype])


# The max pool's backward routes NCHW rows whose width and pooled width are multiples of a 64-bit word of
# gradients in words (blurpool._max_pool_backward_group): (width, kernel size, padding, stride, dtype, the group).
# 36 columns span three of the interpreter's column blocks, the last partial; from the kernel size and padding,
# the nearest pooled column a group reads is 0 to 4 columns to its left.
BACKWARD_WORD_CASES = [
    (12, 3, 1, 2, torch.float16, 4), (12, 3, 1, 2, torch.float32, 2), (36, 5, 2, 2, torch.float16, 4),
    (36, 5, 0, 1, torch.float16, 4), (12, 7, 3, 2, torch.float32, 2), (12, 1, 0, 2, torch.float16, 4),
    (12, 3, 1, 3, torch.float16, 4),  # stride 3: positions no output reads hold no offset
    (14, 3, 1, 2, torch.float16, 1), (12, 2, 0, 2, torch.float16, 1),  # width, then pooled width, not whole words
]


@pytest.mark.parametrize("width,kernel_size,padding,stride,dtype,group", BACKWARD_WORD_CASES, ids=str)
def test_max_pool_backward_routes_aligned_rows_in_words(width, kernel_size, padding, stride, dtype, group, device):
    g = torch.Generator().manual_seed(width + kernel_size)
    x = torch.randint(0, 3, (2, 3, 9, width), generator=g).to(device=device, dtype=dtype).requires_grad_()
    pooled_width = width + 2 * padding - kernel_size + 1
    layouts = [torch.empty(2, 3, 9 + 2 * padding - kernel_size + 1, pooled_width).stride()] * 2 + [x.stride()]
    assert blurpool_module._max_pool_backward_group(
        tuple(layouts), (0, 0, 0), width, pooled_width, x.element_size()) == group
    _compare(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, stride, padding)


@pytest.mark.parametrize("args", [(2,), (3,), (3, None, 1), (3, 2, 1)], ids=str)
def test_blur_maxpool2d_defaults_are_max_pool2ds(args, device):
    # A call ported from F.max_pool2d keeps its output size: stride defaults to kernel_size, padding to 0.
    x = _input((1, 2, 11, 12), torch.float32, torch.contiguous_format, device)
    assert blur_maxpool2d(x, *args).shape == torch.nn.functional.max_pool2d(x, *args).shape


def test_gradcheck_fp64(device):
    x = torch.randn(1, 1, 4, 5, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: blurpool2d(t, 2), (x,), fast_mode=True)
    # Distinct values keep finite differences away from max-pool ties.
    x = torch.randperm(20, dtype=torch.float64, device=device).reshape(1, 1, 4, 5).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: blur_maxpool2d(t, 3, 2, 1), (x,), fast_mode=True)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 2), c=st.integers(1, 9), h=st.integers(1, 12), w=st.integers(1, 12),
    stride=st.integers(1, 4), channels_last=st.booleans(),
)
def test_random_shapes(n, c, h, w, stride, channels_last):
    layout = torch.channels_last if channels_last else torch.contiguous_format
    x = _input((n, c, h, w), torch.float32, layout, "cpu", generator_seed=h * 13 + w)
    _compare(blurpool2d, blurpool2d_reference, x, stride)
    x = _input((n, c, h, w), torch.float32, layout, "cpu", generator_seed=h * 13 + w, integers=True)
    _compare(blur_maxpool2d, blur_maxpool2d_reference, x, 3, stride, 1)


def test_non_contiguous_input(device):
    x = torch.randn(2, 8, 10, 12, device=device)[:, ::2, 1:, ::2].requires_grad_()
    _compare(blurpool2d, blurpool2d_reference, x, 2)


@pytest.mark.parametrize("width", [11, 12])  # 12: at stride 2, rows of whole words (2 outputs an element)
@pytest.mark.parametrize("stride", [2, 3, 4])
def test_an_infinite_gradient_reaches_only_the_pixels_its_taps_read(stride, width, device):
    # Input pixels that no tap of an output reads get exactly 0, not 0 * inf.
    x = torch.randn(1, 2, 9, width, device=device).requires_grad_()
    grad_out = torch.zeros(1, 2, (9 - 1) // stride + 1, (width - 1) // stride + 1, device=device)
    grad_out[0, 1, 1, 1] = float("inf")
    blurpool2d(x, stride).backward(grad_out)
    x_ref = x.detach().clone().requires_grad_()
    blurpool2d_reference(x_ref, stride).backward(grad_out)
    torch.testing.assert_close(x.grad, x_ref.grad, equal_nan=True)
    assert x.grad.isinf().sum() == 9


@pytest.mark.parametrize("shape", [(0, 3, 8, 8), (2, 0, 8, 8), (2, 3, 0, 8)], ids=str)
def test_empty_input_gives_empty_output(shape, device):
    x = torch.zeros(shape, device=device, requires_grad=True)
    out = blurpool2d(x)
    assert out.shape == (shape[0], shape[1], (shape[2] - 1) // 2 + 1, (shape[3] - 1) // 2 + 1)
    out.sum().backward()
    assert x.grad.shape == x.shape
    assert blur_maxpool2d(x.detach(), 3, 2, 1).numel() == 0


_IMAGE = torch.zeros(1, 3, 8, 8)


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: blurpool2d(torch.zeros(3, 8, 8)), ValueError, "4 dimensions"),
        (lambda: blurpool2d(torch.zeros(1, 3, 8, 8, dtype=torch.int64)), TypeError, "floating"),
        (lambda: blurpool2d([[1.0]]), TypeError, "torch.Tensor"),
        (lambda: blurpool2d(_IMAGE, stride=-1), ValueError, "stride must be an int >= 1, got -1"),
        (lambda: blurpool2d(_IMAGE, stride=0), ValueError, "stride must be an int >= 1, got 0"),
        (lambda: blurpool2d(_IMAGE, stride=2.0), TypeError, "stride must be an int >= 1, got float 2.0"),
        (lambda: blur_maxpool2d(_IMAGE, 3, True), TypeError, "stride must be an int >= 1, got bool True"),
        (lambda: blur_maxpool2d(_IMAGE), TypeError, "missing 1 required positional argument: 'kernel_size'"),
        (lambda: blur_maxpool2d(_IMAGE, 3, 2, 2), ValueError, r"padding must be an int in \[0, 1\], got 2"),
        (lambda: blur_maxpool2d(_IMAGE, 0), ValueError, r"kernel_size must be an int in \[1, 15\], got 0"),
        (lambda: blur_maxpool2d(_IMAGE, 16, 2, 0), ValueError, r"in \[1, 15\], got 16"),
        (lambda: blur_maxpool2d(torch.zeros(1, 3, 2, 8), 5, 2, 0), ValueError,
         "input's height 2 is smaller than kernel_size"),
    ],
)
def test_bad_input_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_torch_compile_traces_through_the_custom_ops(device):
    x = torch.randn(2, 4, 9, 9, device=device, requires_grad=True)

    def f(t):
        return blur_maxpool2d(blurpool2d(t, 1), 3, 2, 1).square().sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    loss = compiled(x)
    (grad,) = torch.autograd.grad(loss, x)
    x_ref = x.detach().clone().requires_grad_()
    loss_ref = blur_maxpool2d_reference(blurpool2d_reference(x_ref, 1), 3, 2, 1).square().sum()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, x_ref.grad, rtol=1e-5, atol=1e-5)


def test_torch_export_keeps_the_custom_ops(device):
    class Stem(torch.nn.Module):
        def forward(self, t):
            return blurpool2d(blur_maxpool2d(t, 3, 2, 1))

    x = torch.randn(2, 3, 16, 16, device=device)
    exported = torch.export.export(Stem(), (x,))
    graph = str(exported.graph)
    assert "fastcore_ops.blur_maxpool2d" in graph and "fastcore_ops.blurpool2d" in graph
    torch.testing.assert_close(exported.module()(x), blurpool2d_reference(blur_maxpool2d_reference(x, 3, 2, 1)))


def test_custom_ops_pass_torch_library_opcheck(device):
    x = torch.randn(2, 3, 7, 8, device=device, requires_grad=True)
    torch.library.opcheck(torch.ops.fastcore_ops.blurpool2d, (x, 2))
    torch.library.opcheck(torch.ops.fastcore_ops.blur_maxpool2d, (x, 3, 2, 1))


@pytest.mark.parametrize("autocast", [False, True], ids=["bf16", "bf16-autocast"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "nhwc"])
@pytest.mark.parametrize("stride", [2, 3])
def test_the_cpu_path_without_triton_matches_the_reference_in_bf16(stride, layout, autocast, monkeypatch):
    # Without the interpreter a CPU runs PyTorch's convolutions, reduced precision through a stride-1 blur.
    monkeypatch.setattr(blurpool_module.backend, "INTERPRETING", False)
    x = _input((2, 16, 9, 12), torch.float32 if autocast else torch.bfloat16, layout, "cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        for op, reference, args in [(blurpool2d, blurpool2d_reference, (stride,)),
                                    (blur_maxpool2d, blur_maxpool2d_reference, (3, stride, 1))]:
            x.grad = None
            out = op(x, *args)
            out.float().sum().backward()
            expected_grad, x.grad = x.grad, None
            expected = reference(x, *args)
            expected.float().sum().backward()
            torch.testing.assert_close(out, expected, **TOLERANCES[torch.bfloat16])
            torch.testing.assert_close(x.grad, expected_grad, **TOLERANCES[torch.bfloat16])
