"""BlurPool kernels against their PyTorch references: values, gradients, layouts, dtypes; and what both blur ops
(``blurpool2d`` and ``blur_maxpool2d``) share: gradcheck, random shapes, empty inputs, errors, compile and export.
The blur max pool's own tests: test_blur_maxpool.py."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastcore_ops.kernels import blur_maxpool2d, blurpool2d
import fastcore_ops.kernels.blurpool as blurpool_module
from fastcore_ops.kernels.blur_maxpool import blur_maxpool2d_reference
from fastcore_ops.kernels.blurpool import blurpool2d_reference
from tests.conftest import FLOAT_DTYPES, TOLERANCES
from tests.kernels.blurs import LAYOUTS, SHAPES, compare_to_reference, make_input


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "nhwc"])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_blurpool2d_matches_reference(shape, stride, layout, dtype, device):
    x = make_input(shape, dtype, layout, device)
    out = compare_to_reference(blurpool2d, blurpool2d_reference, x, stride)
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
    wide = make_input((2, 3, 7, width + first_column), dtype, torch.contiguous_format, device)
    x = wide.detach()[..., first_column:].requires_grad_()
    out = compare_to_reference(blurpool2d, blurpool2d_reference, x, stride)
    words = blurpool_module._blur_words(x.stride(), blurpool_module._address(x), width, out.stride(),
                                        blurpool_module._address(out), out.shape[3], stride, x.element_size())
    assert (words["GROUP"], words["WORD"], words["PACKED"]) == grouping[stride]
    if stride == 2:  # the backward's gradients: fresh tensors, as autograd's are here
        group = blurpool_module._blur_backward_group(out.stride(), blurpool_module._address(out), out.shape[3],
                                                     x.grad.stride(), blurpool_module._address(x.grad), width, 2,
                                                     x.element_size())
        assert group == backward_group


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
    x = make_input((n, c, h, w), torch.float32, layout, "cpu", generator_seed=h * 13 + w)
    compare_to_reference(blurpool2d, blurpool2d_reference, x, stride)
    x = make_input((n, c, h, w), torch.float32, layout, "cpu", generator_seed=h * 13 + w, integers=True)
    compare_to_reference(blur_maxpool2d, blur_maxpool2d_reference, x, 3, stride, 1)


def test_non_contiguous_input(device):
    x = torch.randn(2, 8, 10, 12, device=device)[:, ::2, 1:, ::2].requires_grad_()
    compare_to_reference(blurpool2d, blurpool2d_reference, x, 2)


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
    x = make_input((2, 16, 9, 12), torch.float32 if autocast else torch.bfloat16, layout, "cpu")
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
