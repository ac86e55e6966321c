"""``python -m benchmarks.dataloader``: images per second of our loaders against torchvision's.

One run, four tables, each row a ratio to the torchvision loader doing the same work in the same
run (loaders.py has the baseline), all delivering normalized float batches on the device:

- fixed size: the image size throughout, without and with RandAugment (one op, depth 1);
- progressive: the ResNet-50 Mild schedule (half size to full, resnet50_mild's ProgressiveResize)
  over the timed epochs; torchvision decodes every full image and crops it to the epoch's size,
  ours decodes at the scheduled size;
- shards: ours reading prepared shards (``python -m fastcore_ops.data.prepare``, longer side at
  most 256) against torchvision on the original folder, and on a prepared copy of the folder
  (the same shrunk JPEGs as files), which shows how much comes from preparing, how much from
  the loader;
- fixed size, one core busy: the first table again while another process spins on one core.

A last table says where one image's time goes (decode, crop and resize, augmentation, copy).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable

IMAGENET_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imagenet-sample"
SECTIONS = ("fixed", "progressive", "shards", "loaded")
BACKENDS = ("pil", "dali")


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.dataloader``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.dataloader", description=cli.description(__doc__))
    cli.machine_default(parser.add_argument(
        "--data", type=Path, default=IMAGENET_SAMPLE,
        help="an ImageFolder tree (default: ../shared/datasets/imagenet-sample beside the repository: 500 ImageNet "
             "photos)"))
    cli.add_device_option(parser)
    parser.add_argument("--image-size", type=cli.positive_int, default=176, help="the side of the images delivered")
    parser.add_argument("--batch-size", type=cli.positive_int, default=64, help="images per batch")
    parser.add_argument("--epochs", type=cli.positive_int, default=3, help="timed epochs, after one warm-up epoch")
    parser.add_argument("--workers", type=cli.positive_int, default=os.cpu_count(),
                        help="decoding workers; the default is one per core")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated backends of ours to time")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated tables to measure")
    parser.add_argument("--out", type=Path, required=True, help="folder for CSV, JSON and PNG")
    parser.add_argument("--prepared", type=Path, default=None,
                        help="where the prepared shards and folder copy are kept (default: OUT/prepared)")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """What the parser cannot check; the comma lists become lists, ``--prepared`` gets its default."""
    if not args.data.is_dir():
        raise ValueError(f"--data {args.data} is not a folder; pass an ImageFolder tree (root/<class>/<image>)")
    args.backends = cli.check_names("--backends", args.backends, BACKENDS, "backend")
    args.sections = cli.check_names("--sections", args.sections, SECTIONS, "section")
    args.prepared = args.prepared or args.out / "prepared"
    for folder in (args.out, args.prepared):
        check_claimable(folder, "benchmarks")


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> None:
    from .dataloader_tables import run  # torch, torchvision and the loaders: once the command line parsed

    run(args)


if __name__ == "__main__":
    sys.exit(main())
