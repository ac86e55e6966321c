"""Where a GPU measured a kernel's rival faster, the kernel's public function runs the rival.

A kernel earns its place by beating what a user would otherwise run (docs/kernels.md, "Rooflines and goals").
Where a GPU run measured the rival's forward+backward faster on the device's own time, the public function runs
that rival, its PyTorch reference (the benchmarks' ``ref``, what it runs off the GPU too); everywhere else, and
on every GPU not measured, the kernel. The measurements are kept in ``faster_rivals.json`` beside this module,
which ``python -m benchmarks.kernels.faster_rivals`` updates from a GPU run's benchmark rows:

    {"blurpool2d": {"NVIDIA H200": {"nchw float16 256x256x32x32 stride=1":
        {"size": "256x256x28x28 nchw stride 1", "kernel_ms": 0.400, "rival_ms": 0.325}}}}

A call's cell (:func:`cell`) is its main input's layout, dtype and shape in size buckets (the powers of two the
autotuners key on), then the arguments that pick the kernel's code path. The table is read as untrusted data,
checked whole by :func:`load_faster_rivals`. It is consulted only on CUDA tensors, and only for a kernel it lists,
so an empty table costs a call one dictionary lookup.

The kernel stays an option: inside :func:`kernels_always` (the benchmarks time it so), or with
``FASTCORE_OPS_RIVALS=never`` set before import, every call on a GPU runs the kernel.

    >>> cell(torch.empty(256, 64, 28, 30), stride=1)
    'nchw float32 256x64x32x32 stride=1'
    >>> runs_rival("blurpool2d", torch.empty(256, 64, 28, 30), stride=1)  # a CPU tensor: never measured
    False
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

import torch

from . import backend
from .layout import is_channels_last

TABLE = Path(__file__).with_name("faster_rivals.json")
RIVALS_VARIABLE = "FASTCORE_OPS_RIVALS"
_MODES = ("measured", "never")
_TABLE_FIX = "rewrite it with python -m benchmarks.kernels.faster_rivals, or restore it with git"
_ENTRY_FIELDS = {"size", "kernel_ms", "rival_ms"}


class FasterRivalsError(ValueError):
    """The table of faster rivals is not one :func:`load_faster_rivals` accepts."""


def rivals_mode(value: str | None) -> str:
    """``FASTCORE_OPS_RIVALS``'s value checked: "measured" (the default: run the rival where it was measured
    faster) or "never" (always the kernel).

        >>> rivals_mode(None), rivals_mode("never")
        ('measured', 'never')
    """
    if value in (None, ""):
        return "measured"
    if value not in _MODES:
        raise ValueError(f"{RIVALS_VARIABLE}={value!r}: must be one of {', '.join(_MODES)} (unset: measured)")
    return value


_RUN_RIVALS = rivals_mode(os.environ.get(RIVALS_VARIABLE)) == "measured"


def load_faster_rivals(path: Path) -> dict[str, dict[str, dict[str, dict]]]:
    """The table at ``path``, checked: a JSON object of kernel names, each an object of device names (as
    ``torch.cuda.get_device_name`` gives them), each an object of cells, each the measurement that put it there:
    ``{"size": str, "kernel_ms": number, "rival_ms": number}`` with the rival the faster. Raises
    :class:`FasterRivalsError`, naming the file, for anything else."""
    table = backend.read_json_table(path, "table of faster rivals", FasterRivalsError, _TABLE_FIX)

    def refuse(where: str, problem: str):
        raise FasterRivalsError(f"{path}: {where}: {problem}; {_TABLE_FIX}")

    if not isinstance(table, dict):
        refuse("the table", "must be a JSON object of kernel names")
    for kernel, devices in table.items():
        if not isinstance(devices, dict):
            refuse(kernel, "must be a JSON object of device names")
        for device, cells in devices.items():
            if not isinstance(cells, dict):
                refuse(f"{kernel} on {device}", "must be a JSON object of cells")
            for where, entry in ((f"{kernel} on {device} at {name}", entry) for name, entry in cells.items()):
                if not isinstance(entry, dict) or set(entry) != _ENTRY_FIELDS:
                    refuse(where, 'must be an object of exactly "size", "kernel_ms" and "rival_ms"')
                if not isinstance(entry["size"], str):
                    refuse(where, '"size" must be the benchmark size measured, a string')
                if not all(_is_time(entry[key]) for key in ("kernel_ms", "rival_ms")):
                    refuse(where, '"kernel_ms" and "rival_ms" must be positive numbers of milliseconds')
                if entry["rival_ms"] >= entry["kernel_ms"]:
                    refuse(where, f'the rival ({entry["rival_ms"]} ms) is not faster than the kernel '
                                  f'({entry["kernel_ms"]} ms)')
    return table


def _is_time(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


# The calls inside recorded_cells(), as (kernel, cell); None outside it.
_RECORDED: list[tuple[str, str]] | None = None

# Read once, at import (as the tuned configs are): no call reads the file, eager or traced by torch.compile.
FASTER_RIVALS = load_faster_rivals(TABLE)


def cell(tensor: torch.Tensor, **arguments) -> str:
    """Where a call with main input ``tensor`` and code-path ``arguments`` falls in the table: the layout (nhwc,
    nchw or strided for 4-D tensors; contiguous or strided otherwise), the dtype, each dimension's size bucket,
    then ``name=value`` for each argument, in the order given."""
    if tensor.dim() == 4:
        layout = "nhwc" if is_channels_last(tensor) else "nchw" if tensor.is_contiguous() else "strided"
    else:
        layout = "contiguous" if tensor.is_contiguous() else "strided"
    shape = "x".join(str(backend.size_bucket(size)) for size in tensor.shape)
    return " ".join([layout, str(tensor.dtype).removeprefix("torch."), shape,
                     *(f"{name}={value}" for name, value in arguments.items())])


def kernel_runs(kernel: str, tensor: torch.Tensor, **arguments) -> bool:
    """Whether ``kernel``'s public function runs its Triton kernel for a call with main input ``tensor``: where
    Triton runs (:func:`backend.use_triton`) and the table does not send the call to the rival, and for empty
    inputs, which launch nothing, on any device. Otherwise it runs its reference."""
    if _RECORDED is not None:
        _RECORDED.append((kernel, cell(tensor, **arguments)))
    return (backend.use_triton(tensor) and not runs_rival(kernel, tensor, **arguments)) or tensor.numel() == 0


def runs_rival(kernel: str, tensor: torch.Tensor, **arguments) -> bool:
    """True where the table says ``kernel``'s rival ran faster than it on ``tensor``'s GPU at the call's
    :func:`cell`: the public function then runs its reference."""
    devices = FASTER_RIVALS.get(kernel)
    if not devices or not _RUN_RIVALS or tensor.device.type != "cuda":
        return False
    cells = devices.get(device_name(tensor.device))
    return cells is not None and cell(tensor, **arguments) in cells


def device_name(device: torch.device) -> str | None:
    """The GPU's name, as the table and the benchmark rows hold it (``torch.cuda.get_device_name``); None where
    no GPU is there (fake CUDA tensors on a CPU, as the launch checks make them). Both calls are ones that
    torch.compile folds into constants, so a traced call neither breaks its graph nor asks at run time."""
    return torch.cuda.get_device_properties(device).name if torch.cuda.is_available() else None


@contextlib.contextmanager
def kernels_always():
    """Inside the block every call on a GPU runs the kernel, whatever the table says (the benchmarks and the
    GPU check time and check the kernels so)."""
    global _RUN_RIVALS
    before, _RUN_RIVALS = _RUN_RIVALS, False
    try:
        yield
    finally:
        _RUN_RIVALS = before


@contextlib.contextmanager
def recorded_cells():
    """Inside the block, each public kernel function's call appends its (kernel, :func:`cell`) to the list this
    yields: how the benchmarks learn the cell of the calls they time, from the calls themselves.

        >>> from fastcore_ops.kernels import blurpool2d
        >>> with recorded_cells() as calls:
        ...     _ = blurpool2d(torch.empty(2, 3, 8, 8), stride=1)
        >>> calls
        [('blurpool2d', 'nchw float32 2x4x8x8 stride=1')]
    """
    global _RECORDED
    before, _RECORDED = _RECORDED, []
    try:
        yield _RECORDED
    finally:
        _RECORDED = before
