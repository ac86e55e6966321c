"""A kernel is declared once (benchmarks/kernels/registry.py) and every check and benchmark reads the
declaration: a toy kernel declared in a test helper goes through all of them, no other file edited (the sm_90
compile check: tests/kernels/test_h100_compile.py)."""

from pathlib import Path

import pytest
import torch

from benchmarks.gpu_check.correctness import TOLERANCES, largest_errors
from benchmarks.kernels import declarations, host_costs
from benchmarks.kernels.registry import KERNELS
from benchmarks.kernels.runner import measure
from tests.kernels import toy_kernel

pytestmark = pytest.mark.cpu_alone  # the declarations read, and the toy kernel run, on the CPU


def test_every_kernel_is_declared_once_under_its_public_name():
    import fastcore_ops.kernels as kernels

    names = [spec.name for spec in KERNELS]
    assert len(set(names)) == len(names)
    public = {name for name in kernels.__all__ if name not in ("alibi_slopes", "init_bce_bias_")}
    assert set(names) == public


def test_a_toy_kernel_goes_through_the_host_side_checks():
    spec = toy_kernel.SPEC
    phases = host_costs.launches_on_fake_gpu(spec)
    assert phases["forward"].launches == ["_double_kernel"] and phases["backward"].launches == ["_double_kernel"]
    row = host_costs.row(spec)
    assert row["host_waits"] == row["host_copies"] == row["zero_fills"] == []
    assert row["ours_host_us"] > 0 and row["rival_host_us"] > 0


def test_a_toy_kernel_goes_through_the_benchmark_and_the_correctness_check():
    spec = toy_kernel.SPEC
    cpu = torch.device("cpu")
    for case in spec.benchmark_cases(1, torch.float32, cpu, True):
        row = measure(case, cpu, time_ours=True, cpu_budget_s=0.0)
        assert row["ours_fwd_bwd_ms"] > 0 and row["ref_fwd_bwd_ms"] > 0
    for case in spec.correctness_cases(True):
        assert max(largest_errors(case, torch.float32, cpu)) <= TOLERANCES[torch.float32]


def test_the_docs_table_is_the_declarations():
    page = (Path(__file__).resolve().parents[2] / "docs" / "kernels.md").read_text()
    assert declarations.table(KERNELS) + "\n" in page, (
        "docs/kernels.md's table of kernels differs from the declarations: paste over it what "
        "python -m benchmarks.kernels.declarations prints")


def test_a_toy_kernel_gets_its_row_in_the_docs_table():
    row = declarations.table([toy_kernel.SPEC]).splitlines()[-1]
    assert row == "| `double` | 1 forward, 1 backward | `x * 2` | as fast as doubling in PyTorch |"


def test_the_correctness_check_gives_ours_and_the_reference_one_output_gradient():
    """A kernel exact up to its storage dtype passes in fp16 even where a sum over many elements would grow the
    output gradient's rounding past the tolerance (Ghost BatchNorm's bias gradient failed so on the H200)."""
    from benchmarks.kernels import CorrectnessCase

    def scale(x, w):  # exact in fp32, rounded once to the storage dtype: a kernel that keeps fp32 inside
        return (x.float() * w).to(x.dtype)

    case = CorrectnessCase(
        "scale", "8192x64", "contiguous",
        lambda dtype, device: [torch.randn(8192, 64, dtype=dtype, device=device).requires_grad_(),
                               torch.rand(64, device=device).add_(0.5).requires_grad_()],
        tuple, scale, scale)
    output_error, gradient_error = largest_errors(case, torch.float16, torch.device("cpu"))
    assert output_error == 0 and gradient_error < TOLERANCES[torch.float16] / 10
