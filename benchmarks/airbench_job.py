"""One training run of airbench94 (airbench 0.1.8, Keller Jordan's CIFAR-10 speed record) on a CPU, for
``benchmarks.peers``.

airbench's own ``train94`` runs as its users call it: its network, hyperparameters (batch 1024,
9.9 epochs), optimizer, schedules, lookahead, whitening, loader with its augmentation and
evaluation with TTA, and the table it prints. Its code is tied to CUDA in a few places; a small
adapter of ours (``benchmarks.airbench_run``) stands in there. What differs from airbench's run
on a GPU, each written in full in ``airbench_run.DEVIATIONS`` and in summary.json:

- device: everything on the CPU;
- precision: fp32 weights (initialised in fp16 as airbench's), the forward under the autocast
  ``fastcore_ops.training.precision`` chooses (bf16 where the CPU has bf16 units, else fp32);
- images: CIFAR-10 from our JPEG folder (quality 75, so a little below the published 94.0%);
- image order: the training images with classes interleaved, so the whitening fits on all classes;
- image precision: the images in fp32 after airbench's own fp16 scaling;
- timer: CUDA's events and synchronize stood in by a wall clock;
- seed: torch's global seed set from ``--seed``.

airbench lives in ``.peers/`` with Composer (``make peers``), appended to ``sys.path`` after this
environment's packages. ``--epochs`` and ``--batch-size`` replace airbench's own only for short tests.

Writes ``summary.json`` in ``--out``: ``metrics`` (``top1`` without TTA, ``top1_tta`` with
airbench's TTA), ``train_seconds`` (what airbench times for the whitening and the epochs; not the
evaluation without TTA after each epoch, which it prints but does not time),
``tta_seconds`` (its timed evaluation with TTA), ``airbench_seconds`` (their sum, the time airbench
reports), ``read_seconds`` (our adapter reading and decoding the images before airbench's clock starts,
as airbench loads its own; ``train_read_seconds`` the training images' part), ``steps``, ``epochs``, ``batch_size``, ``seed``, ``precision`` and ``deviations``.

    python -m benchmarks.airbench_job --data ../shared/datasets/cifar10-jpeg --peers .peers --seed 3 \\
        --out runs/airbench-3

The comparison in one sitting, airbench against our recipe on held-out seeds 3, 4 and 5 (an hour
per airbench run on 2 AVX2 cores):

    python -m benchmarks.peers --peer airbench --recipe cifar_mild --pairs 3 \\
        --data ../shared/datasets/cifar10-jpeg --out runs/peers-airbench
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.training.tradeoff.options import FIRST_UNSEARCHED_SEED

from .job_cli import installed_in


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.airbench_job``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.airbench_job", description=cli.description(__doc__))
    parser.add_argument("--data", type=Path, required=True, help="a folder with train/ and val/ (or test/)")
    parser.add_argument("--peers", type=installed_in("airbench"), required=True,
                        help="the folder airbench is installed in (make peers)")
    parser.add_argument("--out", type=Path, required=True, help="an empty or new folder for summary.json")
    parser.add_argument("--seed", type=cli.non_negative_int, default=FIRST_UNSEARCHED_SEED,
                        help="torch's seed: the weights, the shuffles and the augmentation")
    parser.add_argument("--subset", type=cli.positive_int, help="train on the first N images of each class")
    parser.add_argument("--precision", default="amp",
                        help="chosen as a recipe's is: amp is bf16 where the CPU has bf16 units, else fp32")
    parser.add_argument("--epochs", type=cli.positive_float, help="instead of airbench's 9.9, for a short test")
    parser.add_argument("--batch-size", type=cli.positive_int, help="instead of airbench's 1024, for a short test")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """airbench found, and the images read and checked (``args.splits``) before anything is written."""
    sys.path.append(str(args.peers.resolve()))  # after this environment's packages: ours win where both have one
    from . import airbench_run  # torch with it: once the command line parsed

    args.splits = airbench_run.prepare(args)


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> None:
    from . import airbench_run

    summary = airbench_run.job(args, args.splits)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    sys.exit(main())
