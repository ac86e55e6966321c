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

import sys
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels.host_side", description=cli.description(__doc__))
    parser.add_argument("--kernels", default=None,
                        help="comma-separated subset, e.g. blurpool2d,bce_with_logits (default: every kernel)")
    parser.add_argument("--out", type=Path, required=True, help="folder for host_side.md and .json")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        check_claimable(args.out, "benchmarks")
    except cli.REFUSALS as error:
        return cli.refuse(error)
    from .host_costs import run  # torch and every kernel: once the command line parsed

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
