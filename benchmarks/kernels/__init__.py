"""Kernel microbenchmarks: each fused Triton kernel against the PyTorch ops it replaces.

Each kernel module here (``blurpool``, ``bce``, ...) builds a list of :class:`Case`; the
runner in ``__main__`` times them and writes the table, CSV, JSON and a plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


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


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
