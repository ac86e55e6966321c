"""Ghost BatchNorm cases: ResNet-50 activation shapes, eight ghost batches per batch (32 of 256).

Each is timed against the loop a user runs instead (``ref``: ``F.batch_norm`` per chunk, then
``torch.cat``), on CUDA the same loop through ``torch.compile`` (``compiled``), and against one
``F.batch_norm`` over the whole batch (``batch_norm``): other statistics, but the same passes over
memory, so the speed a fused ghost batch norm can at best reach.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fastcore_ops.kernels import ghost_batch_norm
from fastcore_ops.kernels import ghost_batchnorm as kernels
from fastcore_ops.kernels.backend import tl
from fastcore_ops.kernels.ghost_batchnorm import _plan, ghost_batch_norm_reference

from . import Case, CorrectnessCase, Goal, KernelSpec, Traffic, channels_last_image, compiled_on_first_call
from .compile_cases import KernelCase, Streaming, multiples_of_16

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


_compiled_reference = compiled_on_first_call(ghost_batch_norm_reference)


def _full_batch_norm(x, weight, bias, running_mean, running_var):
    """One batch norm over the whole batch: the speed limit of a ghost batch norm."""
    return F.batch_norm(x, running_mean, running_var, weight, bias, True)


def cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    ghost = max(2, batch // CHUNKS)
    others = {"batch_norm": _full_batch_norm}
    if device.type == "cuda":
        others["compiled"] = lambda x, w, b, m, v: _compiled_reference(x, m, v, w, b, True, ghost_batch_size=ghost)
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
                ours, reference, others=others, shape=shape,
            ))
    return result


def correctness_cases(small: bool) -> list[CorrectnessCase]:
    # (shape, ghost batch size): the last has a short final chunk.
    shapes = [((10, 3, 5, 5), 4)] if small else [((256, 64, 28, 28), 32), ((96, 30, 7, 9), 32), ((10, 3, 5, 5), 4)]
    result = []
    for shape, ghost in shapes:
        for layout in (torch.contiguous_format, torch.channels_last):
            def make(dtype, device, shape=shape, layout=layout):
                channels = shape[1]
                x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=layout)
                return [x.requires_grad_(), torch.rand(channels, device=device).add_(0.5).requires_grad_(),
                        torch.randn(channels, device=device).requires_grad_(),
                        torch.zeros(channels, device=device), torch.ones(channels, device=device)]

            result.append(CorrectnessCase(
                "ghost_batch_norm", f"{'x'.join(map(str, shape))} G{ghost}",
                "channels_last" if layout == torch.channels_last else "contiguous", make, lambda leaves: tuple(leaves),
                lambda x, w, b, mean, var, ghost=ghost: ghost_batch_norm(x, mean, var, w, b, True,
                                                                         ghost_batch_size=ghost),
                lambda x, w, b, mean, var, ghost=ghost: ghost_batch_norm_reference(x, mean, var, w, b, True,
                                                                                   ghost_batch_size=ghost)))
    return result


def _step_inputs(device, dtype, tiny):
    # Eight chunks of 32, as in training; tiny keeps them, since the reference loops over them.
    channels, size = (4, 2) if tiny else ACTIVATIONS[1]
    weight = torch.ones(channels, device=device, requires_grad=True)
    bias = torch.zeros(channels, device=device, requires_grad=True)
    running = (torch.zeros(channels, device=device), torch.ones(channels, device=device))
    return channels_last_image((256, channels, size, size), device, dtype), weight, bias, *running


# The launch each layout's compile check reads: ResNet-50 at batch 256 with ghost batch 32, its first stage
# (64 channels of 56 x 56) channels-last and NCHW, and its last (2048 of 7 x 7) NCHW.
_LAUNCHES = {"rows": ((256, 64, 56, 56), torch.channels_last), "planes": ((256, 64, 56, 56), torch.contiguous_format),
             "flat": ((256, 2048, 7, 7), torch.contiguous_format)}


def _launch(layout: str) -> dict[str, int]:
    """The sizes a launch of ``layout`` passes (_LAUNCHES)."""
    shape, memory_format = _LAUNCHES[layout]
    plan = _plan(torch.empty(shape, device="meta", memory_format=memory_format), 32)
    assert plan.layout == layout
    return {"N": plan.N, "C": plan.C, "HW": plan.HW, "G": plan.G, "S": plan.splits, "SPLIT": plan.split_units}


def _compile_cases():
    data, stats = "bf16", "fp32"  # bf16 activations and parameters, fp32 statistics buffers
    # Per element: the statistics and backward sums read x (and g) and store nothing in their loops; normalize
    # reads x and writes y; backward reads g and x and writes grad_x.
    passes = [
        (kernels._forward_stats, {"x_ptr": data, "partial_ptr": stats}, {}, Streaming(2, 2, counts_loads=True)),
        (kernels._forward_normalize, {"x_ptr": data, "out_ptr": data, "weight_ptr": data, "bias_ptr": data,
                                      "partial_ptr": stats, "mean_ptr": stats, "var_ptr": stats},
         {"HAS_WEIGHT": True, "HAS_BIAS": True}, Streaming(2, 4)),
        (kernels._backward_sums, {"grad_ptr": data, "x_ptr": data, "mean_ptr": stats, "var_ptr": stats,
                                  "partial_ptr": stats}, {}, Streaming(4, 4, counts_loads=True)),
        (kernels._backward, {"grad_ptr": data, "x_ptr": data, "weight_ptr": data, "mean_ptr": stats,
                             "var_ptr": stats, "partial_ptr": stats, "grad_x_ptr": data, "grad_weight_ptr": stats,
                             "grad_bias_ptr": stats}, {"HAS_WEIGHT": True}, Streaming(2, 6)),
    ]
    # The layouts are not strides here but the constexprs PLANES and FLAT (rows of contiguous channels, NCHW
    # planes, or NCHW's small planes end to end), each with its own autotuner and tile configs; rows and flat
    # tiles give a thread 16 contiguous bytes, the 7 x 7 planes' in the config meant for them.
    flat_7x7 = kernels._FLAT_CONFIGS.index(kernels._flat_config(kernels._FLAT_CONFIGS, {"HW_BUCKET": 64}))
    for tuned, pointers, constexprs, streaming in passes:
        for layout in ("rows", "planes", "flat"):
            yield KernelCase(tuned[layout], pointers, {**constexprs, "PLANES": layout != "rows",
                                                       "FLAT": layout == "flat", "ACC": tl.float32},
                             floats=("eps",), divisible=multiples_of_16(_launch(layout)), streaming=streaming,
                             representative=flat_7x7 if layout == "flat" else 0,
                             fills_16_bytes=layout != "planes")
    # Its N, C, HW and G, all multiples of 16 at that launch.
    sizes = {name: value for name, value in _launch("rows").items() if name in ("N", "C", "HW", "G")}
    yield KernelCase(
        kernels._running_stats_kernel,
        {"running_mean_ptr": stats, "running_var_ptr": stats, "mean_ptr": stats, "var_ptr": stats},
        {"ACC": tl.float32, "BLOCK_C": kernels._RUNNING_BLOCK_C, "BLOCK_K": kernels._RUNNING_BLOCK_K},
        floats=("momentum_high", "momentum_low"), divisible=multiples_of_16(sizes),
    )


SPEC = KernelSpec(
    "ghost_batch_norm",
    lambda x, w, b, m, v: ghost_batch_norm(x, m, v, w, b, True, ghost_batch_size=32),
    # What a user runs instead, the reference: F.batch_norm on each chunk, then torch.cat.
    lambda x, w, b, m, v: ghost_batch_norm_reference(x, m, v, w, b, True, ghost_batch_size=32),
    _step_inputs, forward_launches=3, backward_launches=2, benchmark_cases=cases,
    correctness_cases=correctness_cases, compile_cases=_compile_cases,
    # Full-batch batch norm makes the same passes, so it bounds ours; the loop moves 1.5x the bytes and
    # reached 55% of an H200's bandwidth: 2x leaves room (docs/kernels.md).
    goals=(Goal("batch_norm", 1 / 1.15, "within 1.15x of one F.batch_norm over the whole batch"),
           Goal("ref", 2.0, "at least 2x the per-chunk F.batch_norm loop")),
    rival_text="`F.batch_norm` on each chunk, then `torch.cat`",
    launches_text="forward: statistics, normalize, running statistics; backward: sums, gradients")
