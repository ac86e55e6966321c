"""``python -m fastcore_ops.data.prepare SRC DST``: an image dataset as WebDataset tar shards, shrunk once.

    python -m fastcore_ops.data.prepare /data/imagenet/train /fast/imagenet-256/train \\
        --max-side 256 --quality 90 --shard-size 1000

Every image is stored with its longer side at most ``--max-side`` (never enlarged), as a JPEG of
``--quality``; a JPEG already small enough keeps its own bytes (no second loss of quality).
Training at 176 px from 256 px images decodes a fraction of the pixels of a full ImageNet photo
in every epoch, and one large read per shard replaces a file open per image.

Samples are shuffled once with ``--seed`` before they are cut into shards, so every shard holds
every class (readers that shuffle shards, as WebDataset's do, need that). Files that cannot be
decoded are left out and listed in the index with the reason.

Safe to stop: a shard is written as ``<name>.partial`` and renamed when whole, and the shards
finished so far are recorded in ``prepare-progress.jsonl``; rerunning the same command checks
them against their checksums and continues. ``index.json`` (shards/format.py) is written last, so a
folder with an index is a finished one.

Never destroys what it did not write: the destination must be new, empty, or marked as
prepare's by an earlier run (``.fastcore_ops-prepare``, owned_folder.py), and even there only
the names prepare writes are replaced or deleted. The arguments, the source and any progress
file are checked before the folder is created or marked, so a refused command (exit 2, one
``error:`` line) leaves it as it was; so does a run that fails before its first shard is whole.
A full disk is said as such, naming the file being written, what was kept or deleted, and the fix;
the half-written file is deleted to give the space back.
"""

from __future__ import annotations

import json
import sys

from fastcore_ops import cli
from fastcore_ops.data.shards.settings import PrepareSettings


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.data.prepare``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.data.prepare", description=cli.description(__doc__))
    parser.add_argument("source", help="ImageFolder root: SRC/<class>/<image>")
    parser.add_argument("destination", help="a new or empty folder for the shards and index.json (a folder prepare "
                                            "wrote is resumed if unfinished)")
    defaults = PrepareSettings  # its fields' defaults, read without making (and checking) settings
    parser.add_argument("--max-side", type=int, default=defaults.max_side, help="longest image side, in pixels")
    parser.add_argument("--quality", type=int, default=defaults.quality, help="JPEG quality of re-encoded images")
    parser.add_argument("--shard-size", type=int, default=defaults.shard_size, help="images per shard")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the shuffle before sharding")
    parser.add_argument("--workers", type=int, default=None, help="encoding processes (default: one per core)")
    cli.add_no_progress_option(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; a refusal is exit 2 with one ``error:`` line on stderr, the destination as it was."""
    try:
        args = build_parser().parse_args(argv)
        settings = PrepareSettings(args.max_side, args.quality, args.shard_size, args.seed)
        from fastcore_ops.data.shard_writer import prepare_shards  # numpy, Pillow and torch: once parsed

        index_path = prepare_shards(args.source, args.destination, settings, workers=args.workers,
                                    progress=not args.no_progress)
    except cli.REFUSALS as error:
        return cli.refuse(error)
    index = json.loads(index_path.read_text())
    print(f"{index['samples']} images in {len(index['shards'])} shards, {len(index['skipped'])} unreadable files "
          f"left out (listed in {index_path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
