"""The one answer to "which precision does this run compute in here, and why": every trainer,
benchmark and timing test asks :func:`choose_precision`.

bf16 pays only where the hardware computes it. A CPU without bf16 units (AVX2-only, or AVX-512
without AVX512-BF16) emulates it: a ResNet-style step took 195 s in bf16 against 7.1 s in fp32 on
an AVX2-only AMD EPYC. So "amp" falls back to fp32 there, and a bf16 asked for by name is warned
about.

    >>> choice = choose_precision("amp", torch.device("cuda"))
    >>> choice.dtype, choice.name
    (torch.float16, 'fp16 autocast')
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from fastcore_ops.checks import check_choice
from fastcore_ops.training.config.schema import PRECISIONS

_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.cache
def _cpuinfo_field(name: str) -> str:
    """The first CPU's ``name`` field in Linux's /proc/cpuinfo; "" where it or the file does not exist."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.split(":")[0].strip() == name),
                "")


def cpu_bf16_units() -> tuple[str, ...]:
    """This CPU's bf16 instruction sets (AMX-BF16, AVX512-BF16) as Linux's /proc/cpuinfo names them.

    Empty where it has none, or where /proc/cpuinfo does not exist.
    """
    flags = _cpuinfo_field("flags").split()
    return tuple(flag for flag in _BF16_FLAGS if flag in flags)


def cpu_model() -> str:
    """This CPU's model name as /proc/cpuinfo gives it ("Intel(R) Xeon(R) Processor"); "" where it gives none."""
    return _cpuinfo_field("model name")


@dataclass(frozen=True)
class Precision:
    """What a run autocasts to (``dtype`` None: no autocast, fp32) and why."""

    dtype: torch.dtype | None
    reason: str

    @property
    def name(self) -> str:
        return {None: "fp32", torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}[self.dtype]

    def describe(self) -> str:
        """One line for a run's log: ``precision: bf16 autocast (...)``."""
        return f"precision: {self.name} ({self.reason})"

    def autocast(self, device: torch.device):
        """The autocast context of this precision on ``device`` (none for fp32)."""
        return contextlib.nullcontext() if self.dtype is None else torch.autocast(device.type, dtype=self.dtype)


def choose_precision(precision: str, device: torch.device) -> Precision:
    """The dtype ``precision`` autocasts to on ``device``, with the reason.

    "amp" is mixed precision where the hardware gains from it: fp16 (with a grad scaler) on CUDA,
    bf16 on a CPU with bf16 units, fp32 on other CPUs. "amp_bf16" and "amp_fp16" are taken as
    asked; bf16 on a CPU that only emulates it is warned about.
    """
    check_choice("precision", precision, PRECISIONS)
    if precision == "fp32":
        return Precision(None, "precision=fp32")
    on_cpu = device.type == "cpu"
    units = cpu_bf16_units() if on_cpu else ()
    if precision == "amp":
        if not on_cpu:
            return Precision(torch.float16, f"precision=amp on {device.type}")
        if units:
            return Precision(torch.bfloat16, f"precision=amp on a CPU with bf16 units: {', '.join(units)}")
        return Precision(None, "precision=amp on a CPU without bf16 units, which only emulates bf16, many times "
                               "slower than fp32")
    if precision == "amp_fp16":
        return Precision(torch.float16, "precision=amp_fp16, asked for by name")
    if on_cpu and not units:
        warnings.warn("precision=amp_bf16 on a CPU without bf16 units (AMX-BF16 or AVX512-BF16): it emulates bf16, "
                      "many times slower than fp32; use precision=amp, which picks bf16 only where the CPU has them",
                      stacklevel=2)
        return Precision(torch.bfloat16, "precision=amp_bf16, asked for by name; this CPU emulates bf16")
    return Precision(torch.bfloat16, "precision=amp_bf16, asked for by name")
