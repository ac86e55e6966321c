"""``python -m benchmarks.step_floor``: what a recipe's model alone costs over a whole run, forward plus backward.

The recipe's model as our trainer trains it (its surgeries, patch-whitened stem, memory format,
precision and, on a CPU, its allocator setting) runs forward, loss and backward on batches
already in memory, of every shape the run trains on, as its task makes them (random images at
each image size an image run trains at); each shape's fastest step (of at least five, after a
warm-up: the floor is what a step costs when nothing interrupts it), times the number of steps
the run trains on that shape, summed. No loader, no optimizer step, no methods: a training
run's time over this floor is what everything else costs. The same sum over each shape's median
step is recorded beside it: what an uninterrupted step typically costs.

    python -m benchmarks.step_floor --recipe cifar_mild --data ../shared/datasets/cifar10-jpeg --out runs/floor

Writes ``summary.json`` in ``--out``: ``train_seconds`` (the floor), ``median_train_seconds``,
``steps``, and per shape (``sizes``: an image size) the steps and the seconds of its fastest and its median step.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

from fastcore_ops import cli
from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.training.assemble import scaled
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.precision import Precision
from fastcore_ops.training.tasks.registry import task_named

from .job_cli import job_main, job_parser
from .timing import time_samples_ms


def measure_floor(config: TrainConfig, *, data: Path | None, found: object, device: torch.device,
                  subset: int | None, precision: Precision) -> dict:
    """Forward plus backward of ``config``'s model alone over the run's steps (see the module's text), on the batches
    its task shapes (:meth:`~fastcore_ops.training.tasks.base.Task.floor_batches`); ``data`` and ``found``: what the
    task's ``check_data`` gave."""
    config = scaled(config)
    plan = plan_methods(config)
    torch.manual_seed(config.seed)
    model, batches, task = task_named(config.task).build(config, plan, data=data, device=device, subset=subset,
                                                         found=found)
    task.close()
    total_steps = max(1, round(config.schedule.epochs * len(batches)))
    kinds = task.floor_batches(batches, total_steps, plan, device)
    batches.close()
    model.train()
    fastest, median = {}, {}
    for kind in kinds:
        inputs, targets = kind.make()

        def step():
            with precision.autocast(device):
                loss = task.loss(task.forward(model, inputs), targets)
            loss.backward()
            model.zero_grad(set_to_none=True)

        samples = time_samples_ms(step, device, min_samples=5)
        fastest[kind.label], median[kind.label] = min(samples) / 1e3, statistics.median(samples) / 1e3
    return {"train_seconds": sum(fastest[kind.label] * kind.steps for kind in kinds),
            "median_train_seconds": sum(median[kind.label] * kind.steps for kind in kinds), "steps": total_steps,
            "sizes": {kind.label: {"steps": kind.steps, "step_seconds": fastest[kind.label],
                                   "median_step_seconds": median[kind.label]} for kind in kinds}}


def floor_job(args) -> dict:
    if args.device.type == "cpu":
        keep_freed_memory()  # as python -m fastcore_ops.training.train trains on a CPU
    return measure_floor(args.config, data=args.data, found=args.found, device=args.device, subset=args.subset,
                         precision=args.precision)


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.step_floor``."""
    return job_parser("python -m benchmarks.step_floor", cli.description(__doc__))


def main(argv: list[str] | None = None) -> int:
    return job_main(build_parser(), argv, floor_job)


if __name__ == "__main__":
    sys.exit(main())
