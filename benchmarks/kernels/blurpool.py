"""BlurPool cases: the ResNet-50 layers BlurPool surgery touches, at the benchmark's batch size."""

from __future__ import annotations

import torch

from fastcore_ops.kernels import blur_maxpool2d, blurpool2d
from fastcore_ops.kernels.blurpool import blur_maxpool2d_reference, blurpool2d_reference

from . import Case, Traffic, element_size

# (channels, side, blur stride) of the inputs of ResNet-50's strided convolutions with >= 16 input
# channels, each of which BlurPool surgery puts a blur in front of: the 1x1 downsample of each
# stage's first bottleneck takes the blur's stride 2; its stride-2 3x3 conv keeps its stride behind
# a stride-1 blur (fastcore_ops.surgery.blurpool.BlurConv2d). Stride 2 and stride 1 alternate, so a
# run stopped at its time budget has timed both.
STRIDED_CONV_INPUTS = [(256, 56, 2), (128, 56, 1), (512, 28, 2), (256, 28, 1), (1024, 14, 2), (512, 14, 1)]
# The stem's max pool input, which blur_maxpool2d replaces.
MAXPOOL_INPUT = (64, 112)
# (strided conv inputs, max pool input) of the small mode, which runs Triton's interpreter: odd sides.
TINY = ([(16, 15, 2), (16, 15, 1)], (4, 9))


def _make(shape, dtype, layout, device):
    def make():
        x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=layout)
        return (x.requires_grad_(),)

    return make


def cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    b = element_size(dtype)
    strided_inputs, maxpool_input = TINY if tiny else (STRIDED_CONV_INPUTS, MAXPOOL_INPUT)
    result = []
    for layout, layout_name in ((torch.channels_last, "nhwc"), (torch.contiguous_format, "nchw")):
        for channels, size, stride in strided_inputs:
            full = batch * channels * size * size * b
            strided = batch * channels * ((size - 1) // stride + 1) ** 2 * b
            # Both read the input once and write the strided output once; backward reads the
            # output gradient and writes the input gradient. On paper they are equal: the gain
            # is in how well each implementation reaches that bound.
            traffic = Traffic(full + strided, 2 * (full + strided))
            result.append(Case(
                "blurpool2d", f"{batch}x{channels}x{size}x{size} {layout_name} stride {stride}",
                _make((batch, channels, size, size), dtype, layout, device),
                lambda x, stride=stride: blurpool2d(x, stride),
                lambda x, stride=stride: blurpool2d_reference(x, stride), traffic, traffic,
            ))
        channels, size = maxpool_input
        full = batch * channels * size * size
        half = batch * channels * (size // 2) ** 2
        ours = Traffic(
            forward=full * b + half * b + full,  # read x, write out and the 1-byte argmax
            forward_backward=full * b + half * b + full + half * b + full + full * b,
            temporaries=full,  # the uint8 argmax
        )
        reference = Traffic(
            # max_pool2d writes the pooled image and int64 indices; the blur reads the pooled image.
            forward=full * b + full * b + full * 8 + full * b + half * b,
            # conv backward writes the pooled gradient; max-pool backward zero-fills the input
            # gradient, then reads the pooled gradient and the indices to scatter into it.
            forward_backward=(full * b + full * b + full * 8 + full * b + half * b)
            + (half * b + full * b) + (full * b + full * b + full * 8 + full * b),
            temporaries=full * (2 * b + 8),
        )
        result.append(Case(
            "blur_maxpool2d", f"{batch}x{channels}x{size}x{size} {layout_name}",
            _make((batch, channels, size, size), dtype, layout, device),
            lambda x: blur_maxpool2d(x, 3, 2, 1), lambda x: blur_maxpool2d_reference(x, 3, 2, 1), ours, reference,
        ))
    return result
