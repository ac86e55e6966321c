"""A toy kernel declared the way every kernel is (benchmarks/kernels/*.py), in a test helper: doubling.

tests/kernels/test_declarations.py sends it through every check and benchmark that reads the
declarations, to show that a new kernel needs its declaration and nothing else.
"""

import torch

from benchmarks.kernels import Case, CorrectnessCase, Goal, KernelSpec, Traffic
from benchmarks.kernels.compile_cases import KernelCase, Streaming, multiples_of_16
from fastcore_ops.kernels import backend, rivals
from fastcore_ops.kernels.backend import tl, triton
from fastcore_ops.kernels.custom_op import kernel_op

_BLOCK = 1024


@triton.jit
def _double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=inside) * 2, mask=inside)


@kernel_op("fastcore_ops_toy::double")
def _double_op(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel():
        _double_kernel[(backend.cdiv(x.numel(), _BLOCK),)](x, out, x.numel(), BLOCK=_BLOCK)
    return out


_double_op.register_fake(lambda x: torch.empty_like(x, memory_format=torch.contiguous_format))
_double_op.register_autograd(lambda ctx, grad: _double_op(grad))


def double(x: torch.Tensor) -> torch.Tensor:
    """2 x: the Triton kernel on CUDA (or under the interpreter), PyTorch elsewhere and where a GPU measured it
    faster (fastcore_ops/kernels/rivals.py)."""
    return _double_op(x) if rivals.kernel_runs("double", x) else x * 2


def _reference(x):
    return x * 2


def _inputs(device, dtype, tiny):
    return (torch.randn(8 if tiny else 2**24, device=device, dtype=dtype, requires_grad=True),)


def _benchmark_cases(batch, dtype, device, tiny=False):
    n = 1000 if tiny else 2**24
    traffic = Traffic(2 * n * 4, 4 * n * 4)
    make = lambda: (torch.randn(n, device=device, dtype=dtype, requires_grad=True),)  # noqa: E731
    return [Case("double", str(n), make, double, _reference, traffic, traffic)]


def _correctness_cases(small):
    make = lambda dtype, device: [torch.randn(37, device=device, dtype=dtype, requires_grad=True)]  # noqa: E731
    return [CorrectnessCase("double", "37", "contiguous", make, tuple, double, _reference)]


def _compile_cases():
    # fp32 in 4 warps of 1024 elements: 8 a thread, two 128-bit loads and stores; it reads and writes 4 bytes.
    yield KernelCase(_double_kernel, {"x_ptr": "fp32", "out_ptr": "fp32"}, {"BLOCK": _BLOCK},
                     divisible=multiples_of_16({"n": 2**24}), streaming=Streaming(4, 8), fills_16_bytes=True)


SPEC = KernelSpec("double", double, _reference, _inputs, forward_launches=1, backward_launches=1,
                  benchmark_cases=_benchmark_cases, correctness_cases=_correctness_cases,
                  compile_cases=_compile_cases, goals=(Goal("ref", 1.0, "as fast as doubling in PyTorch"),),
                  rival_text="`x * 2`", launches_text="")
