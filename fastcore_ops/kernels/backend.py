"""Where a kernel runs: the one place that looks at devices, at Triton's interpreter, and at Triton itself.

CUDA tensors run the Triton kernels. CPU tensors run the pure-PyTorch references,
unless ``FASTCORE_OPS_INTERPRET=1`` (or Triton's own ``TRITON_INTERPRET=1``) is set
before ``fastcore_ops`` is imported: then the Triton kernels run on the CPU through
Triton's interpreter, which is how the test suite exercises every kernel on machines
without a GPU.

Triton is optional (there is none for macOS or Windows, and CPU-only images often lack it):
the kernel modules take ``triton`` and ``tl`` from here, and without Triton these are a
stand-in whose decorators leave functions undecorated. The kernels are then never launched:
CPU tensors run the references, and asking for a kernel (a CUDA tensor, or the interpreter
variables) raises a :class:`TritonMissingError` that says how to install Triton.

Example:
    >>> import torch
    >>> from fastcore_ops.kernels import backend
    >>> backend.use_triton(torch.zeros(1)) == backend.INTERPRETING  # on a CPU, Triton only to interpret
    True
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import types

import numpy
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

INTERPRETING: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"

# FASTCORE_OPS_AUTOTUNE=0, set before fastcore_ops is imported: each kernel runs its first config,
# untuned, so no call pays for tuning (the test suite on a GPU, where it checks values, not speed).
AUTOTUNE_VARIABLE = "FASTCORE_OPS_AUTOTUNE"
AUTOTUNING: bool = os.environ.get(AUTOTUNE_VARIABLE, "1") != "0"


class TritonMissingError(RuntimeError):
    """A Triton kernel was asked for (a CUDA tensor, or the interpreter) where Triton is not installed."""


def _stand_in_triton() -> tuple[types.ModuleType, types.ModuleType]:
    """Just enough of ``triton`` and ``triton.language`` for the kernel modules to import.

    Decorators return the function itself, configs are inert, and the host-side helpers the
    custom ops use on empty inputs (which launch nothing) compute what Triton's would.
    """
    language = types.ModuleType("triton.language (stand-in: Triton is not installed)")
    language.constexpr = lambda value=None: value
    stand_in = types.ModuleType("triton (stand-in: Triton is not installed)")
    stand_in.language = language
    stand_in.jit = lambda function=None, **options: function if function is not None else (lambda f: f)
    stand_in.autotune = lambda *args, **kwargs: (lambda function: function)
    stand_in.Config = lambda *args, **kwargs: None
    stand_in.cdiv = lambda a, b: -(-a // b)
    stand_in.next_power_of_2 = lambda n: 1 if n <= 1 else 2 ** math.ceil(math.log2(n))
    return stand_in, language


try:
    import triton  # noqa: E402  (must come after TRITON_INTERPRET is settled)
    import triton.language as tl  # noqa: E402

    TRITON_AVAILABLE = True
except ImportError:
    triton, tl = _stand_in_triton()
    TRITON_AVAILABLE = False


def _require_triton(reason: str) -> None:
    if not TRITON_AVAILABLE:
        raise TritonMissingError(
            f"{reason} needs Triton, which is not installed; install it with `pip install triton` (Linux only), "
            f"or unset {INTERPRET_VARIABLE} and TRITON_INTERPRET to run the PyTorch references on the CPU"
        )


def interpreter_problem(triton_version: str, numpy_version: str) -> str | None:
    """Why Triton's interpreter cannot run the kernels with these versions, or None.

        >>> interpreter_problem("3.6.0", "2.4.6")[:61]
        "Triton 3.6.0's interpreter turns one-element arrays into ints"
        >>> interpreter_problem("3.6.0", "2.3.5") is None and interpreter_problem("3.8.0", "2.4.6") is None
        True
    """
    def release(version: str) -> tuple[int, int]:
        major, minor = version.split(".")[:2]
        return int(major), int("".join(filter(str.isdigit, minor)) or 0)

    if release(triton_version) < (3, 7) and release(numpy_version) >= (2, 4):
        return (f"Triton {triton_version}'s interpreter turns one-element arrays into ints with int(), which NumPy "
                f"{numpy_version} refuses (triton-lang/triton#9171): install numpy<2.4, or Triton 3.7 or newer")
    return None


def use_triton(*tensors: torch.Tensor) -> bool:
    """True when the Triton kernel should run for these tensors, False for the reference.

    The caller has already checked that all tensors share one device. Raises
    :class:`TritonMissingError` when the kernel is wanted but Triton is not installed.
    """
    device_type = tensors[0].device.type
    if device_type == "cuda":
        _require_triton("a CUDA tensor")
        return True
    if device_type == "cpu" and INTERPRETING:
        _require_triton("TRITON_INTERPRET=1 (or FASTCORE_OPS_INTERPRET=1)")
        problem = interpreter_problem(triton.__version__, numpy.__version__)
        if problem is not None:
            raise RuntimeError(problem)
        return True
    return False


def autotune(configs: list[triton.Config], key: list[str], interpreter_config: triton.Config | None = None):
    """``triton.autotune`` that also works under the interpreter, and can be switched off.

    The interpreter has no GPU benchmarker, so there a single config runs as is (with one
    config Triton does not benchmark): ``interpreter_config`` if given, else the first.
    The interpreter's cost is per block operation, so large tiles make it fast. With
    ``FASTCORE_OPS_AUTOTUNE=0`` the first config runs, untuned.
    """
    if INTERPRETING:
        return triton.autotune(configs=[interpreter_config or configs[0]], key=key, do_bench=_no_benchmark)
    if not AUTOTUNING:
        return triton.autotune(configs=configs[:1], key=key)
    # Tuning benchmarks every config at every new key, and on a GPU it was most of the kernels'
    # first calls: 87% of the GPU check's correctness part (reports/gpu-check-h200-20261128). These
    # kernels run for microseconds to milliseconds, so a short benchmark ranks their configs, and
    # the choice is kept in Triton's cache folder for the next process (Triton 3.2 and newer).
    keep = {"cache_results": True} if "cache_results" in inspect.signature(triton.autotune).parameters else {}
    return triton.autotune(configs=configs, key=key, do_bench=_short_benchmark, **keep)


def _short_benchmark(kernel_call, quantiles):
    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


def _no_benchmark(kernel_call, quantiles):
    raise RuntimeError("the Triton interpreter has no benchmarker; autotune must see a single config")


def size_bucket(size: int) -> int:
    """The power of two at or above ``size``, which autotuners key on instead of the size itself.

    Sizes close together then share one tuning: each costs seconds per kernel on a GPU, and
    progressive resizing or a test's odd shapes would otherwise pay it at every new size.

        >>> size_bucket(33 * 31), size_bucket(33 * 33), size_bucket(1)
        (1024, 2048, 1)
    """
    return triton.next_power_of_2(max(int(size), 1))


def accumulator(dtype: torch.dtype):
    """The Triton dtype kernels accumulate in: fp64 for fp64 inputs (so gradcheck is exact), fp32 otherwise."""
    return tl.float64 if dtype == torch.float64 else tl.float32
