"""Kernel microbenchmarks: each fused Triton kernel against the PyTorch ops it replaces.

Each kernel module here (``blurpool``, ``bce``, ...) builds a list of :class:`Case`; the
runner (``runner.py``) times them and writes the table, CSV, JSON and a plot. This file imports
torch only where a helper runs it, so that each command of this package parses its command line
without torch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    import torch

    from .compile_cases import KernelCase


@dataclass
class Traffic:
    """Modelled DRAM bytes (reads + writes) of one implementation, and its temporaries' peak bytes."""

    forward: float
    forward_backward: float
    temporaries: float = 0.0


@dataclass
class Case:
    """One kernel at one size: how to build inputs, both implementations, and the traffic model."""

    kernel: str
    size: str
    make_inputs: Callable[[], tuple]  # fresh inputs; differentiable ones have requires_grad set
    ours: Callable[..., torch.Tensor]
    reference: Callable[..., torch.Tensor]
    ours_traffic: Traffic
    reference_traffic: Traffic
    flops: tuple[float, float] | None = None  # forward, forward+backward; for compute-bound kernels
    # Further PyTorch paths worth timing beside the reference (same inputs), by column prefix.
    others: dict[str, Callable[..., torch.Tensor]] = field(default_factory=dict)
    # The main input's shape, for goals that hold at some sizes only (BCE's class count, attention's length).
    shape: tuple[int, ...] = ()


def every_case(case: Case) -> bool:
    """A goal's default reach: every timed size."""
    return True


@dataclass(frozen=True)
class Goal:
    """One bar a kernel is held to on a GPU: ``rival``'s ``metric`` over ours is at least ``at_least``, in the
    cases ``applies_to`` picks; ``text`` says it in words.

    ``rival`` is a column of the benchmark rows (``benchmarks.kernels.runner.measure``): "ref" (the case's
    reference), "floor" (ours' modelled bytes at the device's peak DRAM bandwidth) or a key of the cases'
    ``others``. ``metric``: "fwd_bwd_ms" (forward+backward time: the ratio is a speed-up) or "peak_MB"
    (peak memory). "Within 1.3x of X" is ``Goal("X", 1 / 1.3, ...)``.

        >>> goal = Goal("ref", 2.0, "twice the reference's speed")
        >>> goal.name, goal.ratio({"ref_fwd_bwd_ms": 3.0, "ours_fwd_bwd_ms": 1.0}), goal.ratio({})
        ('ref', 3.0, None)
        >>> Goal("ref", 1.0, "no more memory", metric="peak_MB").name
        'ref_peak_MB'
    """

    rival: str
    at_least: float
    text: str
    metric: str = "fwd_bwd_ms"
    applies_to: Callable[[Case], bool] = every_case

    @property
    def name(self) -> str:
        """The goal's column stem: its rival, with the metric when it is not time."""
        return self.rival if self.metric == "fwd_bwd_ms" else f"{self.rival}_{self.metric}"

    def ratio(self, row: dict) -> float | None:
        """The rival's metric over ours in a benchmark row; None where the row lacks either."""
        rival, ours = row.get(f"{self.rival}_{self.metric}"), row.get(f"ours_{self.metric}")
        return None if rival is None or ours is None else rival / ours

    def bound(self, row: dict) -> float | None:
        """The most :meth:`ratio` can reach on the row's device: the rival's time over ours' bytes at the peak
        DRAM bandwidth (the ``floor`` column), for a goal of time; None for one of memory, or a row without both.
        A goal asking more than this cannot be met by any kernel moving ours' bytes.

            >>> Goal("ref", 2.0, "twice the reference's speed").bound({"ref_fwd_bwd_ms": 1.5, "floor_fwd_bwd_ms": 1.0})
            1.5
        """
        if self.metric != "fwd_bwd_ms":
            return None
        return self.ratio({**row, "ours_fwd_bwd_ms": row.get("floor_fwd_bwd_ms")})


def element_size(dtype: torch.dtype) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class CorrectnessCase:
    """One kernel call of the GPU check's correctness part: ``make(dtype, device)`` gives the leaf tensors,
    ``call(leaves)`` the arguments built from them.

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


@dataclass(frozen=True)
class KernelSpec:
    """One public kernel, declared once (in its module here) and read by every check and benchmark.

    ``inputs(device, dtype, tiny)`` gives the positional arguments of one training step's call
    (``tiny``: the same call on tiny tensors, whose compute costs nothing); ``ours`` and ``rival``
    take them: our public function, and the op a user would run instead (``rival_text`` in words).
    Its forward and backward may issue at most ``forward_launches`` and ``backward_launches`` device
    launches (``benchmarks.kernels.host_side``); ``launches_text`` says which, where there is a choice.
    ``benchmark_cases(batch, dtype, device, tiny)`` are the timed sizes with their traffic models,
    ``correctness_cases(small)`` the GPU check's, ``compile_cases()`` the Triton kernels it launches as
    the sm_90 compile check compiles them (:mod:`benchmarks.kernels.compile_cases`), and ``goals``
    what the kernel is held to on a GPU against its rivals (docs/kernels.md derives each; its table
    of declarations is written from these: ``python -m benchmarks.kernels.declarations``).
    """

    name: str
    ours: Callable[..., torch.Tensor]
    rival: Callable[..., torch.Tensor]
    inputs: Callable[[str, torch.dtype, bool], tuple]
    forward_launches: int
    backward_launches: int
    benchmark_cases: Callable[[int, torch.dtype, torch.device, bool], list[Case]]
    correctness_cases: Callable[[bool], list[CorrectnessCase]]
    compile_cases: Callable[[], Iterable[KernelCase]]
    goals: tuple[Goal, ...]
    rival_text: str
    launches_text: str


def forward_backward(function: Callable[..., torch.Tensor], inputs: tuple,
                     grad_like: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
    """One call of ``function`` on ``inputs`` and its backward: the gradients of the tensors among ``inputs`` that
    require grad, for an output gradient of ``grad_like(output)`` (default ``torch.ones_like``). Nothing
    accumulates into ``.grad``, so every call costs what the first does.

        >>> import torch
        >>> forward_backward(torch.pow, (torch.tensor([1.0, 3.0], requires_grad=True), 2))
        (tensor([2., 6.]),)
    """
    import torch

    output = function(*inputs)
    differentiable = [value for value in inputs if isinstance(value, torch.Tensor) and value.requires_grad]
    return torch.autograd.grad(output, differentiable, (grad_like or torch.ones_like)(output))


def channels_last_image(shape, device, dtype) -> torch.Tensor:
    """A random channels-last image batch that requires grad."""
    import torch

    return torch.randn(shape, device=device, dtype=dtype).to(memory_format=torch.channels_last).requires_grad_()


# Compiled graphs Dynamo keeps per function: a compiled rival meets each case's shape in two dtypes,
# with and without grad, and past Dynamo's default of 8 it would quietly run the rest eagerly.
COMPILED_GRAPHS = 64


def compiled_on_first_call(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``torch.compile(fn)``, built on the first call and kept for the process: the rival a user gets from
    ``torch.compile``. Cases add it on CUDA only, since compiling every shape would take the CPU suite minutes.
    """

    @functools.cache
    def build():
        import torch

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, COMPILED_GRAPHS)
        return torch.compile(fn, dynamic=False)

    return lambda *args, **kwargs: build()(*args, **kwargs)
