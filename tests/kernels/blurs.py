"""What the blur kernels' tests share: the images they take and the comparison of a kernel's values and
gradients with its reference's."""

import torch

from tests.conftest import TOLERANCES

SHAPES = [(1, 1, 1, 1), (2, 3, 7, 5), (2, 16, 8, 9), (1, 33, 13, 16)]
LAYOUTS = [torch.contiguous_format, torch.channels_last]


def make_input(shape, dtype, layout, device, generator_seed=0, integers=False):
    """A float image of ``shape`` in ``layout`` on ``device``, needing its gradient: normal values, or with
    ``integers`` values -2 to 2.

        >>> make_input((1, 2, 3, 4), torch.float32, torch.channels_last, "cpu").stride()
        (24, 1, 8, 2)
    """
    g = torch.Generator().manual_seed(generator_seed)
    # Small integers make ties in max pooling common, which is what the argmax routing must survive.
    x = torch.randint(-2, 3, shape, generator=g).float() if integers else torch.randn(shape, generator=g)
    return x.to(device=device, dtype=dtype).contiguous(memory_format=layout).requires_grad_()


def compare_to_reference(op, reference, x, *args):
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
