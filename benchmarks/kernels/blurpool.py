"""BlurPool cases: the ResNet-50 layers BlurPool surgery touches, at the benchmark's batch size.

Each is timed against what a user runs instead (``ref``: cuDNN's depthwise convolution with a cached
filter; for the max pool, ``F.max_pool2d`` at stride 1 then that blur) and, on CUDA, the same through
``torch.compile`` (``compiled``).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from fastcore_ops.kernels import blur_maxpool2d, blurpool2d
from fastcore_ops.kernels import blur_maxpool as pool_kernels
from fastcore_ops.kernels import blurpool as blur_kernels
from fastcore_ops.kernels.backend import tl
from fastcore_ops.kernels.blur_maxpool import blur_maxpool2d_reference
from fastcore_ops.kernels.blurpool import blurpool2d_reference

from . import (Case, CorrectnessCase, Goal, KernelSpec, Traffic, channels_last_image, compiled_on_first_call,
               element_size)
from .compile_cases import KernelCase, Streaming, multiples_of_16

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


LAYOUTS = ((torch.channels_last, "nhwc"), (torch.contiguous_format, "nchw"))

_compiled_blurpool = compiled_on_first_call(blurpool2d_reference)
_compiled_blur_maxpool = compiled_on_first_call(blur_maxpool2d_reference)


def _make(shape, dtype, layout, device):
    def make():
        x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=layout)
        return (x.requires_grad_(),)

    return make


def blurpool_cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    b, on_gpu = element_size(dtype), device.type == "cuda"
    result = []
    for layout, layout_name in LAYOUTS:
        for channels, size, stride in TINY[0] if tiny else STRIDED_CONV_INPUTS:
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
                others={"compiled": lambda x, stride=stride: _compiled_blurpool(x, stride)} if on_gpu else {},
                shape=(batch, channels, size, size),
            ))
    return result


def blur_maxpool_cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    b, on_gpu = element_size(dtype), device.type == "cuda"
    result = []
    for layout, layout_name in LAYOUTS:
        channels, size = TINY[1] if tiny else MAXPOOL_INPUT
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
            _blur_maxpool, _blur_maxpool_reference, ours, reference,
            others={"compiled": lambda x: _compiled_blur_maxpool(x, 3, 2, 1)} if on_gpu else {},
            shape=(batch, channels, size, size),
        ))
    return result


def _image(shape, layout: str):
    def make(dtype, device):
        if layout == "strided":  # every other column of a wider image
            wide = torch.randn(*shape[:3], 2 * shape[3], device=device, dtype=dtype)
            return [wide.requires_grad_()]
        x = torch.randn(shape, device=device, dtype=dtype)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        return [x.requires_grad_()]

    return make


def _image_call(layout: str):
    return (lambda leaves: (leaves[0][..., ::2],)) if layout == "strided" else (lambda leaves: (leaves[0],))


def _correctness_cases(kernel: str, ours, reference, small: bool) -> list[CorrectnessCase]:
    shapes = [(2, 5, 9, 7)] if small else [(32, 64, 56, 56), (3, 17, 33, 31), (2, 5, 9, 7)]
    return [CorrectnessCase(kernel, "x".join(map(str, shape)), layout, _image(shape, layout), _image_call(layout),
                            ours, reference)
            for shape in shapes for layout in ("contiguous", "channels_last", "strided")]


def _blurpool(x):
    return blurpool2d(x, 2)


def _blurpool_reference(x):
    return blurpool2d_reference(x, 2)


def _blur_maxpool(x):
    return blur_maxpool2d(x, 3, 2, 1)


def _blur_maxpool_reference(x):
    return blur_maxpool2d_reference(x, 3, 2, 1)


# The blur kernels' representative launches, from ResNet-50 with BlurPool at batch 256 in bf16: the blur before
# the first stride-2 conv (128 channels of 56 x 56) and the stem's blur max pool (64 channels of 112 x 112).
_LAUNCH_IMAGES = {"_blurpool_forward_kernel": (128, 56), "_blurpool_backward_kernel": (128, 56),
                  "_blur_maxpool_forward_kernel": (64, 112), "_max_pool_backward_kernel": (64, 112)}
# The image whose strides each prefix of a kernel's stride arguments holds.
_LAUNCH_STRIDES = {
    "_blurpool_forward_kernel": {"stride": "input", "out_stride": "output"},
    "_blurpool_backward_kernel": {"stride": "output", "in_stride": "input"},
    "_blur_maxpool_forward_kernel": {"stride": "input", "out_stride": "output", "arg_stride": "argmax"},
    "_max_pool_backward_kernel": {"stride": "pooled", "arg_stride": "argmax", "in_stride": "input"},
}


def _launch(case: KernelCase) -> dict[str, int]:
    """The integer arguments of a blur kernel's representative launch, in the case's layout."""
    name = case.jit_function().__name__
    channels, size = _LAUNCH_IMAGES[name]
    pooled = size + 2 * case.constexprs.get("PADDING", 0) - case.constexprs.get("KERNEL", 1) + 1
    sides = {"input": size, "pooled": pooled, "output": (pooled - 1) // case.constexprs.get("STRIDE", 1) + 1}
    values = {"C": channels, "H": size, "W": size, "Hp": pooled, "Wp": pooled, "Ho": sides["output"],
              "Wo": sides["output"]}
    memory_format = torch.channels_last if case.layout() == "NHWC" else torch.contiguous_format
    for prefix, image in _LAUNCH_STRIDES[name].items():
        if image == "argmax":  # the op's own buffer, its rows padded to whole words channels-first
            input_image = torch.empty((1, channels, size, size), device="meta", memory_format=memory_format)
            strides = pool_kernels._argmax_buffer(input_image, (1, channels, pooled, pooled)).stride()
        else:
            side = sides[image]
            strides = torch.empty((1, channels, side, side), device="meta", memory_format=memory_format).stride()
        values.update({f"{prefix}_{dim}": stride for dim, stride in zip("nchw", strides)})
    return {name: value for name, value in values.items() if name in case.jit_function().arg_names}


def _streaming(case: KernelCase) -> Streaming:
    """What each output pixel of a blur kernel moves (the input's pixel for the backward kernels), in bf16."""
    name = case.jit_function().__name__
    stride = case.constexprs.get("STRIDE", 1)
    if name == "_blurpool_forward_kernel":  # stride^2 inputs read, one output written
        return Streaming(2, 2 * stride**2 + 2)
    if name == "_blurpool_backward_kernel":  # one input gradient written, 1 / stride^2 output gradients read
        return Streaming(2, 2 + 2 / stride**2)
    if name == "_blur_maxpool_forward_kernel":  # and the argmax bytes of the pooled pixels some output reads
        argmax = min(stride, 3) ** 2
        return Streaming(2 + argmax, 2 * stride**2 + 2 + argmax)
    return Streaming(2, 2 + 1 + 2)  # the max pool's backward: a pooled gradient and argmax byte an input pixel


def _grouping(name: str, launch: dict[str, int], stride: int) -> dict[str, int | bool]:
    """The constexprs by which the op groups a blur kernel's outputs for this launch (its tensors aligned, at
    offset 0, in bf16): how many outputs an element of the tile takes, and how it reads and writes them."""
    def strides(prefix):
        return [launch[f"{prefix}_{dim}"] for dim in "nchw"]

    if name == "_blurpool_forward_kernel":
        return blur_kernels._blur_words(strides("stride"), 0, launch["W"], strides("out_stride"), 0, launch["Wo"],
                                        stride, 2)
    if name == "_blurpool_backward_kernel":
        return {"GROUP": blur_kernels._blur_backward_group(strides("stride"), 0, launch["Wo"], strides("in_stride"),
                                                           0, launch["W"], stride, 2)}
    if name == "_blur_maxpool_forward_kernel":
        return pool_kernels._forward_group(strides("stride"), 0, launch["W"], launch["Wp"], stride)
    tensors = (strides("stride"), strides("arg_stride"), strides("in_stride"))
    return {"GROUP": pool_kernels._max_pool_backward_group(tensors, (0, 0, 0), launch["W"], launch["Wp"], 2)}


def _compile_cases(every_config: list, one_config: list = ()):
    """The blur kernels (kernel, data pointers, constexprs) as launched in NCHW and in NHWC: ``every_config``
    in each config of its autotuner, ``one_config`` in the first (NCHW) or last (NHWC) config alone, of the
    default 4 warps. Each with its launch's hints, the config meant for its layout and what its elements move.
    A kernel is one autotuner, or one a layout indexed by CHANNELS_INNER (the blur max pool's forward)."""
    for all_configs, kernel_cases in ((True, every_config), (False, one_config)):
        for tuners, data_pointers, constexprs in kernel_cases:
            tuners = tuners if isinstance(tuners, dict) else {False: tuners, True: tuners}
            pointers = {name: "bf16" for name in data_pointers}
            names = tuners[False].fn.arg_names
            if "argmax_ptr" in names:
                pointers["argmax_ptr"] = "u8"
            for layout_stride, channels_inner in (("stride_w", False), ("stride_c", True)):  # NCHW, then NHWC
                kernel = tuners[channels_inner]
                config = kernel.configs[-1 if channels_inner else 0]
                unit = tuple(n for n in names if n.endswith(layout_stride))
                if all_configs:
                    case = KernelCase(kernel, pointers, {**constexprs, "ACC": tl.float32}, unit_strides=unit)
                else:
                    assert config.num_warps == 4
                    case = KernelCase(kernel.fn, pointers, {**constexprs, **config.kwargs, "ACC": tl.float32},
                                      unit_strides=unit)
                nhwc = case.layout() == "NHWC"
                blur = case.jit_function().__name__ in ("_blurpool_forward_kernel", "_blurpool_backward_kernel")
                launch = _launch(case)
                grouping = _grouping(case.jit_function().__name__, launch, case.constexprs["STRIDE"])
                case = replace(case, constexprs={**case.constexprs, **grouping})
                yield replace(case, divisible=multiples_of_16(launch), representative=-1 if nhwc else 0,
                              streaming=_streaming(case), fills_16_bytes=blur and nhwc)


def _blurpool_compile_cases():
    forward, backward = blur_kernels._blurpool_forward_kernel, blur_kernels._blurpool_backward_kernel
    return _compile_cases([(forward, ("x_ptr", "out_ptr"), {"STRIDE": 2}),
                           (forward, ("x_ptr", "out_ptr"), {"STRIDE": 1}),  # and stride 1's backward
                           (backward, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 2}),
                           (backward, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 3})])


def _blur_maxpool_compile_cases():
    """Its forward and its max pool's backward (its blur's backward is blurpool2d's). The forward's other paths
    (stride 1, a pooled width that is not a multiple of 4, from stride 3, from 4 the rows no output reads, kernels
    too large to keep input rows) and a 5 x 5 max pool's backward in one config each, not every config (some take
    30 s)."""
    forward, backward = pool_kernels._blur_maxpool_forward, pool_kernels._max_pool_backward_kernel
    images, gradients = ("x_ptr", "out_ptr"), ("grad_pooled_ptr", "grad_in_ptr")
    return _compile_cases(
        [(forward, images, {"KERNEL": 3, "STRIDE": 2, "PADDING": 1}),
         (backward, gradients, {"KERNEL": 3, "STRIDE": 2, "PADDING": 1})],
        [(forward, images, {"KERNEL": 3, "STRIDE": 1, "PADDING": 1}),
         (forward, images, {"KERNEL": 2, "STRIDE": 2, "PADDING": 0}),  # VGG's: argmax rows padded to words
         (forward, images, {"KERNEL": 3, "STRIDE": 3, "PADDING": 0}),
         (forward, images, {"KERNEL": 2, "STRIDE": 4, "PADDING": 1}),
         (forward, images, {"KERNEL": 7, "STRIDE": 2, "PADDING": 3}),
         (backward, gradients, {"KERNEL": 5, "STRIDE": 2, "PADDING": 2})])


BLURPOOL = KernelSpec(
    "blurpool2d", _blurpool, _blurpool_reference,  # the reference is what a user runs: cuDNN's depthwise conv
    lambda device, dtype, tiny: (channels_last_image((2, 4, 8, 8) if tiny else (64, 256, 56, 56), device, dtype),),
    forward_launches=1, backward_launches=1, benchmark_cases=blurpool_cases,
    correctness_cases=lambda small: _correctness_cases("blurpool2d", _blurpool, _blurpool_reference, small),
    compile_cases=_blurpool_compile_cases,
    rival_text="cuDNN's depthwise convolution with a cached filter", launches_text="",
    goals=(Goal("ref", 2.0, "at least 2x cuDNN's depthwise convolution"),
           # Both move the same bytes: the gain is in reaching the bound, so the bound is the goal.
           Goal("floor", 1 / 1.3, "within 1.3x of its bytes at the device's peak bandwidth")))
BLUR_MAXPOOL = KernelSpec(
    "blur_maxpool2d", _blur_maxpool, _blur_maxpool_reference,  # the reference: max_pool2d, then the blur
    lambda device, dtype, tiny: (channels_last_image((2, 4, 8, 8) if tiny else (64, 64, 112, 112), device, dtype),),
    forward_launches=1, backward_launches=2, benchmark_cases=blur_maxpool_cases,
    correctness_cases=lambda small: _correctness_cases("blur_maxpool2d", _blur_maxpool, _blur_maxpool_reference,
                                                       small),
    compile_cases=_blur_maxpool_compile_cases,
    rival_text="`F.max_pool2d(x, 3, stride=1, padding=1)`, then the stride-2 blur",
    launches_text="backward: the blur's, then the max pool's routing",
    goals=(Goal("ref", 3.0, "at least 3x max_pool2d then the blur"),
           Goal("ref", 1.0, "at no more than their peak memory", metric="peak_MB")))
