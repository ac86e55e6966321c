"""Which hardware a run's times belong to: a machine label, ``"<hostname>/<device name>"``, kept in each run's folder.

Times from different machines are never compared; the label is how a report tells them apart.

    >>> read_machine(out)  # a folder the sweep wrote no label into
    'unknown/unknown'
"""

from __future__ import annotations

import socket
from pathlib import Path

import torch

from fastcore_ops.training.precision import cpu_model

MACHINE_FILE = "machine.txt"  # written into each run folder by the sweep


def device_name(device: str) -> str:
    """The GPU's name, or on a CPU its model name as /proc/cpuinfo gives it ("cpu" where there is none).

    Two CPUs behind one hostname (a VM moved to other hardware) then get apart.

        >>> device_name("cpu")  # doctest: +SKIP
        'Intel(R) Xeon(R) Processor'
    """
    parsed = torch.device(device)
    if parsed.type == "cuda":
        return torch.cuda.get_device_name(parsed)
    return cpu_model() or parsed.type


def machine_label(device: str) -> str:
    """``"<hostname>/<device name>"``: the hardware a run's times belong to.

    Example:
        >>> machine_label("cpu").startswith(socket.gethostname() + "/")
        True
    """
    return f"{socket.gethostname()}/{device_name(device)}"


def read_machine(folder: Path) -> str:
    """The machine label the sweep wrote into a run's folder; "unknown/unknown" when there is none."""
    path = folder / MACHINE_FILE
    return path.read_text(errors="replace").strip() if path.is_file() else "unknown/unknown"
