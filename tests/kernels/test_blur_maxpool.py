"""The blur max pool's kernels against their PyTorch reference (stride-1 max_pool2d, then the blur): values,
gradients, the argmax bytes, ties, NaN and -inf routed as max_pool2d routes them, every kernel size, and the rows
read in words. What it shares with blurpool2d (gradcheck, errors, compile, export): test_blurpool.py."""

import pytest
import torch

from fastcore_ops.kernels import blur_maxpool2d
import fastcore_ops.kernels.blur_maxpool as blur_maxpool_module
import fastcore_ops.kernels.blurpool as blurpool_module
from fastcore_ops.kernels.blur_maxpool import blur_maxpool2d_reference
from tests.conftest import FLOAT_DTYPES, TOLERANCES
from tests.kernels.blurs import LAYOUTS, SHAPES, compare_to_reference, make_input


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "nhwc"])
@pytest.mark.parametrize("kernel_size,stride,padding", [(3, 2, 1), (3, 1, 1), (2, 3, 1), (3, 4, 0)])
@pytest.mark.parametrize("shape", SHAPES[2:], ids=str)
def test_blur_maxpool2d_matches_reference(shape, kernel_size, stride, padding, layout, dtype, device):
    x = make_input(shape, dtype, layout, device, integers=True)
    compare_to_reference(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, stride, padding)


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
    compare_to_reference(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, stride, padding)


# The max pool's backward finds an argmax's window row by an exact division (_window_row): a multiplication by
# the inverse of the kernel size's odd part, and for an even size a rotation by 1 (6), 2 (4) or 3 (8) bits. The
# tests above meet sizes 2, 3, 5 and 7 only.
@pytest.mark.parametrize("kernel_size,padding,layout", _alternating_layouts(
    [(1, 0), (4, 1), (6, 3), (8, 2), (15, 7)]))
def test_blur_maxpool2d_routes_every_kernel_size_like_max_pool2d(kernel_size, padding, layout, device):
    g = torch.Generator().manual_seed(kernel_size)
    x = torch.randint(0, 3, (2, 3, 14, 11), generator=g).float()
    x = x.to(device).contiguous(memory_format=layout).requires_grad_()
    compare_to_reference(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, 2, padding)


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


# NCHW rows whose width and strides are multiples of 4 take the forward's grouped path: two outputs an element,
# rows read in aligned words, -inf for the columns off the image, the argmax bytes written as words. Where the
# pooled width is not a multiple of 4 (VGG's 2 x 2 pool: 11 of 12 here; 10, 7), the argmax rows are padded to
# whole words and the words' windows past it are kept out of the blur.
@pytest.mark.parametrize("kernel_size,stride,padding", [(3, 2, 1), (3, 1, 1), (5, 2, 2), (5, 1, 2), (1, 2, 0),
                                                        (2, 2, 0), (3, 1, 0), (5, 1, 1), (6, 2, 0)])
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
    grouping = blur_maxpool_module._forward_group(x.stride(), blurpool_module._address(x), 12, pooled_width, stride)
    assert grouping == {"GROUP": 2, "WHOLE_WORDS": pooled_width % 4 == 0}
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
    assert blur_maxpool_module._max_pool_backward_group(
        tuple(layouts), (0, 0, 0), width, pooled_width, x.element_size()) == group
    compare_to_reference(blur_maxpool2d, blur_maxpool2d_reference, x, kernel_size, stride, padding)


@pytest.mark.parametrize("args", [(2,), (3,), (3, None, 1), (3, 2, 1)], ids=str)
def test_blur_maxpool2d_defaults_are_max_pool2ds(args, device):
    # A call ported from F.max_pool2d keeps its output size: stride defaults to kernel_size, padding to 0.
    x = make_input((1, 2, 11, 12), torch.float32, torch.contiguous_format, device)
    assert blur_maxpool2d(x, *args).shape == torch.nn.functional.max_pool2d(x, *args).shape
