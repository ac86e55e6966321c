"""``python -m benchmarks.kernels.faster_rivals``: update the table of faster rivals from a GPU run's rows.

Each row ``python -m benchmarks.kernels --jsonl FILE`` writes on a GPU holds a kernel's forward+backward on the
device's own time (the CUDA-graph replay, else the profiler's kernel durations) beside its rival's (``ref``, the
PyTorch reference its public function runs off the GPU), and the cell of the kernel's calls. Where the rival was
faster, the row's cell enters the table for its kernel and GPU, with the size and both times; where the kernel
was, the cell leaves it. Cells no row measured stay, and where a cell was measured twice the later row counts.
The kernels' public functions then run the rival at the table's cells (see ``fastcore_ops.kernels.rivals``).

Example:
    python -m benchmarks.kernels.faster_rivals runs/lease/kernels.jsonl --out fastcore_ops/kernels/faster_rivals.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fastcore_ops import cli

from .goals import device_time_ms, read_rows


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.kernels.faster_rivals``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels.faster_rivals",
                                description=cli.description(__doc__))
    parser.add_argument("rows", type=Path, nargs="+", help="kernels.jsonl files a GPU run wrote, oldest first")
    parser.add_argument("--out", type=Path, required=True,
                        help="the table to update, made if absent (the kernels read "
                             "fastcore_ops/kernels/faster_rivals.json)")
    return parser


def updated(table: dict, rows: list[dict], kernels: list[str]) -> tuple[dict, list[str]]:
    """``table`` with each measured cell entered or removed by its last row, and a line per (kernel, GPU) saying
    where the rival was faster. Raises ValueError, naming the row, for a row that cannot say.

        >>> row = {"kernel": "blurpool2d", "size": "8x8x28x28 nchw stride 1", "device": "GPU", "cell": "c",
        ...        "ours_fwd_bwd_graph_ms": 0.4, "ref_fwd_bwd_graph_ms": 0.3}
        >>> table, lines = updated({}, [row], ["blurpool2d"])
        >>> table["blurpool2d"]["GPU"]["c"]["rival_ms"], lines
        (0.3, ['blurpool2d on GPU: the rival faster in 1 of 1 cells measured: 8x8x28x28 nchw stride 1'])
    """
    table = json.loads(json.dumps(table))  # a copy: the caller's stays as it was
    measured: dict[tuple[str, str], dict[str, str]] = {}  # (kernel, GPU) -> cell -> the size that measured it
    for row in rows:
        where = f"the {row['kernel']} row of size {cli.shown(row['size'])}"
        if row["kernel"] not in kernels:
            raise ValueError(f"{where}: not a declared kernel ({', '.join(kernels)}); pass the kernels.jsonl a GPU "
                             "run wrote")
        if not isinstance(row.get("cell"), str) or not isinstance(row.get("device"), str):
            raise ValueError(f"{where}: no cell or device (the kernel was not timed in it, as on a CPU, or it was "
                             "written before the table of faster rivals); time the kernel on a GPU with python -m "
                             "benchmarks.kernels --jsonl")
        kernel_ms, rival_ms = device_time_ms(row, "ours"), device_time_ms(row, "ref")
        if kernel_ms is None or rival_ms is None:
            raise ValueError(f"{where}: no device time for the kernel and its rival (a row from a CPU?); pass the "
                             "kernels.jsonl a GPU run wrote")
        cells = table.setdefault(row["kernel"], {}).setdefault(row["device"], {})
        if rival_ms < kernel_ms:
            cells[row["cell"]] = {"size": row["size"], "kernel_ms": kernel_ms, "rival_ms": rival_ms}
        else:
            cells.pop(row["cell"], None)
        measured.setdefault((row["kernel"], row["device"]), {})[row["cell"]] = row["size"]
    lines = []
    for (kernel, device), sizes in measured.items():
        faster = [size for cell, size in sizes.items() if cell in table[kernel][device]]
        lines.append(f"{kernel} on {device}: the rival faster in {len(faster)} of {len(sizes)} cells measured"
                     + (": " + "; ".join(faster) if faster else ""))
    kept = {kernel: {device: cells for device, cells in devices.items() if cells} for kernel, devices in table.items()}
    return {kernel: devices for kernel, devices in kept.items() if devices}, lines


@cli.command(build_parser)
def main(args: argparse.Namespace) -> int:
    from fastcore_ops.kernels.rivals import load_faster_rivals

    from .registry import KERNELS  # imports every kernel: after the command line is parsed
    from .tuning import write_table

    try:
        if args.out.is_dir() or not args.out.parent.is_dir():
            raise ValueError(f"--out {args.out}: must be a file in an existing folder")
        table = load_faster_rivals(args.out) if args.out.exists() else {}
        table, lines = updated(table, read_rows(args.rows), [spec.name for spec in KERNELS])
    except ValueError as error:
        return cli.refuse(error)
    write_table(table, args.out)
    print("\n".join(lines + [f"Wrote {args.out}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
