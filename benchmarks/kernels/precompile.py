"""``python -m benchmarks.kernels.precompile``: compile here, without a GPU, the Triton kernels a lent GPU's run
launches, into the compile cache that the run is carried with.

On the H200 leases, Triton compiling took most of the minutes: the GPU check's correctness part and ``pytest -m
gpu`` stopped at their budgets (reports/lent-gpu-h200-20261204), the tests' time mostly compiles. A lease brings
its cache back for the next one, but Triton keys each compiled kernel on its source: once a kernel changes, the
last lease's entries for it are never found. This makes the calls a run makes, here: CPU tensors of the same
shapes, strides and dtypes are sent down the Triton path with Triton's driver replaced by
``benchmarks.kernels.fake_driver``'s, so each launch compiles the binary the GPU's would (sm_90, specialised
the same way) into Triton's cache in ``--cache`` and launches nothing. Parts:

- ``correctness``: the GPU check's cases in fp32, fp16 and bf16;
- ``timing``: every kernel's benchmark cases at a GPU's batch and dtype, in the configs the table holds;
- ``retune``: every config at the keys a ``retune --only-new`` would tune (the benchmark keys the table lacks);
- ``tests``: ``pytest -m gpu tests/kernels`` compiled only (``tests/kernels/compile_only.py``): the tests'
  outcomes mean nothing here, as no kernel runs.

A cache is found only by the Triton build that made it and only at the folder it was made in (its entries name
their files by absolute path): run this with the lease's Python and Triton (3.12, 3.6.0), into the folder the run
unpacks into. ``tools/lent_gpu.sh prepare --compile`` does both and carries the result.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fastcore_ops import cli

PARTS = ("correctness", "timing", "retune", "tests")


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.kernels.precompile``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels.precompile", description=cli.description(__doc__))
    parser.add_argument("--cache", type=Path, required=True,
                        help="Triton's cache folder to compile into, made if absent (its entries are only added to)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated subset of {', '.join(PARTS)}")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """``--parts`` becomes a list; refused: a ``--cache`` that is not a folder, the tests part away from the
    project's root, and Triton's interpreter (it compiles nothing)."""
    args.parts = cli.check_names("--parts", args.parts, PARTS, "part")
    if args.cache.exists() and not args.cache.is_dir():
        raise ValueError(f"--cache {args.cache}: not a folder; pass Triton's cache folder to fill")
    if "tests" in args.parts and not Path("tests/kernels").is_dir():
        raise ValueError("the tests part runs pytest on tests/kernels: run from the project's root")
    for variable in ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET"):
        if os.environ.get(variable, "0") != "0":
            raise ValueError(f"{variable} is set: the interpreter compiles nothing; unset it")


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> int:
    # Before Triton is imported: its knobs read the folder from the environment. Each kernel's binary and metadata
    # alone, without its IRs (85% of an entry), as a lease keeps them (tools/lent_gpu.sh).
    os.environ.update(TRITON_CACHE_DIR=str(args.cache.resolve()), TRITON_STORE_BINARY_ONLY="1")
    from .compiling import run  # torch, triton and every kernel: once the command line parsed

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
