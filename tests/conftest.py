"""Shared test fixtures. Kernels run through Triton's interpreter (see the root conftest.py) unless a GPU is present."""

import os

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# Triton's interpreter computes bf16 wrongly on the CPU (fp32 and fp16 are right), so bf16
# cases run only where a GPU is, or where they only compile for one (tests/kernels/compile_only.py).
# The H100 compile test still builds every kernel for bf16.
bf16_needs_gpu = pytest.mark.skipif(
    DEVICE != "cuda" and os.environ.get("FASTCORE_OPS_COMPILE_ONLY") != "1",
    reason="bf16 runs only on a GPU: Triton's interpreter computes bf16 wrongly on the CPU",
)

FLOAT_DTYPES = [
    pytest.param(torch.float32, id="fp32"),
    pytest.param(torch.float16, id="fp16"),
    pytest.param(torch.bfloat16, id="bf16", marks=bf16_needs_gpu),
]

# Tolerances against an fp32 reference rounded to the storage dtype.
TOLERANCES = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
    torch.float64: dict(atol=1e-10, rtol=1e-10),
}


@pytest.fixture
def device():
    return DEVICE


def pytest_collection_modifyitems(items):
    """Mark ``gpu`` the tests that run on CUDA where there is a GPU: those of the kernels (but the modules marked
    ``cpu_alone``) and those taking the ``device`` fixture. ``pytest -m gpu`` runs them alone, the first thing to
    run on a GPU machine."""
    for item in items:
        kernel_test = item.nodeid.startswith("tests/kernels/") and not item.get_closest_marker("cpu_alone")
        if kernel_test or "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)
