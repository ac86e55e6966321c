"""Fused BCE-with-logits cases: ImageNet's 1000 classes and a 32000-token vocabulary, class indices first (the
main case), then MixUp's dense targets.

Each is timed against ``F.binary_cross_entropy_with_logits`` on the smoothed one-hot target in fp32, as
autocast runs it (``ref``), and on CUDA the same through ``torch.compile`` (``compiled``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fastcore_ops.kernels import bce as kernels
from fastcore_ops.kernels import bce_with_logits
from fastcore_ops.kernels.backend import tl
from fastcore_ops.kernels.bce import bce_with_logits_reference

from . import Case, CorrectnessCase, Goal, KernelSpec, Traffic, compiled_on_first_call, element_size
from .compile_cases import KernelCase, Streaming, multiples_of_16

SIZES = [(2048, 1000), (2048, 32000)]
LARGE_VOCABULARY = 32000  # from here the loss moves enough bytes to be bandwidth-bound (docs/kernels.md)
SMOOTHING = 0.1
TINY = [(37, 11)]  # the small mode's, which runs Triton's interpreter


def _reference_traffic(n: int, c: int, b: int, index_target: bool) -> Traffic:
    """ATen's composite ops, pass by pass, in fp32 (b is the logits' element size)."""
    nc = n * c
    upcast = 0 if b == 4 else nc * b + nc * 4  # logits.to(float32), and the gradient back
    # one_hot writes int64 and .to() converts it; the smoothing multiply and add are a pass each.
    target = (nc * 8 + nc * 8 + nc * 4) if index_target else 0
    target += 2 * (nc * 4 + nc * 4)
    # binary_cross_entropy_with_logits: log_sigmoid(x); (1 - t); .mul_(x); .sub_(log_sigmoid); sum.
    loss = 2 * nc * 4 + 2 * nc * 4 + 3 * nc * 4 + 3 * nc * 4 + nc * 4
    # backward: sigmoid(x); minus t; times grad / N.
    backward = 2 * nc * 4 + 3 * nc * 4 + 2 * nc * 4
    temporaries = (nc * 8 + nc * 4 if index_target else 0) + 3 * nc * 4
    forward = upcast + target + loss
    return Traffic(forward, forward + backward + upcast, temporaries)


def cases(batch: int, dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    """The timed sizes (fixed: ``batch`` is the CNN kernels')."""
    b, on_gpu = element_size(dtype), device.type == "cuda"
    result = []
    for index_target in (True, False):
        for n, c in TINY if tiny else SIZES:
            def make(n=n, c=c, index_target=index_target):
                logits = torch.randn(n, c, device=device, dtype=dtype).requires_grad_()
                if index_target:
                    target = torch.randint(0, c, (n,), device=device)
                else:  # a MixUp of two one-hot targets
                    target = torch.zeros(n, c, device=device)
                    target[torch.arange(n), torch.randint(0, c, (n,))] += 0.7
                    target[torch.arange(n), torch.randint(0, c, (n,))] += 0.3
                return logits, target

            nc = n * c
            target_bytes = n * 8 if index_target else nc * 4
            # One pass reads the logits (and targets) and writes the gradient; backward scales it.
            ours = Traffic(nc * b + target_bytes + nc * b, nc * b + target_bytes + nc * b + 2 * nc * b, nc * b)
            result.append(Case(
                "bce_with_logits", f"{n}x{c} {'labels' if index_target else 'mixed'}", make,
                _ours, _reference, ours, _reference_traffic(n, c, b, index_target),
                others={"compiled": _compiled_reference} if on_gpu else {}, shape=(n, c),
            ))
    return result


def correctness_cases(small: bool) -> list[CorrectnessCase]:
    sizes = [(37, 11)] if small else [(2048, 1000), (37, 11), (4, 32000)]
    result = []
    for n, c in sizes:
        def labels(dtype, device, n=n, c=c):
            return [torch.randn(n, c, device=device, dtype=dtype).requires_grad_(),
                    torch.randint(0, c, (n,), device=device)]

        def transposed_mixed(dtype, device, n=n, c=c):  # a (C, N) buffer read as (N, C): non-contiguous
            return [torch.randn(c, n, device=device, dtype=dtype).requires_grad_(),
                    torch.softmax(torch.randn(n, c, device=device), dim=1)]

        for layout, make, call in (("contiguous", labels, lambda leaves: tuple(leaves)),
                                   ("transposed", transposed_mixed, lambda leaves: (leaves[0].t(), leaves[1]))):
            result.append(CorrectnessCase("bce_with_logits", f"{n}x{c}", layout, make, call, _ours, _reference))
    return result


def _ours(logits, target):
    return bce_with_logits(logits, target, label_smoothing=SMOOTHING)


def _reference(logits, target):
    return bce_with_logits_reference(logits, target, label_smoothing=SMOOTHING)


_compiled_reference = compiled_on_first_call(_reference)


def _few_classes(case: Case) -> bool:
    return case.shape[1] < LARGE_VOCABULARY


def _many_classes(case: Case) -> bool:
    return case.shape[1] >= LARGE_VOCABULARY


def _users_loss(logits, target):
    """What a user writes without the kernel: a smoothed one-hot target, PyTorch's loss summed and divided by N."""
    C = logits.shape[1]
    dense = F.one_hot(target, C).to(logits.dtype) * (1 - SMOOTHING) + SMOOTHING / C
    return F.binary_cross_entropy_with_logits(logits, dense, reduction="sum") / logits.shape[0]


def _step_inputs(device, dtype, tiny):
    n, c = (4, 10) if tiny else SIZES[0]
    return torch.randn(n, c, device=device, dtype=dtype, requires_grad=True), torch.randint(0, c, (n,), device=device)


def _compile_cases():
    """ResNet-50's head at batch 256: 1000 classes, bf16 logits, rows 1000 apart (not a multiple of 16). The
    class count and row strides are passed in units of 8 elements (1000 = 8 x 125), as the op does where they
    allow, so each thread's loads and stores are 16 bytes."""
    samples, classes, unit = 256, 1000, 8
    for target_is_index, target_type in ((True, "i64"), (False, "fp32")):
        launch = {"C_units": classes // unit, "logits_stride": classes // unit,
                  "target_stride": 0 if target_is_index else classes // unit, "grad_stride": classes // unit}
        yield KernelCase(
            kernels._bce_forward_kernel,
            {"logits_ptr": "bf16", "target_ptr": target_type, "grad_ptr": "bf16", "row_loss_ptr": "fp32"},
            {"TARGET_IS_INDEX": target_is_index, "ACC": tl.float32, "UNIT": unit},
            floats=("keep", "add", "inv_batch"), divisible=multiples_of_16(launch),
            # Reads a logit (and a float target) and writes a gradient per element.
            streaming=Streaming(2, 2 + 2 if target_is_index else 2 + 4 + 2), fills_16_bytes=True,
        )
    yield KernelCase(
        kernels._scale_kernel, {"grad_ptr": "bf16", "scale_ptr": "fp32", "out_ptr": "bf16"}, {"BLOCK": 4096},
        divisible=multiples_of_16({"numel": samples * classes}), streaming=Streaming(2, 2 + 2),
    )


SPEC = KernelSpec("bce_with_logits", _ours, _users_loss, _step_inputs, forward_launches=2, backward_launches=1,
                  benchmark_cases=cases, correctness_cases=correctness_cases, compile_cases=_compile_cases,
                  # At 1000 classes the bytes take microseconds and launches decide: no slower is the bar.
                  goals=(Goal("ref", 1.0, "no slower than PyTorch's loss at 1000 classes", applies_to=_few_classes),
                         Goal("ref", 3.0, "at least 3x PyTorch's loss at 32000 classes", applies_to=_many_classes)),
                  rival_text="`F.binary_cross_entropy_with_logits` on a smoothed one-hot target",
                  launches_text="forward: one pass for the loss and gradient, one sum; "
                                "backward: scale the saved gradient")
