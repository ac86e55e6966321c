"""The runner of ``python -m benchmarks.kernels`` (its module says what it times), imported once its command line
is parsed: each kernel's cases measured, the tables printed, the CSV, JSON and plot written.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
from pathlib import Path

import torch
from torch._dynamo.utils import counters
from tqdm import tqdm

from fastcore_ops import cli
from fastcore_ops.kernels import rivals
from fastcore_ops.owned_folder import claim_folder

from ..timing import (device_name, device_times_ms, host_time_ms, launch_count, peak_bandwidth_gbs, peak_memory_mb,
                      time_ms)
from . import Case
from .registry import KERNELS

log = logging.getLogger("benchmarks.kernels")


def all_cases(batch: int, dtype: torch.dtype, device: torch.device, only: set[str] | None,
              tiny: bool = False) -> list[Case]:
    """Every kernel's cases at ``batch`` (the CNN kernels'), or with ``tiny`` at the small sizes
    Triton's interpreter gets through in seconds; ``only``: the kernels to keep (None: all)."""
    for name in sorted(only or ()):
        cli.check_name("--kernels", name, [spec.name for spec in KERNELS], "kernel")
    return [case for spec in KERNELS if only is None or spec.name in only
            for case in spec.benchmark_cases(batch, dtype, device, tiny)]


def _forward(fn, inputs):
    def run():
        with torch.no_grad():
            fn(*inputs)

    return run


def _forward_backward(fn, inputs):
    differentiable = [t for t in inputs if t.requires_grad]
    out = fn(*inputs)
    grad_out = torch.randn_like(out)

    def run():
        torch.autograd.grad(fn(*inputs), differentiable, grad_out)

    return run


def call_cell(case: Case, inputs: tuple) -> str:
    """The :func:`~fastcore_ops.kernels.rivals.cell` of ours' call on ``inputs``, recorded from a forward."""
    with rivals.recorded_cells() as calls:
        _forward(case.ours, inputs)()
    cells = {cell for kernel, cell in calls if kernel == case.kernel}
    if len(cells) != 1:
        raise RuntimeError(f"{case.kernel} {case.size}: ours' forward called {case.kernel} in {len(cells)} cells "
                           f"({sorted(cells)}), where its row holds one")
    return cells.pop()


def _timed_paths(case: Case, time_ours: bool) -> dict:
    """The paths of ``case`` that are timed, by name: the reference, the others it is set against, and ours."""
    return {"ref": case.reference, **case.others, **({"ours": case.ours} if time_ours else {})}


def _warm(timed: dict, inputs: tuple, device: torch.device) -> None:
    """On CUDA, one forward and one forward+backward of every path, so that no timed region compiles or tunes.
    On the CPU nothing compiles (the interpreter runs kernels as NumPy), and each timing's first call is untimed."""
    if device.type != "cuda":
        return
    for fn in timed.values():
        _forward(fn, inputs)()
        _forward_backward(fn, inputs)()
    torch.cuda.synchronize(device)


def _device_columns(name: str, run, device: torch.device) -> dict:
    """Path ``name``'s forward+backward ``run`` as the device sees it (``graph_ms``, ``l2_warm_ms``,
    ``l2_cold_ms``, ``kernels_ms``, ``kernels``, ``graph_error``: see benchmarks.timing.device_times_ms, None
    off CUDA), as the host sees it (``host_ms``: benchmarks.timing.host_time_ms, None off CUDA) and the
    ``launches`` it issues (on any device), each prefixed ``{name}_fwd_bwd_``."""
    columns = {f"{name}_fwd_bwd_{key}": value for key, value in device_times_ms(run, device).items()}
    columns[f"{name}_fwd_bwd_host_ms"] = host_time_ms(run, device)
    try:  # last: a compiled rival runs eagerly under the launch recorder, which may need more memory
        columns[f"{name}_fwd_bwd_launches"] = launch_count(run)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        columns[f"{name}_fwd_bwd_launches"] = None
    except NotImplementedError:
        # FlexAttention, a higher-order op, refuses to run under the recorder's dispatch mode: on a GPU the
        # profiler's kernel count stands for it (it stopped the ALiBi timing in reports/lent-gpu-h200-20261204).
        columns[f"{name}_fwd_bwd_launches"] = None
    return columns


@rivals.kernels_always()  # ours is the kernel, wherever the table of faster rivals would send its call
def measure(case: Case, device: torch.device, time_ours: bool, cpu_budget_s: float = 2.0) -> dict:
    """One row of ``case``: both sides' times, traffic, bandwidth, peak memory and the bandwidth floor (on CUDA:
    ``floor_*_ms``, ours' modelled bytes at the device's peak bandwidth); ``cpu_budget_s``: the time each CPU
    timing may take (see benchmarks.timing.time_samples_ms).

    ``{path}_{mode}_ms`` is the eager time (the host's dispatch and launches included). Each path's
    forward+backward also has the device's own time (``_graph_ms``: CUDA-graph replay, ``_l2_warm_ms`` and
    ``_l2_cold_ms``, ``_kernels_ms`` and ``_kernels``: the profiler's kernel durations and count; None off CUDA,
    and the graph's three where ``_graph_error`` says capture failed), the host's own time (``_host_ms``: the
    process's CPU time for one call, None off CUDA) and its ``_launches`` (LaunchRecorder's count). No timed call is
    a path's first: compiling and tuning stay out of every timed region. ``cell``: where ours' calls fall in the
    table of faster rivals (``fastcore_ops.kernels.rivals``)."""
    inputs = case.make_inputs()
    row = {"kernel": case.kernel, "size": case.size}
    if time_ours:
        row["cell"] = call_cell(case, inputs)
    peak_gbs = peak_bandwidth_gbs(device)
    timed = _timed_paths(case, time_ours)
    # Dynamo starts each case afresh, and the row says how many graphs it compiled. On the H200 every compiled
    # rival after each kernel's first size ran its eager ops (the same kernels, to the microsecond:
    # reports/lent-gpu-h200-20261204), as if its code were left marked to skip by the first size's measurements;
    # a CPU does not show it. `compiled_graphs` 0 where a compiled rival is timed means it ran eagerly.
    torch._dynamo.reset()
    graphs_before = counters["stats"]["unique_graphs"]
    _warm(timed, inputs, device)
    for mode, runner, ours_bytes, ref_bytes in (
        ("fwd", _forward, case.ours_traffic.forward, case.reference_traffic.forward),
        ("fwd_bwd", _forward_backward, case.ours_traffic.forward_backward, case.reference_traffic.forward_backward),
    ):
        row[f"ref_{mode}_model_MB"] = ref_bytes / 1e6
        row[f"ours_{mode}_model_MB"] = ours_bytes / 1e6
        row[f"{mode}_traffic_ratio"] = ref_bytes / ours_bytes
        if peak_gbs:
            row[f"floor_{mode}_ms"] = ours_bytes / peak_gbs / 1e6
        for name, fn in timed.items():
            row[f"{name}_{mode}_ms"] = time_ms(runner(fn, inputs), device, cpu_budget_s)
            if case.flops is not None:
                row[f"{name}_{mode}_TFLOPs"] = case.flops[0 if mode == "fwd" else 1] / row[f"{name}_{mode}_ms"] / 1e9
        if time_ours:
            row[f"{mode}_speedup"] = row[f"ref_{mode}_ms"] / row[f"ours_{mode}_ms"]
            row[f"ours_{mode}_GBs"] = ours_bytes / row[f"ours_{mode}_ms"] / 1e6
            for name in case.others:
                row[f"{mode}_vs_{name}"] = row[f"{name}_{mode}_ms"] / row[f"ours_{mode}_ms"]
    runs = {name: _forward_backward(fn, inputs) for name, fn in timed.items()}
    for name, run in runs.items():
        row.update(_device_columns(name, run, device))
    if time_ours:
        ref_graph, ours_graph = row["ref_fwd_bwd_graph_ms"], row["ours_fwd_bwd_graph_ms"]
        row["fwd_bwd_graph_speedup"] = ref_graph / ours_graph if ref_graph and ours_graph else None
    for name, run in runs.items():
        peak = peak_memory_mb(run, device)
        if peak is not None:
            row[f"{name}_peak_MB"] = peak
    row["compiled_graphs"] = counters["stats"]["unique_graphs"] - graphs_before
    row["ref_temporaries_MB"] = case.reference_traffic.temporaries / 1e6
    row["ours_temporaries_MB"] = case.ours_traffic.temporaries / 1e6
    return row


def profile_case(case: Case, device: torch.device, time_ours: bool, calls: int = 5) -> str:
    """PyTorch's profiler table of ``calls`` forward+backward passes of each timed path of ``case``, after one untimed.

    Sorted by device time on a GPU (the kernels each path launches), else by CPU time.
    """
    from torch.profiler import ProfilerActivity, profile

    inputs = case.make_inputs()
    on_gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    sections = []
    for name, fn in _timed_paths(case, time_ours).items():
        run = _forward_backward(fn, inputs)
        run()
        with profile(activities=activities) as profiler:
            for _ in range(calls):
                run()
            if on_gpu:
                torch.cuda.synchronize(device)
        table = profiler.key_averages().table(sort_by="cuda_time_total" if on_gpu else "cpu_time_total", row_limit=12)
        sections.append(f"## {case.kernel} {case.size}: {name}, {calls} forward+backward passes\n\n{table}")
    return "\n\n".join(sections)


def _compute_bound_table(rows: list[dict], on_gpu: bool) -> str | None:
    """Kernels timed against further paths (attention against SDPA): times, TFLOP/s and memory side by side."""
    rows = [row for row in rows if "ref_fwd_bwd_TFLOPs" in row]
    if not rows:
        return None
    paths = ["ours", "ref"] if on_gpu else ["ref"]
    paths += sorted({key[: -len("_fwd_bwd_ms")] for row in rows for key in row if key.endswith("_fwd_bwd_ms")}
                    - {"ours", "ref", "floor"})
    columns = ["kernel", "size"] + [f"{p}_fwd_bwd_ms" for p in paths] + [f"{p}_fwd_bwd_TFLOPs" for p in paths]
    if on_gpu:
        columns += ["fwd_bwd_speedup"] + [f"fwd_bwd_vs_{p}" for p in paths[2:]] + [f"{p}_peak_MB" for p in paths]
    else:
        columns += ["fwd_bwd_traffic_ratio", "ref_temporaries_MB", "ours_temporaries_MB"]
    return _format_table(rows, columns)


def _device_table(rows: list[dict], on_gpu: bool) -> str:
    """The forward+backward as the device sees it, beside the eager time, and the launches of each side."""
    paths = ["ref", "ours"] if on_gpu else ["ref"]
    columns = ["kernel", "size"]
    if on_gpu:
        columns += [f"{p}_fwd_bwd_{what}" for p in paths for what in ("ms", "graph_ms", "kernels_ms", "l2_cold_ms")]
        columns.append("fwd_bwd_graph_speedup")
    return _format_table(rows, columns + [f"{p}_fwd_bwd_launches" for p in paths])


def _graph_errors(rows: list[dict]) -> list[str]:
    """One line per path whose forward+backward could not be captured in a CUDA graph, with why."""
    return [f"{row['kernel']} {row['size']}: {key[: -len('_fwd_bwd_graph_error')]}: {value}"
            for row in rows for key, value in row.items() if key.endswith("_fwd_bwd_graph_error") and value]


def _format_table(rows: list[dict], columns: list[str]) -> str:
    def cell(value):
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
        return "-" if value is None else str(value)

    table = [columns] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    lines = ["  ".join(v.rjust(w) if i > 1 else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))) for r in table]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def plot_speedups(rows: list[dict], on_gpu: bool, path: Path) -> None:
    """A bar per row: the measured forward+backward speed-up on a GPU, else the modelled traffic ratio."""
    from fastcore_ops.training.figures import plt, save_figure

    key, title = (("fwd_bwd_speedup", "measured speedup, forward+backward") if on_gpu
                  else ("fwd_bwd_traffic_ratio", "modelled DRAM traffic, reference / ours, forward+backward"))
    labels = [f"{r['kernel']} {r['size']}" for r in rows]
    values = [r[key] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.2))
    colors = ["tab:gray" if abs(v - 1) < 0.05 else "tab:green" if v > 1 else "tab:red" for v in values]
    ax.barh(labels, values, color=colors)
    ax.axvline(1.0, color="black", linewidth=0.8)
    if max(values) / min(values) > 20:  # attention's quadratic traffic would flatten every other bar
        ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("x (higher is better; 1 = parity)")
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)


# What a GPU run times by default (benchmarks.kernels.precompile compiles its launches ahead).
GPU_DEFAULT_BATCH, GPU_DEFAULT_DTYPE = 256, "float16"


def run(args: argparse.Namespace) -> int:
    """Measure the kernels ``args`` (``python -m benchmarks.kernels``'s) names, print the tables, write them to
    ``--out``; the command's exit status (2 for a kernel name it does not know)."""
    try:
        device = torch.device(args.device)
        on_gpu = device.type == "cuda"
        batch = args.batch_size or (GPU_DEFAULT_BATCH if on_gpu else 16)
        dtype = getattr(torch, args.dtype or (GPU_DEFAULT_DTYPE if on_gpu else "float32"))
        cases = all_cases(batch, dtype, device, set(args.kernels.split(",")) if args.kernels else None)
    except cli.REFUSALS as error:
        return cli.refuse(error)

    print(f"Device: {device_name(device)}; batch {batch}; {dtype}")
    if not on_gpu:
        print("No GPU here: the Triton kernels are not timed (the CPU would only run them through Triton's\n"
              "interpreter). Timed below: the PyTorch reference ops on the CPU; the speedup to expect on a GPU\n"
              f"is read from the modelled DRAM traffic (reference / ours). Batch {batch} instead of 256 keeps it short.")
    peak = peak_bandwidth_gbs(device)
    rows = []
    for case in tqdm(cases, desc="kernels", leave=False):
        rows.append(measure(case, device, time_ours=on_gpu))
        if args.jsonl is not None:  # appended and closed row by row: a process stopped midway keeps its rows
            with open(args.jsonl, "a") as f:
                f.write(json.dumps({"device": device_name(device), "batch": batch, "dtype": str(dtype), **rows[-1]})
                        + "\n")

    if on_gpu:
        columns = ["kernel", "size", "ref_fwd_ms", "ours_fwd_ms", "fwd_speedup", "ref_fwd_bwd_ms", "ours_fwd_bwd_ms",
                   "fwd_bwd_speedup", "ours_fwd_bwd_GBs", "ref_peak_MB", "ours_peak_MB"]
        for row in rows:
            row["peak_GBs"] = peak
            row["ours_fwd_bwd_%peak"] = 100 * row["ours_fwd_bwd_GBs"] / peak
        columns.append("ours_fwd_bwd_%peak")
    else:
        columns = ["kernel", "size", "ref_fwd_ms", "ref_fwd_bwd_ms", "ref_fwd_bwd_model_MB", "ours_fwd_bwd_model_MB",
                   "fwd_bwd_traffic_ratio", "ref_temporaries_MB", "ours_temporaries_MB"]
    print(_format_table(rows, columns))
    if on_gpu:
        print("\nForward+backward: eager (ms, host included), the device's own time (graph_ms: CUDA-graph replay; "
              "kernels_ms: the profiler's kernel durations; l2_cold_ms: one replay after L2 is flushed), launches:")
    else:
        print("\nForward+backward launches, as benchmarks.timing.launch_count counts them (device times need CUDA):")
    print(_device_table(rows, on_gpu))
    for line in _graph_errors(rows):
        print(f"not captured in a CUDA graph: {line}")
    compute_bound = _compute_bound_table(rows, on_gpu)
    if compute_bound:
        print("\nAgainst further PyTorch paths (vs_X = X's time / ours; sdpa without a bias is the speed limit):")
        print(compute_bound)
    if not on_gpu and any(abs(row["fwd_bwd_traffic_ratio"] - 1) < 0.05 for row in rows):
        print("A traffic ratio of 1 means both sides already move the minimum bytes (blurpool2d: read the input,\n"
              "write the strided output); a GPU speedup there comes only from reaching the bandwidth bound\n"
              "better than cuDNN's depthwise convolution does, which only a GPU run can show.")
    if peak:
        print(f"Device peak DRAM bandwidth: {peak:.0f} GB/s")

    claim_folder(args.out, "benchmarks")
    meta = {"device": device_name(device), "batch": batch, "dtype": str(dtype), "gpu": on_gpu}
    (args.out / "kernels.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    with open(args.out / "kernels.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=sorted({k for row in rows for k in row}))
        writer.writeheader()
        writer.writerows(rows)
    plot_speedups(rows, on_gpu, args.out / "kernels.png")
    print(f"Wrote {args.out / 'kernels.csv'}, {args.out / 'kernels.json'} and {args.out / 'kernels.png'}")
    if args.profile:
        profiles = [profile_case(case, device, time_ours=on_gpu) for case in tqdm(cases, desc="profiles", leave=False)]
        header = f"{device_name(device)}; batch {batch}; {dtype}"
        (args.out / "profile.txt").write_text("\n\n".join([header, *profiles]))
        print(f"Wrote {args.out / 'profile.txt'}")
    return 0
