"""Part 2: each kernel against the PyTorch ops it replaces (``benchmarks.kernels``), held to its goal.

Forward and forward+backward times, the kernel's bandwidth against the device's measured copy
bandwidth (a device-to-device copy: what a memory-bound kernel can hope for), peak memory, and
the speed-up each kernel was built to give: BlurPool 2x, fused BCE 3x, ALiBi attention 3x its
materialized-bias reference, Ghost BatchNorm 4x the per-chunk loop Composer runs.
"""

from __future__ import annotations

import itertools

import torch

from benchmarks.gpu_check.parts import Mode, Recorder
from benchmarks.kernels.__main__ import all_cases, measure
from benchmarks.timing import time_ms

# The forward+backward speed-up each kernel was built for (its issue's goal), on a GPU.
GOALS = {"blurpool2d": 2.0, "blur_maxpool2d": 2.0, "bce_with_logits": 3.0, "alibi_attention": 3.0,
         "ghost_batch_norm": 4.0}


def copy_bandwidth_gbs(device: torch.device, megabytes: int) -> float:
    """GB/s of a device-to-device copy of ``megabytes`` MB, counting its read and its write."""
    source = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    milliseconds = time_ms(lambda: target.copy_(source), device, cpu_budget_s=0.2)
    return 2 * source.numel() / milliseconds / 1e6


def round_robin(cases: list) -> list:
    """``cases`` with each kernel's first case first, then each one's second, ...: a part stopped at its budget
    has timed every kernel at least once.

        >>> from types import SimpleNamespace as Case
        >>> [case.kernel for case in round_robin([Case(kernel="a"), Case(kernel="a"), Case(kernel="b")])]
        ['a', 'b', 'a']
    """
    by_kernel: dict[str, list] = {}
    for case in cases:
        by_kernel.setdefault(case.kernel, []).append(case)
    rounds = itertools.zip_longest(*by_kernel.values())
    return [case for one_round in rounds for case in one_round if case is not None]


def run(mode: Mode, record: Recorder) -> None:
    """Time every case (tiny ones in small mode) in fp16 and bf16 on a GPU, fp32 in small mode; one row each."""
    device = mode.device
    copy_gbs = copy_bandwidth_gbs(device, 16 if mode.small else 1024)
    record.note(f"Measured copy bandwidth: {copy_gbs:.0f} GB/s (device-to-device, read + write).")
    for dtype in (torch.float32,) if mode.small else (torch.float16, torch.bfloat16):
        for case in round_robin(all_cases(1 if mode.small else 256, dtype, device, None, tiny=mode.small)):
            try:
                _time_case(case, dtype, mode, copy_gbs, record)
            except torch.OutOfMemoryError:  # a finding, not a fault: the materialized reference at long lengths
                torch.cuda.empty_cache()
                record.row(kernel=case.kernel, size=case.size, dtype=dtype, error="out of memory")
    if mode.small:
        record.note("Small mode: the kernels ran through Triton's interpreter on the CPU, so every time and speed-up "
                    "here is meaningless as a GPU figure and no goal is judged; the part shows that the timing "
                    "code runs.")
    record.note("vs_X: X's forward+backward time over ours (sdpa_bias: SDPA with the ALiBi bias as an additive mask; "
                "sdpa: SDPA causal without a bias, the speed limit; flex: FlexAttention compiled, with ALiBi as "
                "its score modification).")


def _time_case(case, dtype: torch.dtype, mode: Mode, copy_gbs: float, record: Recorder) -> None:
    row = measure(case, mode.device, time_ours=True, cpu_budget_s=0.0)
    speedup, goal = row["fwd_bwd_speedup"], GOALS[case.kernel]
    record.row(kernel=case.kernel, size=case.size, dtype=dtype,
               reference_fwd_ms=row["ref_fwd_ms"], ours_fwd_ms=row["ours_fwd_ms"],
               reference_fwd_bwd_ms=row["ref_fwd_bwd_ms"], ours_fwd_bwd_ms=row["ours_fwd_bwd_ms"],
               fwd_bwd_speedup=speedup, goal=goal, meets_goal=None if mode.small else speedup >= goal,
               ours_GBs=row["ours_fwd_bwd_GBs"], percent_of_copy=100 * row["ours_fwd_bwd_GBs"] / copy_gbs,
               reference_peak_MB=row.get("ref_peak_MB"), ours_peak_MB=row.get("ours_peak_MB"),
               **{f"vs_{name}": row[f"fwd_bwd_vs_{name}"] for name in case.others})
