"""``python -m benchmarks.kernels``: every fused kernel against the PyTorch ops it replaces.

On a GPU it times both (``triton.testing.do_bench``), forward and forward+backward, and
reports the speedup and the achieved bandwidth against the device's peak; beside those eager
times (the host included), each forward+backward's device time alone (CUDA-graph replay, L2
warm and cold, the profiler's kernel durations) and its launches. Without a GPU it says so,
times the reference ops on the CPU, counts their launches, and prints each kernel's modelled
memory traffic next to the reference's, so the expected gain is visible on paper. With ``--profile``
it also writes ``profile.txt``: where each timed path's forward+backward spends its time, op by
op (PyTorch's profiler, CUDA kernels included on a GPU), for a path slower than it should be.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fastcore_ops import cli


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.kernels``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels", description=cli.description(__doc__))
    cli.add_device_option(parser)
    parser.add_argument("--batch-size", type=cli.positive_int, default=None,
                        help="batch size of the CNN kernels (default: 256 on a GPU, 16 on the CPU)")
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default=None,
                        help="the inputs' dtype (default: float16 on a GPU, float32 on the CPU)")
    parser.add_argument("--kernels", default=None,
                        help="comma-separated subset, e.g. blurpool2d,bce_with_logits (default: every kernel)")
    parser.add_argument("--profile", action="store_true",
                        help="also write profile.txt: each timed path's forward+backward op by op (PyTorch's profiler)")
    parser.add_argument("--out", type=cli.claimable_folder("benchmarks"), required=True,
                        help="folder for CSV, JSON and PNG")
    parser.add_argument("--jsonl", type=Path, default=None,
                        help="also append each row to this file as one JSON line as soon as it is measured, so a run "
                             "stopped midway keeps the rows it finished (tools/lent_gpu.sh)")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """``--jsonl`` names a file in a folder that exists."""
    if args.jsonl is not None and (args.jsonl.is_dir() or not args.jsonl.parent.is_dir()):
        raise ValueError(f"--jsonl {args.jsonl}: must be a file in an existing folder")


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> int:
    from .runner import run  # torch, triton and every kernel's cases: once the command line parsed

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
