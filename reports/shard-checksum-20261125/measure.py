"""What checking each shard's sha256 before its first read costs: per GB, and in a loader's first epoch.

    python reports/shard-checksum-20261125/measure.py ../shared/datasets/cifar10-jpeg/train /tmp/shard-checksum \\
        --max-side 32 --image-size 32 > reports/shard-checksum-20261125/output.txt

Prepares SOURCE (an ImageFolder tree; ``--per-class N`` takes the first N images of each class)
into ``WORKDIR/shards`` once (a rerun reuses it), then measures, with the shards in the page cache:

1. sha256 against reading: the seconds per GB of hashing every shard (``verify_shards``, one
   thread per core, as the loader runs it) and of reading the same bytes without hashing.
2. A loader's first epoch with and without the check: each run is a fresh process that builds
   ``build_loader(WORKDIR/shards)`` and reads one training epoch; "with" leaves the check to the
   loader (it hashes every shard before its first batch), "without" has the shards checked
   before the clock starts. The two take turns ``--repeats`` times; the medians of the time to
   the first batch (which holds all of the check) and of the whole epoch are compared, and the
   differences of the runs made next to each other (less moved by a drift in the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from fastcore_ops.data import build_loader
from fastcore_ops.data.prepare import PrepareSettings
from fastcore_ops.data.shard_writer import prepare_shards
from fastcore_ops.data.shards import read_shard_samples, verify_shards
from fastcore_ops.data.sources import find_samples


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="ImageFolder tree, e.g. ../shared/datasets/cifar10-jpeg/train")
    parser.add_argument("workdir", type=Path, help="scratch folder; the shards go to WORKDIR/shards")
    parser.add_argument("--per-class", type=int, default=None, help="first N images of each class (default: all)")
    parser.add_argument("--max-side", type=int, default=256, help="prepare's --max-side")
    parser.add_argument("--shard-size", type=int, default=1000, help="prepare's --shard-size")
    parser.add_argument("--image-size", type=int, default=64, help="the loader's training image size")
    parser.add_argument("--batch-size", type=int, default=256, help="the loader's batch size")
    parser.add_argument("--workers", type=int, default=2, help="the loader's decoding workers")
    parser.add_argument("--repeats", type=int, default=3, help="first epochs timed with, and without, the check")
    parser.add_argument("--epoch", choices=("with", "without"), help=argparse.SUPPRESS)  # one timed epoch (a child)
    return parser.parse_args(argv)


def _first_per_class(samples: list[tuple[str, int]], count: int) -> list[tuple[str, int]]:
    taken: Counter[int] = Counter()
    kept = []
    for path, label in samples:
        if taken[label] < count:
            kept.append((path, label))
            taken[label] += 1
    return kept


def _prepared(args: argparse.Namespace) -> Path:
    samples, _ = find_samples(args.source)
    if args.per_class is not None:
        samples = _first_per_class(samples, args.per_class)
    settings = PrepareSettings(max_side=args.max_side, shard_size=args.shard_size)
    return prepare_shards(samples, args.workdir / "shards", settings, progress=False).parent


def _seconds_per_gb(action, paths: list[Path]) -> float:
    gigabytes = sum(path.stat().st_size for path in paths) / 1e9
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) / gigabytes


def _read_all(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb") as file:
            while file.read(1 << 20):
                pass


def _epoch(args: argparse.Namespace, folder: Path) -> dict:
    """A child: one first epoch of a fresh loader, the check left to it or done before the clock starts."""
    samples, _ = read_shard_samples(folder)  # both children open the folder once before the clock, alike
    if args.epoch == "without":
        verify_shards(samples)
    start = time.perf_counter()
    loader = build_loader(folder, batch_size=args.batch_size, train=True, image_size=args.image_size, backend="pil",
                          num_workers=args.workers)
    batches = iter(loader)
    images = len(next(batches)[1])
    first_batch = time.perf_counter() - start  # the loader's check, when it has one to do, is all before this
    images += sum(len(labels) for _, labels in batches)
    seconds = time.perf_counter() - start
    loader.close()
    return {"check": args.epoch, "seconds": seconds, "first_batch": first_batch, "images": images}


def _child(args: argparse.Namespace, folder: Path, check: str) -> dict:
    command = [sys.executable, __file__, str(args.source), str(args.workdir), "--epoch", check, "--image-size",
               str(args.image_size), "--batch-size", str(args.batch_size), "--workers", str(args.workers)]
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        sys.exit(f"the timed epoch ({check} the check) failed:\n{finished.stderr}")
    return json.loads(finished.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    folder = args.workdir / "shards"
    if args.epoch is not None:
        print(json.dumps(_epoch(args, folder)))
        return
    folder = _prepared(args)
    samples, _ = read_shard_samples(folder)
    paths = sorted({Path(member.shard) for member, _ in samples})
    total = sum(path.stat().st_size for path in paths)
    print(f"{len(samples)} images in {len(paths)} shards, {total / 1e6:.1f} MB ({folder}); {os.cpu_count()} cores, "
          f"{args.workers} loader workers, image size {args.image_size}, batch {args.batch_size}")
    _read_all(paths)  # into the page cache, for both timings alike
    read = _seconds_per_gb(lambda: _read_all(paths), paths)
    hashed = _seconds_per_gb(lambda: verify_shards(samples), paths)  # this process has checked none yet
    print(f"reading the shards: {read:.3f} s per GB; sha256 of them (verify_shards, {os.cpu_count()} threads): "
          f"{hashed:.3f} s per GB; the check of this dataset: {hashed * total / 1e9:.3f} s")
    runs = {"with": [], "without": []}
    for repeat in range(args.repeats):
        for check in ("with", "without") if repeat % 2 == 0 else ("without", "with"):
            run = _child(args, folder, check)
            runs[check].append(run)
            print(f"first epoch {check} the check: {run['seconds']:.2f} s for {run['images']} images, the first batch "
                  f"after {run['first_batch']:.2f} s", flush=True)
    for key, what in (("first_batch", "to the first batch"), ("seconds", "whole first epoch")):
        with_check, without = (statistics.median(run[key] for run in runs[check]) for check in ("with", "without"))
        pairs = [first[key] - second[key] for first, second in zip(runs["with"], runs["without"])]
        shown = ", ".join(f"{pair:+.2f}" for pair in pairs)
        print(f"median {what}: {with_check:.2f} s with the check, {without:.2f} s without: "
              f"{with_check - without:+.2f} s ({(with_check / without - 1) * 100:+.1f}%); with minus without, run "
              f"next to each other: {shown} s, median {statistics.median(pairs):+.2f} s")


if __name__ == "__main__":
    main()
