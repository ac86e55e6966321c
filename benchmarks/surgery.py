"""``python -m benchmarks.surgery``: what each surgery costs a model, in one table.

For ResNet-50 and GPT-2 small: parameters, FLOPs of one training step (forward + backward,
counted by ``torch.utils.flop_counter`` on the PyTorch ops, references included), and
training-step throughput before and after each surgery, on the GPU when there is one and
on the CPU otherwise.
"""

from __future__ import annotations

import argparse
import sys

from fastcore_ops import cli

WORKLOADS = ("resnet50", "gpt2-small")


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.surgery``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.surgery", description=cli.description(__doc__))
    cli.add_device_option(parser)
    parser.add_argument("--models", default=",".join(WORKLOADS), help="comma-separated models to operate on")
    parser.add_argument("--batch-size", type=cli.positive_int, default=None,
                        help="images or sequences per step (default: 64 images / 8 sequences on a GPU, 8 / 2 on "
                             "the CPU)")
    parser.add_argument("--image-size", type=cli.positive_int, default=None,
                        help="ResNet-50's image side (default: 224 on a GPU, 128 on the CPU)")
    parser.add_argument("--sequence", type=cli.positive_int, default=None,
                        help="GPT tokens per sequence (default: 1024 on a GPU, 256 on the CPU)")
    parser.add_argument("--steps", type=cli.positive_int, default=None,
                        help="timed steps after a warm-up (default: 20 on a GPU, 5 on the CPU)")
    parser.add_argument("--out", type=cli.claimable_folder("benchmarks"), required=True,
                        help="folder for CSV and JSON")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """``--models`` becomes the list of models to operate on."""
    args.models = cli.check_names("--models", args.models, WORKLOADS, "model")


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> None:
    from .surgery_workloads import run  # torch, torchvision and the models: once the command line parsed

    run(args, args.models)


if __name__ == "__main__":
    sys.exit(main())
