"""Input checks shared by the kernels' public functions.

Each raises ``TypeError``/``ValueError`` naming the argument, what it received and what
is accepted, and looks only at metadata, so it is safe under ``torch.compile``.
"""

from __future__ import annotations

import torch

FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensor(name: str, value, *, ndim: int | tuple[int, ...] | None = None, floating: bool = True) -> None:
    """Check that ``value`` is a tensor with an accepted number of dimensions and dtype."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None:
        accepted = (ndim,) if isinstance(ndim, int) else ndim
        if value.dim() not in accepted:
            wanted = " or ".join(str(n) for n in accepted)
            raise ValueError(f"{name} must have {wanted} dimensions, got shape {tuple(value.shape)}")
    if floating and value.dtype not in FLOATING_DTYPES:
        raise TypeError(
            f"{name} must be a floating tensor (float16, bfloat16, float32 or float64), got {value.dtype}; "
            f"convert it with .float()"
        )


def check_same_device(**tensors: torch.Tensor) -> None:
    """Check that all named tensors live on one device."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"all tensors must be on one device, got {listing}; move them with .to(device)")


def check_int(name: str, value, *, minimum: int, maximum: int | None = None) -> None:
    """Check that ``value`` is an int within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise ValueError(f"{name} must be at least {minimum}{upper}, got {value}")
