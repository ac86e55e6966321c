"""From a TrainConfig and its data to a ready Trainer: data, model, surgeries, optimizer, methods.

The one place that reads every section of the configuration; ``fastcore_ops.training.train`` (the command)
and ``fastcore_ops.training.tradeoff`` call it. The task's own parts (image folders and classifiers, token
windows and language models) are built by the run's task (:mod:`fastcore_ops.training.tasks`); the rest is
shared here.

Method card: scale_schedule
    What: ``--budget r`` (``schedule.scale_schedule_ratio``) multiplies the run's epochs
        and warmup by r, and every schedule that is a fraction of the run (the cosine,
        progressive resizing, layer freezing, SWA) stretches with it.
    When it helps: measuring a recipe at several budgets: the tradeoff curves are runs at
        r = 0.25, 0.5, 1, 2.
    Cost: r times the recipe's.
    Options: the ratio, > 0 (1 = the recipe as written).

    >>> from fastcore_ops.training.recipes import get_recipe
    >>> trainer = build_trainer(get_recipe("cifar_mild"), data=Path("../shared/datasets/cifar10-jpeg"),
    ...                         out=Path("runs/mild"), device=torch.device("cpu"), subset=500)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch
import torch.distributed as dist

from fastcore_ops.training import parallel
from fastcore_ops.training.checkpoint import CheckpointPolicy
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.registry import active, plan_methods
from fastcore_ops.training.optim import build_optimizer
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.trainer import Trainer


def scaled(config: TrainConfig) -> TrainConfig:
    """``config`` with the scale schedule applied: epochs and warmup stretched by the ratio, ratio 1.

    Every other schedule (progressive resizing, layer freezing, SWA, the cosine) is a fraction of
    the run and stretches with it.

        >>> from fastcore_ops.training.config import override
        >>> scaled(override(TrainConfig(), ["schedule.scale_schedule_ratio=0.5"])).schedule.epochs
        45.0
    """
    ratio = config.schedule.scale_schedule_ratio
    schedule = dataclasses.replace(config.schedule, epochs=config.schedule.epochs * ratio,
                                   warmup_epochs=config.schedule.warmup_epochs * ratio, scale_schedule_ratio=1.0)
    return dataclasses.replace(config, schedule=schedule)


def effective_lr(config: TrainConfig, world_size: int) -> float:
    """``optimizer.lr`` scaled linearly from ``optimizer.reference_batch`` to the run's global batch.

    The global batch is ``data.batch_size`` on each of ``world_size`` processes (the linear
    scaling rule of Goyal et al., 2017), so a recipe keeps its LR per image at any world size.

        >>> from fastcore_ops.training.config import override
        >>> config = override(TrainConfig(), ["optimizer.lr=2.048", "optimizer.reference_batch=2048"])
        >>> effective_lr(config, world_size=1), effective_lr(config, world_size=8)  # batch 256 each
        (0.256, 2.048)
    """
    return config.optimizer.lr * config.data.batch_size * world_size / config.optimizer.reference_batch


def lr_scaling_note(config: TrainConfig, world_size: int) -> str:
    """One line saying which LR the run uses and how it follows from the recipe's.

        >>> print(lr_scaling_note(TrainConfig(), world_size=2))
        lr 0.2 = 0.1 x 512 / 256 (linear scaling to the global batch, 2 x 256)
    """
    optimizer, batch = config.optimizer, config.data.batch_size
    return (f"lr {effective_lr(config, world_size):g} = {optimizer.lr:g} x {batch * world_size} / "
            f"{optimizer.reference_batch} (linear scaling to the global batch, {world_size} x {batch})")


def world_size_from_environment() -> int:
    """The number of processes torchrun started (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def joined_world_size() -> int:
    """The number of processes in the process group this one joined (1 when it joined none).

        >>> joined_world_size()
        1
    """
    return dist.get_world_size() if dist.is_initialized() else 1


def init_distributed(device: torch.device) -> torch.device:
    """Join the process group torchrun describes in the environment (if any); this process's device."""
    if world_size_from_environment() <= 1 or dist.is_initialized():
        return device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def build_trainer(config: TrainConfig, *, data: Path, out: Path | None, device: torch.device,
                  subset: int | None = None, progress: bool = True, eval_every: int = 1,
                  checkpoint_policy: CheckpointPolicy = CheckpointPolicy(), found=None,
                  strategy: str = "ddp", tensorboard: bool = False) -> Trainer:
    """A Trainer for ``config`` (scale schedule applied here) on ``data``.

    data: the folder the task's ``check_data`` returns: for image classification a folder with train/
    and val/ (or test/); for a language model a prepared token folder. subset (``--subset``), found
    (what ``check_data`` found in it): see :meth:`fastcore_ops.training.tasks.base.Task.build`.
    eval_every, checkpoint_policy, tensorboard: see Trainer. strategy: "ddp" or "fsdp" under torchrun.
    """
    config = scaled(config)
    optimizer_config = dataclasses.replace(config.optimizer, lr=effective_lr(config, joined_world_size()))
    plan = plan_methods(config)  # what the methods ask of the run, decided before anything is built from the data
    torch.manual_seed(config.seed)  # the same initial weights for every rank and every rerun
    model, train, task = task_named(config.task).build(config, plan, data=data, device=device, subset=subset,
                                                       found=found, strategy=strategy)
    # Sharding first: FSDP2 swaps the parameters for sharded ones, which the optimizer must hold.
    forward_module = parallel.wrap(model, strategy, device, find_unused_parameters=plan.leaves_parameters_unused)
    if config.compile:
        forward_module = torch.compile(forward_module)
    optimizer = build_optimizer(model, optimizer_config, [options for _, options in active(config.methods, "optimizer")])
    steps_per_epoch = len(train)
    return Trainer(
        model=model, optimizer=optimizer, forward_module=forward_module, task=task, train_loader=train,
        total_steps=max(1, round(config.schedule.epochs * steps_per_epoch)),
        warmup_steps=round(config.schedule.warmup_epochs * steps_per_epoch),
        final_lr_fraction=config.schedule.final_lr_fraction,
        warmup_start_fraction=config.schedule.warmup_start_fraction, lr_decay=config.schedule.lr_decay,
        methods=plan.hooks,
        precision=config.precision, device=device, out=out, progress=progress, eval_every=eval_every,
        grad_clip_norm=config.optimizer.grad_clip_norm, checkpoint_policy=checkpoint_policy, compiled=config.compile,
        tensorboard=tensorboard)
