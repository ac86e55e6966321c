"""The compiling of ``python -m benchmarks.kernels.precompile`` (its module says what it does), imported once its
command line is parsed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
import torch
from torch.overrides import TorchFunctionMode
from tqdm import tqdm

from benchmarks.gpu_check import correctness
from benchmarks.gpu_check.parts import Mode
from fastcore_ops.kernels import backend

from . import KernelSpec, forward_backward
from .fake_driver import launching_nothing
from .host_costs import triton_path
from .registry import KERNELS
from .retune import TUNED_DTYPES
from .runner import GPU_DEFAULT_BATCH, GPU_DEFAULT_DTYPE
from .tuning import kept_configs

CPU = torch.device("cpu")


class CudaOnTheCpu(TorchFunctionMode):
    """Within it, a tensor asked for on CUDA is made on the CPU: a GPU run's inputs at its sizes, which the
    benchmark cases choose by the device they are given.

        >>> with CudaOnTheCpu():
        ...     torch.zeros(2, device="cuda").device
        device(type='cpu')
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "cuda":
            kwargs = {**kwargs, "device": CPU}
        return func(*args, **kwargs)


@contextlib.contextmanager
def compiling_only():
    """Within the block, kernels called on CPU tensors compile for sm_90 into Triton's cache and launch nothing."""
    with triton_path(), launching_nothing(record=False):
        yield


def _benchmark_calls(specs: tuple[KernelSpec, ...], dtypes: list[torch.dtype]) -> list[tuple]:
    """(function, inputs maker) of the benchmark cases of ``specs`` at a GPU's sizes, in each of ``dtypes``."""
    cuda = torch.device("cuda")
    return [(case.ours, case.make_inputs) for spec in specs for dtype in dtypes
            for case in spec.benchmark_cases(GPU_DEFAULT_BATCH, dtype, cuda, False)]


def correctness_calls(specs: tuple[KernelSpec, ...] = KERNELS) -> list[tuple]:
    """The GPU check's correctness part: every case in every dtype a GPU checks, in its order."""
    return [(lambda *leaves, case=case: case.ours(*case.call(list(leaves))),
             lambda case=case, dtype=dtype: tuple(case.make(dtype, CPU)))
            for case, dtype in correctness.breadth_first(correctness.all_cases(False, specs), Mode(small=False).dtypes)]


def timing_calls(specs: tuple[KernelSpec, ...] = KERNELS) -> list[tuple]:
    """``python -m benchmarks.kernels`` on a GPU: every kernel's cases at its default batch and dtype."""
    return _benchmark_calls(specs, [getattr(torch, GPU_DEFAULT_DTYPE)])


def retune_calls(specs: tuple[KernelSpec, ...] = KERNELS) -> list[tuple]:
    """``python -m benchmarks.kernels.retune --only-new``: the cases in the dtypes it tunes by default."""
    return _benchmark_calls(specs, [getattr(torch, name) for name in TUNED_DTYPES.split(",")])


@contextlib.contextmanager
def tuning_new_keys():
    """Within the block, each autotuner compiles every config at a key the table lacks, as a retune ``--only-new``
    times them, and keeps the table's config at the keys it holds."""
    kept = kept_configs(backend.load_tuned_configs(backend.TUNED_CONFIGS), backend.TUNED_CONFIGS)
    for name, tuner in backend.TUNERS.items():
        tuner.cache.clear()
        tuner.cache.update(kept.get(name, {}))

    def compile_once(kernel_call, quantiles):  # the benchmark of one config: its launch compiles it
        kernel_call()
        return [0.0] * len(quantiles)

    try:
        with backend.tuning(), mock.patch.object(backend, "_short_benchmark", compile_once):
            yield
    finally:
        for tuner in backend.TUNERS.values():  # the keys met while tuning hold configs nothing chose
            tuner.cache.clear()


def compile_calls(part: str, calls: list[tuple], tuning: bool = False) -> None:
    """Make each call forward and backward (``calls``: function and inputs maker) with the kernels compiling
    only, inputs asked for on CUDA made on the CPU."""
    with compiling_only(), (tuning_new_keys() if tuning else contextlib.nullcontext()):
        for function, make_inputs in tqdm(calls, desc=part, leave=False):
            with CudaOnTheCpu():
                inputs = make_inputs()
            forward_backward(function, inputs)  # the values are whatever memory held: nothing ran


def compile_tests() -> bool:
    """``pytest -m gpu tests/kernels`` with tests/kernels/compile_only.py, in a child (the plugin must load before
    the conftests), a worker a core (compiling is all they do). Whether pytest ran the tests: their failures say
    nothing of the kernels, as none ran."""
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/kernels", "-p", "tests.kernels.compile_only",
               "-q", "-p", "no:cacheprovider", "--tb=no", "--no-header", "-rN", "--numprocesses=auto"]
    status = subprocess.run(command).returncode
    if status > pytest.ExitCode.TESTS_FAILED:
        print(f"tests: pytest stopped with exit status {status} before running them all", file=sys.stderr)
    return status <= pytest.ExitCode.TESTS_FAILED


def cached_kernels(cache: Path) -> int:
    """How many compiled kernels Triton's cache folder holds: one group file each."""
    return sum(1 for _ in cache.glob("*/__grp__*.json"))


def run(args: argparse.Namespace) -> int:
    """Compile the parts ``args`` (``python -m benchmarks.kernels.precompile``'s) names into ``--cache``; the
    command's exit status."""
    cache = Path(os.environ["TRITON_CACHE_DIR"])  # set by the command, before Triton was imported
    cache.mkdir(parents=True, exist_ok=True)
    parts = {"correctness": correctness_calls, "timing": timing_calls, "retune": retune_calls}
    tests_ran = True
    for part in args.parts:
        before, started = cached_kernels(cache), time.perf_counter()
        if part == "tests":
            tests_ran = compile_tests()
        else:
            compile_calls(part, parts[part](), tuning=part == "retune")
        print(f"{part}: {cached_kernels(cache) - before} kernels compiled in {time.perf_counter() - started:.0f} s",
              flush=True)
    print(f"{cache}: {cached_kernels(cache)} kernels compiled for sm_90 with Triton {backend.triton.__version__}")
    return 0 if tests_ran else 1
