"""What a kernel call costs the host: the device launches it issues, and what makes the host wait.

A GPU kernel that runs for microseconds loses to its PyTorch rival on the host: each launch
costs a few microseconds, a scalar read or a tensor made from Python values stalls the host
until the device catches up, and a zero-filled buffer is one more launch. None of this needs a
GPU to see. :class:`LaunchRecorder` records, phase by phase, every Triton kernel launched and
every ATen op dispatched, sorted into what launches a device kernel, what makes the host wait,
what copies host data to the device, and what fills a buffer with zeros. With
``stub_triton=True`` no Triton kernel runs, so a call costs only its host side: on fake CUDA
tensors (``FakeTensorMode``) that is the whole call as a GPU would see it, without a GPU.

Example:
    >>> import torch
    >>> from fastcore_ops.kernels import blurpool2d
    >>> x = torch.randn(1, 2, 8, 8, requires_grad=True)
    >>> with LaunchRecorder(stub_triton=True) as recorder:
    ...     with recorder.phase("forward"):
    ...         y = blurpool2d(x)
    >>> recorder.phases["forward"].host_waits
    []
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .backend import TRITON_AVAILABLE
from .custom_op import OPS

# ATen ops that launch nothing: allocation without a fill, and metadata.
_NO_LAUNCH = {
    "aten::empty", "aten::empty_like", "aten::new_empty", "aten::empty_strided", "aten::new_empty_strided",
    "aten::empty_permuted", "aten::detach", "aten::alias", "aten::lift_fresh",
}
# Ops whose result the host must read back, so it waits for the device to get there.
_HOST_WAITS = {
    "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal", "aten::nonzero",
    "aten::masked_select", "aten::_unique", "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim",
}
# Ops that fill a buffer with zeros, and fills that do when their value is 0.
_ZERO_FILLS = {"aten::zeros", "aten::zeros_like", "aten::new_zeros", "aten::zero_"}
_FILLS = {"aten::fill_", "aten::full", "aten::full_like", "aten::new_full"}


@dataclass
class Phase:
    """What one phase of a call did on the host, each entry an op's or a Triton kernel's name."""

    launches: list[str] = field(default_factory=list)  # device kernels: Triton's and ATen's
    host_waits: list[str] = field(default_factory=list)  # the host waited for the device
    host_copies: list[str] = field(default_factory=list)  # host data copied to the device
    zero_fills: list[str] = field(default_factory=list)  # buffers filled with zeros (also launches)

    @property
    def triton_launches(self) -> list[str]:
        return [name for name in self.launches if not name.startswith("aten::")]


class HostWaitError(RuntimeError):
    """An op on a fake tensor needed a value from the device: on a real GPU the host would wait here."""


class LaunchRecorder(TorchDispatchMode):
    """Records launches, host waits, host-to-device copies and zero-fills, per phase (see the module).

    Our own custom ops (each :class:`~fastcore_ops.kernels.custom_op.KernelOp`) are run from their
    Python implementation inside the recorder, so the ops and kernels they are made of are recorded,
    not the op alone.
    """

    def __init__(self, *, stub_triton: bool = False):
        super().__init__()
        self.stub_triton = stub_triton
        self.phases: dict[str, Phase] = {}
        self._current: Phase | None = None
        self._patches = contextlib.ExitStack()
        self._in_triton = threading.local()

    @contextlib.contextmanager
    def phase(self, name: str):
        """Record what runs inside the block as phase ``name`` (entries accumulate over blocks)."""
        before, self._current = self._current, self.phases.setdefault(name, Phase())
        try:
            yield self._current
        finally:
            self._current = before

    def __enter__(self):
        if TRITON_AVAILABLE:
            self._patch_triton()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._patches.close()

    @contextlib.contextmanager
    def triton_only(self):
        """Triton's launches patched (stubbed with ``stub_triton``) but no ATen op recorded: for timing the host."""
        if TRITON_AVAILABLE:
            self._patch_triton()
        try:
            yield self
        finally:
            self._patches.close()

    # -- Triton ------------------------------------------------------------------------------

    def _patch_triton(self) -> None:
        """Wrap the launch method of every kind of Triton kernel object (jitted, autotuned, interpreted)."""
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        for kind in (JITFunction, Autotuner, Heuristics, InterpretedFunction):
            original = kind.run
            self._patches.callback(setattr, kind, "run", original)
            kind.run = self._launcher(original)

    def _launcher(self, original):
        recorder = self

        def run(kernel, *args, **kwargs):
            # An autotuner launches through the kernel it wraps: only the outermost call is a launch.
            if getattr(recorder._in_triton, "active", False):
                return original(kernel, *args, **kwargs)
            if recorder._current is not None:
                recorder._current.launches.append(_kernel_name(kernel))
            if recorder.stub_triton:
                return None
            recorder._in_triton.active = True
            try:
                return original(kernel, *args, **kwargs)
            finally:
                recorder._in_triton.active = False

        return run

    # -- ATen --------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kernel_op = OPS.get(func._schema.name)
        if kernel_op is not None:  # one of ours, reached through the op (a fake tensor, a tracer): run its code
            with self:  # re-entered, so the ops the implementation issues are seen
                return kernel_op.implementation(*args, **kwargs)
        if func.namespace != "prim" and self._current is not None:
            self._classify(func, args, kwargs)
        return func(*args, **kwargs)

    def _classify(self, func, args, kwargs) -> None:
        name = func._schema.name
        phase = self._current
        if name in ("aten::lift_fresh", "aten::lift_fresh_copy"):  # a tensor made from Python values
            phase.host_copies.append(name)
        moved = _transfer(name, args, kwargs)
        if moved == ("cpu", "device"):
            phase.host_copies.append(name)
        elif moved == ("device", "cpu"):
            phase.host_waits.append(name)
        if name in _HOST_WAITS:
            phase.host_waits.append(name)
            if type(args[0]).__name__ == "FakeTensor":
                raise HostWaitError(f"{name} reads a value of a tensor on {args[0].device}: the host would wait")
        if name in _ZERO_FILLS or (name in _FILLS and _fill_value(func, args, kwargs) == 0):
            phase.zero_fills.append(name)
        if name not in _NO_LAUNCH and name not in _HOST_WAITS and not func.is_view:
            phase.launches.append(name)


def _transfer(name: str, args, kwargs) -> tuple[str, str] | None:
    """("cpu", "device") for a copy from the host to a device, ("device", "cpu") back, else None."""
    if name == "aten::_to_copy":
        source, destination = args[0].device, torch.device(kwargs.get("device") or args[0].device)
    elif name == "aten::copy_":
        source, destination = args[1].device, args[0].device
    else:
        return None
    if (source.type == "cpu") == (destination.type == "cpu"):
        return None
    return ("cpu", "device") if source.type == "cpu" else ("device", "cpu")


def _fill_value(func, args, kwargs):
    """The value a fill op writes: its argument named ``value`` or ``fill_value``."""
    for argument, value in zip(func._schema.arguments, args):
        if argument.name in ("value", "fill_value"):
            return value
    return kwargs.get("value", kwargs.get("fill_value"))


def _kernel_name(kernel) -> str:
    """The Python name of a Triton kernel object's function, through autotuners and heuristics."""
    while hasattr(kernel, "fn"):
        kernel = kernel.fn
    return getattr(kernel, "__name__", type(kernel).__name__)


def run_backward_node(output: torch.Tensor, grad: torch.Tensor):
    """Run the backward of the KernelOp that made ``output`` (its first output), by hand, with ``grad`` for it.

    Autograd's engine needs a real device for CUDA tensors, so on fake CUDA tensors the node is
    called directly; its other outputs get no gradient (None), as with ``set_materialize_grads(False)``.
    """
    node = output.grad_fn
    made_by = [op for op in OPS.values() if type(node).__name__ == _backward_node_name(op.name)]
    if not made_by:
        raise TypeError(f"{type(node).__name__} is not the backward of a KernelOp")
    return node.apply(grad, *[None] * (made_by[0].output_count - 1))


def _backward_node_name(qualified_name: str) -> str:
    """The class torch.library names an op's backward node: ``GeneratedBackwardFor_<ns>_<op>_defaultBackward``."""
    return f"GeneratedBackwardFor_{qualified_name.replace('::', '_')}_defaultBackward"
