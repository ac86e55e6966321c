"""Part 1: every Triton kernel, compiled (or interpreted in small mode), against its fp32 reference.

Each case runs the kernel and its reference from the same inputs, forward and backward with the
same output gradient, and compares the output and every input gradient with the tolerance of the
storage dtype. Cases cover odd sizes, several shapes, channels_last and non-contiguous inputs
(a strided slice; attention's query, key and value as the (B, T, H, D) transposes GPT code passes).
"""

from __future__ import annotations

import torch

from benchmarks.gpu_check.parts import Mode, Recorder
from benchmarks.kernels import CorrectnessCase, KernelSpec
from benchmarks.kernels.registry import KERNELS
from fastcore_ops.kernels import rivals

# Against an fp32 reference rounded to the storage dtype, for outputs and gradients alike.
TOLERANCES = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def all_cases(small: bool, specs: tuple[KernelSpec, ...] = KERNELS) -> list[CorrectnessCase]:
    """Every kernel's cases (its declaration's, of ``specs``): tiny ones for Triton's interpreter when ``small``."""
    return [case for spec in specs for case in spec.correctness_cases(small)]


@rivals.kernels_always()  # the kernel's values, wherever the table of faster rivals would send its call
def largest_errors(case: CorrectnessCase, dtype: torch.dtype, device: torch.device) -> tuple[float, float]:
    """(largest output error, largest gradient error) of ``case`` in ``dtype``, each relative to the tolerance's
    scale: |ours - reference| / (1 + |reference|), so 1e-3 means a thousandth of the value (or of 1)."""
    torch.manual_seed(0)
    leaves = case.make(dtype, device)
    reference_leaves = [leaf.detach().to(torch.float32 if leaf.dtype == dtype else leaf.dtype, copy=True)
                        .requires_grad_(leaf.requires_grad) for leaf in leaves]
    output = case.ours(*case.call(leaves))
    expected = case.reference(*case.call(reference_leaves))
    # One output gradient for both, in the storage dtype: the reference given the unrounded one differs by that
    # rounding alone, which a sum over many elements grows past fp16's tolerance (Ghost BatchNorm's bias
    # gradient, 0.022, on the H200: reports/lent-gpu-h200-20261204).
    output_gradient = torch.randn(expected.shape, device=device).to(output.dtype)
    output.backward(output_gradient)
    expected.backward(output_gradient.to(expected.dtype))
    pairs = [(output, expected)] + [(leaf.grad, reference.grad) for leaf, reference in zip(leaves, reference_leaves)
                                    if leaf.requires_grad]
    errors = [_relative_error(ours, reference.to(ours.dtype)) for ours, reference in pairs]
    return errors[0], max(errors[1:])


def _relative_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    ours, reference = ours.double(), reference.double()
    return ((ours - reference).abs() / (1 + reference.abs())).max().item()


def breadth_first(cases: list[CorrectnessCase],
                  dtypes: tuple[torch.dtype, ...]) -> list[tuple[CorrectnessCase, torch.dtype]]:
    """Every (case, dtype), each kernel's first case in every dtype before any kernel's second.

    A part stopped at its budget has then checked every kernel in every dtype: on the first GPU run,
    tuning let it finish 9 cases, all BlurPool's (reports/gpu-check-h200-20261128).
    """
    rank, seen = {}, {}
    for case in cases:
        rank[id(case)] = seen.get(case.kernel, 0)
        seen[case.kernel] = rank[id(case)] + 1
    kernels = list(seen)
    pairs = [(case, dtype) for case in cases for dtype in dtypes]
    return sorted(pairs, key=lambda pair: (rank[id(pair[0])], dtypes.index(pair[1]), kernels.index(pair[0].kernel)))


def run(mode: Mode, record: Recorder) -> None:
    """Check every case in every dtype of ``mode``, breadth first; one row each."""
    for case, dtype in breadth_first(all_cases(mode.small), mode.dtypes):
        tolerance = TOLERANCES[dtype]
        output_error, gradient_error = largest_errors(case, dtype, mode.device)
        record.row(kernel=case.kernel, dtype=dtype, shape=case.shape, layout=case.layout,
                   output_error=output_error, gradient_error=gradient_error, tolerance=tolerance,
                   passed=max(output_error, gradient_error) <= tolerance)
    if mode.small:
        record.note("Small mode: Triton's interpreter on the CPU, tiny shapes, fp32 and fp16 only (the interpreter "
                    "computes bf16 wrongly). It shows the check runs, not that the compiled kernels are right.")
    record.note("An error is |ours - reference| / (1 + |reference|), the largest over the output and every input "
                "gradient, against an fp32 reference rounded to the storage dtype.")
