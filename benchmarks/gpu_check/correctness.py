"""Part 1: every Triton kernel, compiled (or interpreted in small mode), against its fp32 reference.

Each case runs the kernel and its reference from the same inputs, forward and backward with the
same output gradient, and compares the output and every input gradient with the tolerance of the
storage dtype. Cases cover odd sizes, several shapes, channels_last and non-contiguous inputs
(a strided slice; attention's query, key and value as the (B, T, H, D) transposes GPT code passes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from benchmarks.gpu_check.parts import Mode, Recorder
from fastcore_ops.kernels import alibi_attention, bce_with_logits, blur_maxpool2d, blurpool2d, ghost_batch_norm
from fastcore_ops.kernels.alibi import alibi_attention_reference
from fastcore_ops.kernels.bce import bce_with_logits_reference
from fastcore_ops.kernels.blurpool import blur_maxpool2d_reference, blurpool2d_reference
from fastcore_ops.kernels.ghost_batchnorm import ghost_batch_norm_reference

# Against an fp32 reference rounded to the storage dtype, for outputs and gradients alike.
TOLERANCES = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 4e-2}


@dataclass(frozen=True)
class Case:
    """One kernel call: ``make(dtype, device)`` gives the leaf tensors, ``call(leaves)`` the arguments built from them.

    Only floating leaves of the storage dtype are cast for the reference; integer targets and the
    fp32 running statistics pass as they are.
    """

    kernel: str
    shape: str
    layout: str
    make: Callable[[torch.dtype, torch.device], list[torch.Tensor]]
    call: Callable[[list[torch.Tensor]], tuple]
    ours: Callable[..., torch.Tensor]
    reference: Callable[..., torch.Tensor]


def _image(shape, layout: str) -> Callable:
    def make(dtype, device):
        if layout == "strided":  # every other column of a wider image
            wide = torch.randn(*shape[:3], 2 * shape[3], device=device, dtype=dtype)
            return [wide.requires_grad_()]
        x = torch.randn(shape, device=device, dtype=dtype)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        return [x.requires_grad_()]

    return make


def _image_call(layout: str) -> Callable:
    return (lambda leaves: (leaves[0][..., ::2],)) if layout == "strided" else (lambda leaves: (leaves[0],))


def _blurpool_cases(small: bool) -> list[Case]:
    shapes = [(2, 5, 9, 7)] if small else [(32, 64, 56, 56), (3, 17, 33, 31), (2, 5, 9, 7)]
    cases = []
    for shape in shapes:
        for layout in ("contiguous", "channels_last", "strided"):
            cases.append(Case("blurpool2d", "x".join(map(str, shape)), layout, _image(shape, layout),
                              _image_call(layout), lambda x: blurpool2d(x, 2), lambda x: blurpool2d_reference(x, 2)))
            cases.append(Case("blur_maxpool2d", "x".join(map(str, shape)), layout, _image(shape, layout),
                              _image_call(layout), lambda x: blur_maxpool2d(x, 3, 2, 1),
                              lambda x: blur_maxpool2d_reference(x, 3, 2, 1)))
    return cases


def _bce_cases(small: bool) -> list[Case]:
    sizes = [(37, 11)] if small else [(2048, 1000), (37, 11), (4, 32000)]
    cases = []
    for n, c in sizes:
        def labels(dtype, device, n=n, c=c):
            return [torch.randn(n, c, device=device, dtype=dtype).requires_grad_(),
                    torch.randint(0, c, (n,), device=device)]

        def transposed_mixed(dtype, device, n=n, c=c):  # a (C, N) buffer read as (N, C): non-contiguous
            return [torch.randn(c, n, device=device, dtype=dtype).requires_grad_(),
                    torch.softmax(torch.randn(n, c, device=device), dim=1)]

        for layout, make, call in (("contiguous", labels, lambda leaves: tuple(leaves)),
                                   ("transposed", transposed_mixed, lambda leaves: (leaves[0].t(), leaves[1]))):
            cases.append(Case("bce_with_logits", f"{n}x{c}", layout, make, call,
                              lambda x, t: bce_with_logits(x, t, label_smoothing=0.1),
                              lambda x, t: bce_with_logits_reference(x, t, label_smoothing=0.1)))
    return cases


def _ghost_cases(small: bool) -> list[Case]:
    # (shape, ghost batch size): the last has a short final chunk.
    shapes = [((10, 3, 5, 5), 4)] if small else [((256, 64, 28, 28), 32), ((96, 30, 7, 9), 32), ((10, 3, 5, 5), 4)]
    cases = []
    for shape, ghost in shapes:
        for layout in ("contiguous", "channels_last"):
            def make(dtype, device, shape=shape, layout=layout):
                channels = shape[1]
                return [*_image(shape, layout)(dtype, device),
                        torch.rand(channels, device=device).add_(0.5).requires_grad_(),
                        torch.randn(channels, device=device).requires_grad_(),
                        torch.zeros(channels, device=device), torch.ones(channels, device=device)]

            cases.append(Case(
                "ghost_batch_norm", f"{'x'.join(map(str, shape))} G{ghost}", layout, make,
                lambda leaves: tuple(leaves),
                lambda x, w, b, mean, var, ghost=ghost: ghost_batch_norm(x, mean, var, w, b, True,
                                                                         ghost_batch_size=ghost),
                lambda x, w, b, mean, var, ghost=ghost: ghost_batch_norm_reference(x, mean, var, w, b, True,
                                                                                   ghost_batch_size=ghost)))
    return cases


def _alibi_cases(small: bool) -> list[Case]:
    shapes = [(1, 4, 33, 32)] if small else [(2, 12, 1000, 64), (1, 8, 257, 128), (3, 4, 33, 32)]
    cases = []
    for batch, heads, length, head_dim in shapes:
        def make(dtype, device, shape=(batch, length, heads, head_dim)):  # (B, T, H, D), as GPT code holds them
            return [torch.randn(shape, device=device, dtype=dtype).requires_grad_() for _ in range(3)]

        for causal in (True, False):
            cases.append(Case(
                "alibi_attention", f"{batch}x{heads}x{length}x{head_dim}{' causal' if causal else ''}",
                "transposed (B, T, H, D)", make, lambda leaves: tuple(t.transpose(1, 2) for t in leaves),
                lambda q, k, v, causal=causal: alibi_attention(q, k, v, is_causal=causal),
                lambda q, k, v, causal=causal: alibi_attention_reference(q, k, v, is_causal=causal)))
    return cases


def all_cases(small: bool) -> list[Case]:
    """Every kernel's cases: tiny ones for Triton's interpreter when ``small``."""
    return _blurpool_cases(small) + _bce_cases(small) + _ghost_cases(small) + _alibi_cases(small)


def largest_errors(case: Case, dtype: torch.dtype, device: torch.device) -> tuple[float, float]:
    """(largest output error, largest gradient error) of ``case`` in ``dtype``, each relative to the tolerance's
    scale: |ours - reference| / (1 + |reference|), so 1e-3 means a thousandth of the value (or of 1)."""
    torch.manual_seed(0)
    leaves = case.make(dtype, device)
    reference_leaves = [leaf.detach().to(torch.float32 if leaf.dtype == dtype else leaf.dtype, copy=True)
                        .requires_grad_(leaf.requires_grad) for leaf in leaves]
    output = case.ours(*case.call(leaves))
    expected = case.reference(*case.call(reference_leaves))
    output_gradient = torch.randn(expected.shape, device=device)
    output.backward(output_gradient.to(output.dtype))
    expected.backward(output_gradient)
    pairs = [(output, expected)] + [(leaf.grad, reference.grad) for leaf, reference in zip(leaves, reference_leaves)
                                    if leaf.requires_grad]
    errors = [_relative_error(ours, reference.to(ours.dtype)) for ours, reference in pairs]
    return errors[0], max(errors[1:])


def _relative_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    ours, reference = ours.double(), reference.double()
    return ((ours - reference).abs() / (1 + reference.abs())).max().item()


def breadth_first(cases: list[Case], dtypes: tuple[torch.dtype, ...]) -> list[tuple[Case, torch.dtype]]:
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
