"""``python -m benchmarks.kernels.host_side``: what each kernel costs the host, measured without a GPU.

For every kernel declared in ``benchmarks.kernels.registry``, with every Triton launch stubbed:

- on fake CUDA tensors at a training step's size (bf16): the device launches its forward and
  backward issue, against their budgets, and anything that makes the host wait or copies host
  data to the device;
- on real CPU tensors through autograd's engine: the buffers filled with zeros;
- on tiny CPU tensors: the host time of a forward+backward against the PyTorch op a user would
  otherwise run (its compute is negligible at that size, so both sides cost their host side),
  both timed in turn in one sitting, the minimum of each taken.

Writes ``host_side.md`` and ``host_side.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import sys

from fastcore_ops import cli


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels.host_side", description=cli.description(__doc__))
    parser.add_argument("--kernels", default=None,
                        help="comma-separated subset, e.g. blurpool2d,bce_with_logits (default: every kernel)")
    parser.add_argument("--out", type=cli.claimable_folder("benchmarks"), required=True,
                        help="folder for host_side.md and .json")
    return parser


@cli.command(build_parser)
def main(args: argparse.Namespace) -> int:
    from .host_costs import run  # torch and every kernel: once the command line parsed

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
