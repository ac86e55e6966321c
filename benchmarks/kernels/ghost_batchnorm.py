"""Ghost BatchNorm cases: ResNet-50 activation shapes, eight ghost batches per batch (32 of 256)."""

from __future__ import annotations

import torch

from fastcore_ops.kernels import ghost_batch_norm
from fastcore_ops.kernels.ghost_batchnorm import _plan, ghost_batch_norm_reference

from . import Case, Traffic

ACTIVATIONS = [(64, 112), (256, 56), (512, 28), (2048, 7)]
CHUNKS = 8  # 256 / 32, kept at smaller benchmark batches so the reference loops as often
TINY = [(12, 7)]  # the small mode's, which runs Triton's interpreter


def _traffic(x: torch.Tensor, ghost: int) -> tuple[Traffic, Traffic]:
    """Modelled bytes; statistics and parameters in fp32 (as BatchNorm keeps them under AMP)."""
    N, C = x.shape[:2]
    E, b, a = x.numel(), x.element_size(), 4
    K = -(-N // ghost)
    S = _plan(x, ghost).splits
    # Statistics pass reads x; normalize reads x and writes y; plus split partials and running stats.
    ours_forward = 3 * E * b + 6 * K * S * C * a + 4 * K * C * a + 6 * C * a
    # Sums pass reads g and x; gradient pass reads g and x and writes dx.
    ours_backward = 5 * E * b + 4 * K * S * C * a + 4 * K * C * a + 3 * C * a
    ours = Traffic(ours_forward, ours_forward + ours_backward, 3 * K * S * C * a + 2 * K * C * a)
    # Per chunk: a statistics read, a normalize read and write; then torch.cat copies the output.
    reference_forward = 3 * E * b + K * C * 8 * a + 2 * E * b
    # Per chunk: a reduction over (g, x) and an elementwise pass; split's backward concatenates
    # the chunk gradients; autograd adds up K weight and bias gradients.
    reference_backward = 5 * E * b + K * C * 5 * a + 2 * E * b + 6 * (K - 1) * C * a
    reference = Traffic(reference_forward, reference_forward + reference_backward, E * b)
    return ours, reference


def cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    ghost = max(2, batch // CHUNKS)
    result = []
    for layout, layout_name in ((torch.channels_last, "nhwc"), (torch.contiguous_format, "nchw")):
        for channels, size in TINY if tiny else ACTIVATIONS:
            shape = (batch, channels, size, size)

            def make(shape=shape, layout=layout):
                x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=layout)
                weight = torch.ones(shape[1], device=device, requires_grad=True)
                bias = torch.zeros(shape[1], device=device, requires_grad=True)
                running = (torch.zeros(shape[1], device=device), torch.ones(shape[1], device=device))
                return x.requires_grad_(), weight, bias, *running

            probe = torch.empty(shape, device="meta", dtype=dtype).contiguous(memory_format=layout)
            ours, reference = _traffic(probe, ghost)
            result.append(Case(
                "ghost_batch_norm", f"{batch}x{channels}x{size}x{size} G{ghost} {layout_name}", make,
                lambda x, w, b, m, v: ghost_batch_norm(x, m, v, w, b, True, ghost_batch_size=ghost),
                lambda x, w, b, m, v: ghost_batch_norm_reference(x, m, v, w, b, True, ghost_batch_size=ghost),
                ours, reference,
            ))
    return result

