"""Part 2: each kernel against the PyTorch ops it replaces (``benchmarks.kernels``), held to its goals.

Forward and forward+backward times, the kernel's bandwidth against the device's measured copy
bandwidth (a device-to-device copy: what a memory-bound kernel can hope for), peak memory, each
further rival's time over ours (``vs_X``), and each goal of the kernel's declaration
(:class:`benchmarks.kernels.Goal`, derived in docs/kernels.md) that holds at the case's size: its
measured ratio (``X_ratio``: rival X's time, or the floor's, over ours; ``ref_peak_MB_ratio`` for
memory) and whether it is met (``X_met``). The goals: BlurPool 2x cuDNN and within 1.3x of its
bandwidth floor; blur-then-max-pool 3x the unfused pair at no more memory; fused BCE no slower at
1000 classes and 3x at 32000; Ghost BatchNorm within 1.15x of full-batch batch norm and 2x the
per-chunk loop; ALiBi attention FlexAttention's speed, and within 1.5x of SDPA without a bias from
T = 2048. ``goal`` is the speed-up over the reference the kernel is held to at that size (the
figure's tick), ``meets_goal`` whether every goal there is met.
"""

from __future__ import annotations

import itertools

import torch

from benchmarks.gpu_check.parts import Mode, Recorder
from benchmarks.kernels import Case
from benchmarks.kernels.runner import all_cases, measure
from benchmarks.kernels.registry import KERNELS
from benchmarks.timing import time_ms

# What each kernel is held to on a GPU (its declaration's goals).
GOALS = {spec.name: spec.goals for spec in KERNELS}


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
        cases = round_robin(all_cases(1 if mode.small else 256, dtype, device, None, tiny=mode.small))
        # Small mode shows that the timing code runs, which each kernel's first case shows as well as all of them.
        for case in cases[:len(KERNELS)] if mode.small else cases:
            try:
                _time_case(case, dtype, mode, copy_gbs, record)
            except torch.OutOfMemoryError:  # a finding, not a fault: the materialized reference at long lengths
                torch.cuda.empty_cache()
                record.row(kernel=case.kernel, size=case.size, dtype=dtype, error="out of memory")
    if mode.small:
        record.note("Small mode: the kernels ran through Triton's interpreter on the CPU, so every time and speed-up "
                    "here is meaningless as a GPU figure and no goal is judged; the part shows that the timing "
                    "code runs, on each kernel's first case.")
    record.note("vs_X: X's forward+backward time over ours (compiled: the reference through torch.compile; "
                "batch_norm: one F.batch_norm over the whole batch; sdpa_bias: SDPA with the ALiBi bias as an "
                "additive mask; sdpa: SDPA causal without a bias, the speed limit; flex: FlexAttention compiled, "
                "with ALiBi as its score modification).")
    record.note("Goals, X_ratio at least: " + "; ".join(
        f"{kernel}: " + ", ".join(f"{goal.name} {goal.at_least:.3g} ({goal.text})" for goal in goals)
        for kernel, goals in GOALS.items()) + ". floor: ours' modelled bytes at the device's peak bandwidth.")


def goal_columns(case: Case, row: dict, small: bool) -> dict:
    """Each goal that holds at ``case``'s size, judged on its ``measure`` row: ``X_ratio`` and ``X_met`` (None in
    small mode, where nothing is a GPU figure, or where the row lacks the rival); ``goal``, the speed-up over the
    reference asked there (None if none is); ``meets_goal``, False if one is missed, else None if one is not
    judged, else True.

        >>> from types import SimpleNamespace
        >>> row = {"ref_fwd_bwd_ms": 3.0, "ours_fwd_bwd_ms": 1.0}  # a CPU row: no floor
        >>> columns = goal_columns(SimpleNamespace(kernel="blurpool2d"), row, small=False)
        >>> columns["ref_ratio"], columns["ref_met"], columns["floor_met"], columns["goal"], columns["meets_goal"]
        (3.0, True, None, 2.0, None)
    """
    columns, speed_goal = {}, None
    for goal in GOALS[case.kernel]:
        if not goal.applies_to(case):
            continue
        ratio = goal.ratio(row)
        columns[f"{goal.name}_ratio"] = ratio
        columns[f"{goal.name}_met"] = None if small or ratio is None else ratio >= goal.at_least
        if goal.name == "ref":
            speed_goal = goal.at_least
    verdicts = [value for key, value in columns.items() if key.endswith("_met")]
    meets = False if False in verdicts else None if None in verdicts or not verdicts else True
    return {**columns, "goal": speed_goal, "meets_goal": meets}


def _time_case(case, dtype: torch.dtype, mode: Mode, copy_gbs: float, record: Recorder) -> None:
    row = measure(case, mode.device, time_ours=True, cpu_budget_s=0.0)
    record.row(kernel=case.kernel, size=case.size, dtype=dtype,
               reference_fwd_ms=row["ref_fwd_ms"], ours_fwd_ms=row["ours_fwd_ms"],
               reference_fwd_bwd_ms=row["ref_fwd_bwd_ms"], ours_fwd_bwd_ms=row["ours_fwd_bwd_ms"],
               fwd_bwd_speedup=row["fwd_bwd_speedup"],
               ours_GBs=row["ours_fwd_bwd_GBs"], percent_of_copy=100 * row["ours_fwd_bwd_GBs"] / copy_gbs,
               reference_peak_MB=row.get("ref_peak_MB"), ours_peak_MB=row.get("ours_peak_MB"),
               **{f"vs_{name}": row[f"fwd_bwd_vs_{name}"] for name in case.others},
               # The device's own forward+backward time and launches of each path (benchmarks.kernels' measure).
               fwd_bwd_graph_speedup=row["fwd_bwd_graph_speedup"],
               **{f"{label}_{column}": row[f"{path}_fwd_bwd_{column}"]
                  for path, label in (("ref", "reference"), ("ours", "ours"), *((name, name) for name in case.others))
                  for column in ("graph_ms", "l2_warm_ms", "l2_cold_ms", "kernels_ms", "kernels", "graph_error",
                                 "launches")},
               **goal_columns(case, row, mode.small))
