"""``python -m fastcore_ops.data.datasets cifar10 DIR``: CIFAR-10 as the JPEG ImageFolder the recipes train on.

    python -m fastcore_ops.data.datasets cifar10 data/cifar10-jpeg      # downloads the archive (163 MB)
    python -m fastcore_ops.data.datasets cifar10 data/cifar10-jpeg --archive cifar-10-python.tar.gz

It writes ``DIR/train/<class>/NNNN.jpg`` (5,000 a class) and ``DIR/test/<class>/NNNN.jpg`` (1,000 a
class), numbered in the archive's order, each a 32 x 32 JPEG of quality 75 with 4:2:0 chroma, as this
project's own machines hold CIFAR-10: "the first N of each class" is then the same subset everywhere.
torchvision reads the archive (the python version, from the dataset's page or a copy given with
``--archive``) and checks every file in it against the published checksums before reading it, so a
damaged or foreign archive is refused before anything is written. The result is checked (every
class, every count, every image 32 x 32 RGB) before the command says it is done.

``DIR`` must be new, empty, or one this command wrote before (``.fastcore_ops-datasets``), where it
replaces only the images it writes. A refused command (exit 2, one ``error:`` line) changes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fastcore_ops import cli


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.data.datasets``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.data.datasets", description=cli.description(__doc__))
    parser.add_argument("dataset", choices=["cifar10"], help="the dataset to make")
    parser.add_argument("out", type=Path, help="the folder to write it into: new, empty, or made by this command")
    parser.add_argument("--archive", type=Path,
                        help="cifar-10-python.tar.gz as downloaded from the dataset's page (default: download it)")
    cli.add_no_progress_option(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.archive is not None and not args.archive.is_file():
            raise ValueError(f"--archive {args.archive}: no such file; pass cifar-10-python.tar.gz")
        from fastcore_ops.data.cifar10 import CIFAR10_PER_CLASS, make_cifar10  # numpy, Pillow, torchvision: once parsed

        make_cifar10(args.out, args.archive, progress=not args.no_progress)
    except cli.REFUSALS as error:
        return cli.refuse(error)
    print(f"{args.out}: CIFAR-10 as JPEGs, checked: train 10 x {CIFAR10_PER_CLASS['train']}, "
          f"test 10 x {CIFAR10_PER_CLASS['test']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
