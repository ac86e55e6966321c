"""Timing and device facts shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def time_samples_ms(fn: Callable[[], object], device: torch.device, cpu_budget_s: float = 2.0,
                    min_samples: int = 3) -> list[float]:
    """Wall times of repeated calls of ``fn`` in milliseconds, after a warm-up.

    On CUDA: ``triton.testing.do_bench``'s samples (CUDA events, cache flushed between runs).
    On the CPU: one warm-up call, then repeats until ``cpu_budget_s`` is spent (at least
    ``min_samples``, at most 50).
    """
    if device.type == "cuda":
        import triton.testing

        return list(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="all"))
    fn()
    samples = []
    deadline = time.perf_counter() + cpu_budget_s
    while len(samples) < min_samples or (time.perf_counter() < deadline and len(samples) < 50):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def time_ms(fn: Callable[[], object], device: torch.device, cpu_budget_s: float = 2.0, best: bool = False) -> float:
    """Median wall time of ``fn`` in milliseconds; with ``best``, the fastest call of at least five (a
    floor: what ``fn`` costs when nothing interrupts it). See :func:`time_samples_ms`.
    """
    samples = time_samples_ms(fn, device, cpu_budget_s, min_samples=5 if best else 3)
    return min(samples) if best else statistics.median(samples)


def peak_memory_mb(fn: Callable[[], object], device: torch.device) -> float | None:
    """Peak CUDA memory that ``fn`` allocates beyond what was already allocated, in MB (None off CUDA)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    baseline = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - baseline) / 2**20


def peak_bandwidth_gbs(device: torch.device) -> float | None:
    """The device's theoretical DRAM bandwidth in GB/s (double data rate), None off CUDA."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    return 2 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8 / 1e9


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
