"""Memory-format helpers: kernels write their outputs in the layout of their inputs."""

from __future__ import annotations

import torch


def is_channels_last(x: torch.Tensor) -> bool:
    """True for a 4-D tensor stored NHWC (and not also plainly contiguous)."""
    return x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)


def empty_like_layout(x: torch.Tensor, shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An uninitialized tensor of ``shape`` on x's device, channels_last when x is."""
    memory_format = torch.channels_last if is_channels_last(x) else torch.contiguous_format
    return torch.empty(shape, dtype=dtype or x.dtype, device=x.device, memory_format=memory_format)
