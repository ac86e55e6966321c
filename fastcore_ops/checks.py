"""Argument checks shared by the whole project, with one rule for which error each fault raises.

``TypeError`` when a value has the wrong type (a str where a number goes, a bool where an int
goes: ``True`` as a batch size is a bug, not 1); ``ValueError`` when its type is right and its
value is not (a negative size, a rate above 1, a name not on the list). Every message names
the argument, the value received and what is accepted. The checks look only at Python values
and tensor metadata, so they are safe inside ``torch.compile``.

    >>> check_int("batch_size", 0, low=1)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be an int >= 1, got 0
    >>> check_number("drop_rate", "0.1", low=0, high=1)
    Traceback (most recent call last):
    ...
    TypeError: drop_rate must be a number in [0, 1], got str '0.1'
"""

from __future__ import annotations

from collections.abc import Collection
from numbers import Real

import torch

FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def describe_range(low=None, high=None, *, low_open: bool = False, high_open: bool = False) -> str:
    """Words for an accepted range: "in [0, 1)", ">= 1", "> 0", "<= 5" or "" for any value.

    >>> describe_range(0, 1, high_open=True), describe_range(1), describe_range(0, low_open=True)
    ('in [0, 1)', '>= 1', '> 0')
    """
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def _in_range(value, low, high, low_open: bool, high_open: bool) -> bool:
    if low is not None and not (value > low if low_open else value >= low):
        return False
    return high is None or (value < high if high_open else value <= high)


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _got(value) -> str:
    return f"{type(value).__name__} {value!r}"


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in [low, high]; TypeError or ValueError otherwise.

    >>> check_int("depth", 2, low=0)
    2
    """
    accepted = " ".join(filter(None, ("an int", describe_range(low, high))))
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be {accepted}, got {_got(value)}")
    if not _in_range(value, low, high, False, False):
        raise ValueError(f"{name} must be {accepted}, got {value!r}")
    return value


def check_number(name: str, value, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float if it is a real number (not a bool) in the range; TypeError or ValueError otherwise.

    ``low_open``/``high_open`` exclude the bound itself.

    >>> check_number("rho", 0.05, low=0, low_open=True)
    0.05
    """
    accepted = " ".join(filter(None, ("a number", describe_range(low, high, low_open=low_open, high_open=high_open))))
    if not _is_number(value):
        raise TypeError(f"{name} must be {accepted}, got {_got(value)}")
    if not _in_range(value, low, high, low_open, high_open):
        raise ValueError(f"{name} must be {accepted}, got {value!r}")
    return float(value)


def check_bool(name: str, value, *, allow_none: bool = False) -> bool | None:
    """``value`` if it is a bool (or None when ``allow_none``); TypeError otherwise.

    >>> check_bool("flip", 1)
    Traceback (most recent call last):
    ...
    TypeError: flip must be a bool, got int 1
    """
    if isinstance(value, bool) or (allow_none and value is None):
        return value
    raise TypeError(f"{name} must be a bool{' or None' if allow_none else ''}, got {_got(value)}")


def check_str(name: str, value) -> str:
    """``value`` if it is a str; TypeError otherwise.

    >>> check_str("mode", 3)
    Traceback (most recent call last):
    ...
    TypeError: mode must be a str, got int 3
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {_got(value)}")
    return value


def check_choice(name: str, value, choices: Collection) -> object:
    """``value`` if it is one of ``choices``; ValueError listing them otherwise.

    >>> check_choice("backend", "pil", ("auto", "pil", "dali"))
    'pil'
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_interval(name: str, value, *, low: float = 0.0, high: float = float("inf"),
                   low_open: bool = True) -> tuple[float, float]:
    """``value`` as a float pair ``(a, b)`` with low < a <= b <= high (low <= a with ``low_open=False``).

    >>> check_interval("crop_scale", (0.08, 1.0), high=1.0)
    (0.08, 1.0)
    >>> check_interval("crop_scale", (1.0, 0.08), high=1.0)
    Traceback (most recent call last):
    ...
    ValueError: crop_scale must be a (low, high) pair with 0.0 < low <= high <= 1.0, got (1.0, 0.08)
    """
    accepted = f"a (low, high) pair with {low} {'<' if low_open else '<='} low <= high <= {high}"
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(map(_is_number, value))):
        raise TypeError(f"{name} must be {accepted}, got {_got(value)}")
    first, second = value
    if not (_in_range(first, low, None, low_open, False) and first <= second <= high):
        raise ValueError(f"{name} must be {accepted}, got {tuple(value)!r}")
    return float(first), float(second)


def check_tensor(name: str, value, *, ndim: int | tuple[int, ...] | None = None, floating: bool = True) -> None:
    """Check that ``value`` is a tensor with an accepted number of dimensions and, if ``floating``, a float dtype."""
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


def check_device(name: str, value) -> torch.device:
    """``value`` (a torch.device or its name) as a CPU or CUDA device that this machine has.

    >>> check_device("device", "cpu")
    device(type='cpu')
    >>> check_device("--device", "tpu9")
    Traceback (most recent call last):
    ...
    ValueError: --device 'tpu9' is not a device name; use cpu, cuda or cuda:N
    """
    if not isinstance(value, (torch.device, str)):
        raise TypeError(f"{name} must be a torch.device or a name like 'cpu' or 'cuda:0', got {_got(value)}")
    try:
        device = torch.device(value)
    except RuntimeError:
        raise ValueError(f"{name} {value!r} is not a device name; use cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be a CPU or CUDA device, got {str(device)!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name} {str(device)!r}: CUDA is not available here; use cpu")
    return device


def check_same_device(**tensors: torch.Tensor) -> None:
    """Check that all named tensors live on one device."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"all tensors must be on one device, got {listing}; move them with .to(device)")
