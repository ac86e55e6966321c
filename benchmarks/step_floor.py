"""``python -m benchmarks.step_floor``: what a recipe's model alone costs over a whole run, forward plus backward.

The recipe's model as our trainer trains it (its surgeries, patch-whitened stem, memory format,
precision and, on a CPU, its allocator setting) runs forward, loss and backward on batches
already in memory, of every shape the run trains on, as its task makes them (random images at
each image size an image run trains at); each shape's fastest step (of at least five, after a
warm-up: the floor is what a step costs when nothing interrupts it), times the number of steps
the run trains on that shape, summed; the steps after ``stem_freezing`` froze the stem are timed
with it frozen, as the run trains them. No loader, no optimizer step, no other method: a training
run's time over this floor is what everything else costs. The same sum over each shape's median
step is recorded beside it: what an uninterrupted step typically costs.

    python -m benchmarks.step_floor --recipe cifar_mild --data ../shared/datasets/cifar10-jpeg --out runs/floor

Writes ``summary.json`` in ``--out``: ``train_seconds`` (the floor), ``median_train_seconds``,
``steps``, and per shape (``sizes``: an image size, "32, stem frozen" for the steps with the stem frozen) the steps
and the seconds of its fastest and its median step.
"""

from __future__ import annotations

import sys

from fastcore_ops import cli

from .job_cli import job_command, job_parser


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.step_floor``."""
    return job_parser("python -m benchmarks.step_floor", cli.description(__doc__))


main = job_command(build_parser, "benchmarks.floor")


if __name__ == "__main__":
    sys.exit(main())
