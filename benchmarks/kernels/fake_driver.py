"""Triton's launch path on a CPU: a CUDA driver for Triton that compiles for an H100 and launches nothing.

Triton asks its active driver for the device, its stream and its target, compiles for the target (sm_90 needs
no GPU: tests/kernels/h100_compile.py compiles that way too), loads the binary and builds a launcher. This
driver answers all of that, and its launcher reads each tensor argument's address, as the real one does, and
records the launch instead of making it. Every Python step of a launch (the autotuner's, the JIT function's
binding, specialisation and cache lookup, the grid) then runs as on a GPU's host, so it can be timed, and
compared, on a CPU. With the interpreter on there is no launch path to run: Triton runs kernels as NumPy.

    >>> with launching_nothing() as launches:  # doctest: +SKIP
    ...     blurpool2d(x)  # x: a CPU tensor, sent down the Triton path
    >>> launches[0].grid  # doctest: +SKIP
    (2, 1, 1)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from unittest import mock

# Not a real device's number: the kernels compiled under this driver are cached apart from a real device's,
# so a real launch in the same process never finds one whose launcher launches nothing.
FAKE_DEVICE = -1
H100_PROPERTIES = {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536, "warpSize": 32}


@dataclass(frozen=True)
class Launch:
    """One launch the driver was asked for: the kernel's name, its compiled binary's hash (its config and its
    specialisation), its grid, and its arguments as passed."""

    kernel: str
    binary: str
    grid: tuple[int, int, int]
    arguments: tuple


class _Utils:
    def load_binary(self, name, kernel, shared, device):
        return object(), object(), 0, 0, 1024  # module, function, registers, spills, threads a block at most

    def unload_module(self, module):
        pass

    def get_device_properties(self, device):
        return dict(H100_PROPERTIES)


class _NoLaunchDriver:
    """The parts of Triton's ``CudaDriver`` a compile and a launch use (Triton 3.6 and 3.8 alike)."""

    def __init__(self):
        self.launches: list[Launch] | None = None  # the current block's, where it records (see launching_nothing)
        self.utils = _Utils()

    def get_current_device(self):
        return FAKE_DEVICE

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_benchmarker(self):
        raise RuntimeError("the fake driver runs nothing to time: tune on a GPU (python -m benchmarks.kernels.retune)")

    def launcher_cls(self, source, metadata):
        driver = self  # Triton keeps a kernel's launcher, made once: it records into whichever block is current

        def launch(grid_0, grid_1, grid_2, stream, function, packed_metadata, launch_metadata, enter_hook,
                   exit_hook, *arguments):
            for argument in arguments:
                if hasattr(argument, "data_ptr"):
                    argument.data_ptr()
            if driver.launches is not None:
                driver.launches.append(Launch(metadata.name, metadata.hash, (grid_0, grid_1, grid_2), arguments))

        return launch


@contextlib.contextmanager
def launching_nothing(record: bool = True):
    """Within the block, Triton compiles for an H100 and launches nothing; yields the list of the launches asked
    for, which it fills if ``record`` (a timing leaves it off: a kept launch keeps its tensors alive)."""
    from triton.runtime.driver import driver

    from fastcore_ops.kernels import backend

    if backend.INTERPRETING:
        raise RuntimeError("Triton's launch path runs only with the interpreter off (unset FASTCORE_OPS_INTERPRET "
                           "and TRITON_INTERPRET)")
    launches: list[Launch] = []
    with mock.patch.object(driver, "_active", _DRIVER), mock.patch.object(_DRIVER, "launches",
                                                                        launches if record else None):
        yield launches


# One for the process: the kernels compiled under it keep launchers that record into its list.
_DRIVER = _NoLaunchDriver()
