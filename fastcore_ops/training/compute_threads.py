"""How many threads the training command computes with on a CPU that other work may share.

PyTorch starts one OpenMP thread per core, and a thread that runs out of work spins for a
while before it sleeps. Two processes doing so on the same cores take turns at every one of a
step's small operations: on this project's 2-core machine a short GPT run beside a CIFAR run
trained in 217.8 s with PyTorch's default, 24.7 s with one thread, about 18 s alone
(``reports/busy-box-threads-20261126/``). So ``python -m fastcore_ops.training.train`` counts, as it starts,
the cores that other work keeps busy and computes with the others, at least one.

It reads ``/proc/stat`` twice, half a second apart. The load average would not do: a one-minute
mean still counts a run that has just finished, which is what a sweep's next run would see.
``OMP_NUM_THREADS``, where set, is the user's choice and is left alone; so is a machine without
``/proc/stat``, where PyTorch keeps its one thread per core.

The CPUs those threads leave over (:func:`cpus_left_over`) are the ones a CPU run decodes its
images on (``fastcore_ops/training/tasks/classification.py``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from fastcore_ops.data.backends.pil import default_num_workers

PROC_STAT = Path("/proc/stat")
SAMPLE_SECONDS = 0.5
# /proc/stat's columns after the CPU's name: user nice system idle iowait irq softirq steal (then
# guest time, which user time already counts). Idle and waiting for I/O leave the core free.
_COUNTED_COLUMNS = 8
_IDLE_COLUMNS = (3, 4)


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    reason: str

    def describe(self) -> str:
        return f"computing with {self.threads} thread{'s' * (self.threads != 1)} ({self.reason})"


def cpu_ticks(stat_text: str, cpus: set[int]) -> tuple[int, int]:
    """(busy, all) clock ticks since boot of the numbered CPUs, from the text of ``/proc/stat``.

        >>> cpu_ticks("cpu  9 0 9 9 0 0 0 0 0 0\\ncpu0 5 0 1 40 2 0 0 0 0 0\\ncpu1 1 0 0 9 0 0 0 0 0 0\\n", {0})
        (6, 48)
    """
    busy = total = 0
    for line in stat_text.splitlines():
        name, *columns = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        ticks = [int(column) for column in columns[:_COUNTED_COLUMNS]]
        total += sum(ticks)
        busy += sum(ticks) - sum(ticks[column] for column in _IDLE_COLUMNS)
    return busy, total


def busy_cores(sample_seconds: float = SAMPLE_SECONDS) -> float | None:
    """How many of the cores this process may run on were busy over the next ``sample_seconds``.

    None where ``/proc/stat`` cannot be read or the process's CPUs are unknown (not Linux).

        >>> 0 <= busy_cores(0.1) <= len(os.sched_getaffinity(0))
        True
    """
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = os.sched_getaffinity(0)
    try:
        busy_before, total_before = cpu_ticks(PROC_STAT.read_text(), cpus)
        time.sleep(sample_seconds)
        busy_after, total_after = cpu_ticks(PROC_STAT.read_text(), cpus)
    except OSError:
        return None
    elapsed = total_after - total_before
    return len(cpus) * (busy_after - busy_before) / elapsed if elapsed > 0 else 0.0


def choose_threads(requested: int | None = None) -> ThreadChoice:
    """The threads to compute with: ``requested``, else ``OMP_NUM_THREADS``'s, else one per idle core.

        >>> choose_threads(3)
        ThreadChoice(threads=3, reason='--threads')
    """
    if requested is not None:
        return ThreadChoice(requested, "--threads")
    if os.environ.get("OMP_NUM_THREADS"):
        return ThreadChoice(torch.get_num_threads(), "OMP_NUM_THREADS")
    default, busy = torch.get_num_threads(), busy_cores()
    if busy is None:
        return ThreadChoice(default, "PyTorch's default: no /proc/stat to see other work in")
    cpus = len(os.sched_getaffinity(0))
    # PyTorch's default is one thread per physical core, which may be half the CPUs the kernel
    # lists (SMT): take the idle share of it.
    threads = max(1, min(default, round(default * (1 - busy / cpus))))
    if threads == default:
        return ThreadChoice(threads, "PyTorch's default, one per core: the cores were idle at start")
    return ThreadChoice(threads, f"other work kept {busy:.1f} of {cpus} CPUs busy at start; --threads to choose")


def cpus_left_over() -> int:
    """The CPUs this process may run on beyond PyTorch's compute threads (none where they take them all).

        >>> cpus_left_over() == max(0, len(os.sched_getaffinity(0)) - torch.get_num_threads())
        True
    """
    return max(0, default_num_workers() - torch.get_num_threads())


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """PyTorch computes on ``count`` threads inside the block, on its previous count after it.

        >>> with torch_threads(1):
        ...     torch.get_num_threads()
        1
    """
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def use_threads(requested: int | None = None) -> ThreadChoice:
    """Choose the threads (see choose_threads) and set PyTorch's intra-op thread count to them."""
    choice = choose_threads(requested)
    torch.set_num_threads(choice.threads)
    return choice
