"""Timing and device facts shared by the benchmarks.

Eager times (:func:`time_ms`: what a caller waits, the host's dispatch and launches included), the
host's own time (:func:`host_time_ms`), the device's own time (:func:`device_times_ms`: CUDA-graph replay,
L2 warm and cold, the profiler's sum of kernel durations), and the launches a call issues (:func:`launch_count`).
"""

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


HOST_CALLS = 5  # timed one by one, for the host's own time (each waits for the device: slow rivals weigh)


def host_time_ms(fn: Callable[[], object], device: torch.device, calls: int = HOST_CALLS) -> float | None:
    """The host's own time for one call of ``fn`` (already warm) on CUDA, in milliseconds: the least, over ``calls``
    calls, of the process's CPU time from the call to its return, the device's queue emptied before each call
    (outside the timed region), so that no launch waits for room. The process's time, not the calling thread's:
    autograd runs a CUDA backward on a thread of its own. None off CUDA, where the host's time is the call's.

        >>> host_time_ms(lambda: None, torch.device("cpu")) is None
        True
    """
    if device.type != "cuda":
        return None
    best = float("inf")
    for _ in range(calls):
        torch.cuda.synchronize(device)
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    torch.cuda.synchronize(device)
    return best * 1e3


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


# ----------------------------------------------------------------------------------------
# The device's time, apart from the host's: a CUDA graph replays a call's kernels without the
# Python, dispatch and launch costs that an eager call pays, and the profiler reports each
# kernel's own duration. A call is timed warm (its inputs still in L2 from the call before) and
# cold (L2 flushed before it, outside the timed region). None of these exist off CUDA.
# ----------------------------------------------------------------------------------------

GRAPH_REPLAYS = 20  # back to back, between two CUDA events
SINGLE_CALLS = 10  # each between its own CUDA events, for the L2 warm and cold medians


def device_times_ms(fn: Callable[[], object], device: torch.device) -> dict[str, float | str | None]:
    """The device's time for one call of ``fn`` (already warm: compiled and tuned), in milliseconds.

    ``graph_ms``: the mean of :data:`GRAPH_REPLAYS` back-to-back replays of ``fn`` captured in a CUDA
    graph; ``l2_warm_ms`` and ``l2_cold_ms``: the median of :data:`SINGLE_CALLS` single replays, each
    between CUDA events, with L2 as the replay before left it and flushed; ``kernels_ms`` and
    ``kernels``: the sum of the device's kernel (and copy, fill) durations in one eager call, and
    their number, by PyTorch's profiler (None where it sees none: no CUPTI). ``graph_error`` says why
    the graph columns are None where ``fn`` cannot be captured (it makes the host wait, or copies
    from the host). Every value is None off CUDA.

        >>> device_times_ms(lambda: None, torch.device("cpu"))["graph_ms"] is None
        True
    """
    times = {"graph_ms": None, "l2_warm_ms": None, "l2_cold_ms": None, "kernels_ms": None, "kernels": None,
             "graph_error": None}
    if device.type != "cuda":
        return times
    with torch.cuda.device(device):
        times["kernels_ms"], times["kernels"] = profiled_kernels(fn, device)
        graph, times["graph_error"] = capture_graph(fn, device)
        if graph is not None:
            graph.replay()  # the first replay uploads the graph to the device
            times["graph_ms"] = statistics.fmean(event_times_ms(graph.replay, device, 1, replays=GRAPH_REPLAYS))
            times["l2_warm_ms"] = statistics.median(event_times_ms(graph.replay, device, SINGLE_CALLS))
            flush = l2_flush_buffer(device)
            times["l2_cold_ms"] = statistics.median(event_times_ms(graph.replay, device, SINGLE_CALLS, flush))
            del graph, flush
            torch.cuda.empty_cache()  # the graph's private memory pool, before the next path allocates
    return times


def capture_graph(fn: Callable[[], object], device: torch.device, warm_calls: int = 3):
    """``(graph, None)``: ``fn`` captured in a CUDA graph; or ``(None, why)`` where capture fails."""
    side = torch.cuda.Stream(device)
    capture = torch.cuda.Stream(device)
    try:
        # PyTorch's rule for capture: run the work a few times on a side stream first (lazy
        # initialisations, workspaces, autograd's buffers), so that capture sees none of it.
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(warm_calls):
                fn()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # Our own stream context around torch.cuda.graph's: where capture fails, torch.cuda.graph's exit
        # raises before it restores the stream, and ours restores it.
        with torch.cuda.stream(capture), torch.cuda.graph(graph, stream=capture):
            fn()
        return graph, None
    except Exception as error:  # noqa: BLE001  (a rival that syncs or copies from the host: a finding, not a fault)
        torch.cuda.synchronize(device)
        return None, _first_line(error)


def _first_line(error: BaseException) -> str:
    """``error``'s type and the first line of its message: CUDA's errors run to many lines."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def event_times_ms(call: Callable[[], object], device: torch.device, calls: int,
                   flush: torch.Tensor | None = None, replays: int = 1) -> list[float]:
    """``calls`` timings of ``replays`` calls of ``call`` back to back, each timing between two CUDA events
    on the current stream; with ``flush``, that buffer is overwritten before each timing (outside it), so the
    calls find nothing of theirs in L2."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for start, end in events:
        if flush is not None:
            flush.zero_()
        start.record()
        for _ in range(replays):
            call()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) / replays for start, end in events]


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer twice the device's L2 cache: writing it evicts whatever L2 held."""
    return torch.empty(2 * torch.cuda.get_device_properties(device).L2_cache_size, dtype=torch.uint8, device=device)


def profiled_kernels(fn: Callable[[], object], device: torch.device) -> tuple[float | None, int | None]:
    """The sum of the device's activity durations (kernels, copies, fills) in one call of ``fn`` in milliseconds,
    and their number, by PyTorch's profiler: the device's own time, without the gaps between kernels that the
    host leaves. (None, None) where the profiler sees no device activity (CUPTI unavailable)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        fn()
        torch.cuda.synchronize(device)
    durations = [event.time_range.elapsed_us() for event in profiler.events()
                 if event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)]
    return (sum(durations) / 1e3, len(durations)) if durations else (None, None)


def launch_count(fn: Callable[[], object]) -> int:
    """The device launches one call of ``fn`` issues: Triton kernels and the ATen ops that launch a kernel,
    as :class:`fastcore_ops.kernels.launches.LaunchRecorder` counts them, on any device (on the CPU a call
    may dispatch ops it skips on a GPU: ``bce_with_logits`` checks its labels there). Triton's kernels are
    recorded, not run: the interpreter's own tensor copies would count as launches, and no output is needed.
    A ``torch.compile``'d function runs eagerly under the recorder (Dynamo skips compiling under a dispatch
    mode), so its count is its eager ops'; on a GPU, the profiler's ``kernels`` count what it runs."""
    from fastcore_ops.kernels.launches import LaunchRecorder

    with LaunchRecorder(stub_triton=True) as recorder, recorder.phase("call"):
        fn()
    return len(recorder.phases["call"].launches)
