"""``python -m benchmarks.kernels.retune``: tune every kernel on this GPU and rewrite the table of tuned configs.

Runs the forward+backward of each kernel's benchmark cases (``benchmarks.kernels.registry``) with
tuning forced on, so that Triton's autotuner benchmarks every config alone at each key the cases
meet, and writes the config it chose per (kernel, key) into ``--out``: the table that every later
run reads instead of tuning (``fastcore_ops/kernels/tuned_configs.json``, see
``fastcore_ops.kernels.backend``). The keys this run meets replace the table's; the others stay,
so that a GPU session's time can be spent a few kernels at a time (``--kernels``). Needs CUDA.

``--only-new`` tunes only the keys the table at ``--out`` lacks: its other keys keep their configs, untimed, so a
GPU lease spends its time where the table has nothing (a kernel whose code changed under the same keys needs a
full retune).

``--missing`` needs no GPU and writes nothing: it lists the keys the kernels' benchmark cases meet that the table
at ``--out`` lacks (where a run meets one, the kernel runs an untuned config), and the ``--kernels`` a retune
would need to fill them (``RETUNE_KERNELS`` for tools/lent_gpu.sh).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fastcore_ops import cli

DTYPES = ("float16", "bfloat16", "float32")
TUNED_DTYPES = "float16,bfloat16"  # --dtypes' default


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.kernels.retune``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels.retune", description=cli.description(__doc__))
    parser.add_argument("--out", type=Path, required=True,
                        help="the table to update, made if absent (the kernels read "
                             "fastcore_ops/kernels/tuned_configs.json)")
    parser.add_argument("--kernels", default=None,
                        help="comma-separated subset, e.g. blurpool2d,bce_with_logits (default: every kernel)")
    parser.add_argument("--batch-size", type=cli.positive_int, default=256, help="batch size of the CNN kernels")
    parser.add_argument("--dtypes", default=TUNED_DTYPES,
                        help=f"comma-separated dtypes to tune in, of {', '.join(DTYPES)}")
    parser.add_argument("--missing", action="store_true",
                        help="without a GPU, list the keys the benchmark cases meet that the table at --out lacks, "
                             "and the kernels to retune; change nothing")
    parser.add_argument("--only-new", action="store_true",
                        help="tune only the keys the table at --out lacks; its other keys keep their configs, untimed")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """``--dtypes`` becomes the list of dtype names; ``--missing`` (no GPU, nothing tuned) refuses ``--only-new``."""
    args.dtypes = cli.check_names("--dtypes", args.dtypes, DTYPES, "dtype")
    if args.missing and args.only_new:
        raise ValueError("--missing lists the keys without a GPU and --only-new tunes them on one: pass one of them")


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> int:
    from .tuning import run  # torch, triton and every kernel: once the command line parsed

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
