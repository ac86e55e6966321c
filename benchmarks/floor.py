"""The measurement of ``python -m benchmarks.step_floor`` (its module says what it measures), imported once its
command line is parsed: ``check`` and ``job`` for :func:`benchmarks.job_cli.job_command`.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.training.assemble import scaled
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.patch_whitening import find_stem
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.precision import Precision
from fastcore_ops.training.tasks.registry import task_named

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
        if kind.frozen_stem:  # as stem_freezing leaves it: no gradient flows into the stem
            freeze_stem(model)

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


def freeze_stem(model: torch.nn.Module) -> None:
    """Take the gradient off the stem's parameters, as ``stem_freezing`` does. The task gives the kinds with a
    frozen stem last, as a run trains them, so the stem stays frozen for the rest of the floor."""
    find_stem(model, "stem_freezing").requires_grad_(False)


def check(config: TrainConfig) -> None:
    """Any task's recipe has a floor: its task makes the batches (:meth:`~fastcore_ops.training.tasks.base.Task.floor_batches`)."""


def job(args) -> dict:
    """The floor of ``args.config`` (see :mod:`benchmarks.step_floor`)."""
    if args.device.type == "cpu":
        keep_freed_memory()  # as python -m fastcore_ops.training.train trains on a CPU
    return measure_floor(args.config, data=args.data, found=args.found, device=args.device, subset=args.subset,
                         precision=args.precision)
