"""The measurement of ``python -m benchmarks.step_floor`` (its module says what it measures), imported once its
command line is parsed: ``check`` and ``job`` for :func:`benchmarks.job_cli.job_main`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import torch

from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.training.assemble import scaled
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.precision import Precision
from fastcore_ops.training.tasks.classification import ImageClassification, build_image_classification
from fastcore_ops.training.tasks.registry import task_named

from .timing import time_samples_ms


def steps_at_sizes(loader, total_steps: int) -> Counter:
    """How many of the run's ``total_steps`` train at each image size (one size without progressive resizing)."""
    sizes = Counter()
    for step in range(total_steps):
        epoch, batch = divmod(step, len(loader))
        sizes[loader.image_size_at(epoch, batch) or loader.image_size] += 1
    return sizes


def measure_floor(config: TrainConfig, *, data: Path, device: torch.device, subset: int | None,
                  precision: Precision) -> dict:
    """Forward plus backward of ``config``'s model alone over the run's steps (see the module's text)."""
    config = scaled(config)
    plan = plan_methods(config)
    torch.manual_seed(config.seed)
    model, loader, task = build_image_classification(config, plan, data=data, device=device, subset=subset)
    task.close()
    total_steps = max(1, round(config.schedule.epochs * len(loader)))
    sizes = steps_at_sizes(loader, total_steps)
    loader.close()
    memory_format = torch.channels_last if plan.loader_switches.get("channels_last") else torch.contiguous_format
    model.train()
    fastest, median = {}, {}
    for size in sorted(sizes):
        images = torch.randn(config.data.batch_size, 3, size, size, device=device).contiguous(memory_format=memory_format)
        labels = torch.randint(0, task.num_classes, (config.data.batch_size,), device=device)

        def step():
            with precision.autocast(device):
                loss = task.loss(model(images), labels)
            loss.backward()
            model.zero_grad(set_to_none=True)

        samples = time_samples_ms(step, device, min_samples=5)
        fastest[size], median[size] = min(samples) / 1e3, statistics.median(samples) / 1e3
    return {"train_seconds": sum(fastest[size] * count for size, count in sizes.items()),
            "median_train_seconds": sum(median[size] * count for size, count in sizes.items()), "steps": total_steps,
            "sizes": {str(size): {"steps": sizes[size], "step_seconds": fastest[size],
                                  "median_step_seconds": median[size]} for size in sorted(sizes)}}


def check(config: TrainConfig) -> None:
    """Refuse a recipe that is not image classification."""
    if task_named(config.task) is not ImageClassification:
        raise ValueError(f"recipe {config.name!r} is a {config.task} recipe; the floor is measured for image "
                         f"classification")


def job(args) -> dict:
    """The floor of ``args.config`` (see :mod:`benchmarks.step_floor`)."""
    if args.device.type == "cpu":
        keep_freed_memory()  # as python -m fastcore_ops.training.train trains on a CPU
    return measure_floor(args.config, data=args.data, device=args.device, subset=args.subset,
                         precision=args.precision)
