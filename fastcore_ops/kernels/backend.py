"""Where a kernel runs: the one place that looks at devices and at Triton's interpreter.

CUDA tensors run the Triton kernels. CPU tensors run the pure-PyTorch references,
unless ``FASTCORE_OPS_INTERPRET=1`` (or Triton's own ``TRITON_INTERPRET=1``) is set
before ``fastcore_ops`` is imported: then the Triton kernels run on the CPU through
Triton's interpreter, which is how the test suite exercises every kernel on machines
without a GPU.

Example:
    >>> from fastcore_ops.kernels import backend
    >>> backend.use_triton(torch.zeros(1))  # False on the CPU unless interpreting
    False
"""

from __future__ import annotations

import os
import sys

import torch

INTERPRET_VARIABLE = "FASTCORE_OPS_INTERPRET"

# Triton decides between compiling and interpreting when a function is decorated, its own
# library functions (tl.zeros, ...) included, so the variable must be set before Triton is
# first imported.
if os.environ.get(INTERPRET_VARIABLE, "0") == "1" and os.environ.get("TRITON_INTERPRET") != "1":
    if "triton" in sys.modules:
        raise RuntimeError(
            f"{INTERPRET_VARIABLE}=1 asks for Triton's interpreter, but triton was imported before fastcore_ops "
            f"without TRITON_INTERPRET=1; import fastcore_ops first, or set TRITON_INTERPRET=1 in the environment"
        )
    os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402  (must come after TRITON_INTERPRET is settled)

INTERPRETING: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"


def use_triton(*tensors: torch.Tensor) -> bool:
    """True when the Triton kernel should run for these tensors, False for the reference.

    The caller has already checked that all tensors share one device.
    """
    device_type = tensors[0].device.type
    if device_type == "cuda":
        return True
    return device_type == "cpu" and INTERPRETING


def autotune(configs: list[triton.Config], key: list[str], interpreter_config: triton.Config | None = None):
    """``triton.autotune`` that also works under the interpreter.

    The interpreter has no GPU benchmarker, so there a single config runs as is (with one
    config Triton does not benchmark): ``interpreter_config`` if given, else the first.
    The interpreter's cost is per block operation, so large tiles make it fast.
    """
    if INTERPRETING:
        return triton.autotune(configs=[interpreter_config or configs[0]], key=key, do_bench=_no_benchmark)
    return triton.autotune(configs=configs, key=key)


def _no_benchmark(kernel_call, quantiles):
    raise RuntimeError("the Triton interpreter has no benchmarker; autotune must see a single config")


def accumulator(dtype: torch.dtype):
    """The Triton dtype kernels accumulate in: fp64 for fp64 inputs (so gradcheck is exact), fp32 otherwise."""
    return triton.language.float64 if dtype == torch.float64 else triton.language.float32
