"""The training command's parsed line made into one :class:`RunRequest`: everything the run needs, checked before
anything is written.

The checks run in one pass, in this order: ``--import``'s modules (their recipes and models count below), the
names the line gives, the run folder (read when resuming), the configuration (the recipe, or the saved
run's, with the flags and ``--set`` applied) and the run settings, the strategy, the data, and on ``--resume``
that nothing that changes the result differs from the saved run. One of :data:`REFUSALS` (a ValueError,
TypeError, OSError or CheckpointError) says what is wrong.

    >>> from fastcore_ops.training.train import parse_args
    >>> request = checked_request(parse_args(["--recipe", "cifar_mild", "--data", "data/cifar10-jpeg",
    ...                                       "--out", "runs/mild"]))  # doctest: +SKIP
    >>> request.config.name, request.settings.subset  # doctest: +SKIP
    ('cifar_mild', None)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import torch

from fastcore_ops import cli
from fastcore_ops.training.assemble import world_size_from_environment
from fastcore_ops.training.checkpoint import CheckpointError
from fastcore_ops.training.config import TrainConfig, override
from fastcore_ops.training.distributed_support import check_distributed_support
from fastcore_ops.training.models.timm_models import is_timm_name
from fastcore_ops.training.plugins import import_modules
from fastcore_ops.training.recipes import list_recipes, recipe_lineage
from fastcore_ops.training.run_folder import RunSettings, check_run_folder
from fastcore_ops.training.tasks.base import Task
from fastcore_ops.training.tasks.registry import all_tasks, task_named
from fastcore_ops.training.tensorboard_events import tensorboard_missing

# What a user's mistake raises (a setting, a file, the data, a checkpoint): one "error:" line and exit 2.
REFUSALS = (*cli.REFUSALS, CheckpointError)

# The flags that set one configuration field each, and that field; ``--set`` is applied after them, so it wins.
FIELD_FLAGS = (("model", "model.name"), ("epochs", "schedule.epochs"), ("budget", "schedule.scale_schedule_ratio"),
               ("seed", "seed"))


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """A run whose settings, folder, device and data passed every check, ready to train.

    found: what the task's ``check_data`` found in the data, for the trainer to build from.
    checkpoint_every, keep_checkpoints: ``--checkpoint-every``, ``--keep-checkpoints`` (a CheckpointPolicy).
    """

    config: TrainConfig
    settings: RunSettings
    task: type[Task]
    device: torch.device
    data: Path | None
    found: object
    out: Path
    resume: bool
    strategy: str
    checkpoint_every: int | None
    keep_checkpoints: int
    progress: bool
    tensorboard: bool


def command_line_assignments(args: argparse.Namespace) -> list[str]:
    """``--set``'s assignments, after those of the flags that set one field (so ``--set`` wins).

        >>> command_line_assignments(argparse.Namespace(model=None, epochs=2.0, budget=None, seed=None,
        ...                                             assignments=["optimizer.lr=0.4"]))
        ['schedule.epochs=2.0', 'optimizer.lr=0.4']
    """
    flags = [f"{field}={getattr(args, flag)}" for flag, field in FIELD_FLAGS if getattr(args, flag) is not None]
    return [*flags, *args.assignments]


def check_arguments(args: argparse.Namespace) -> None:
    """Import ``--import``'s modules, then refuse an unknown recipe or model and TensorBoard where it is missing
    (the configuration's fields are checked by its validate).

        >>> check_arguments(argparse.Namespace(imports=[], recipe=None, model="timm:resnet18", tensorboard=False))
    """
    import_modules(args.imports)
    if args.recipe is not None:
        cli.check_name("--recipe", args.recipe, list_recipes(), "recipe")
    # A timm name is checked with the configuration, by its task: listing timm's models would import timm.
    if args.model is not None and not is_timm_name(args.model):
        cli.check_name("--model", args.model, [name for task in all_tasks() for name in task.model_names()], "model")
    missing = tensorboard_missing() if args.tensorboard else None
    if missing is not None:
        raise ValueError(f"--tensorboard: {missing}, or leave --tensorboard out")


def checked_request(args: argparse.Namespace) -> RunRequest:
    """The run ``args`` (the training command's line, parsed) asks for, every check passed; a REFUSALS otherwise."""
    assignments = command_line_assignments(args)
    check_arguments(args)
    saved = check_run_folder(args.out, args.data, resume=args.resume)
    if saved is None and args.recipe is None:
        raise ValueError("--recipe is required (or --resume with an --out that holds a run's config.json)")
    settings = RunSettings.requested(args.subset, args.eval_every, saved=saved.settings if saved else None)
    # The recipe's changes and the command line's in one pass, validated once.
    base, lineage = recipe_lineage(args.recipe) if args.recipe is not None else (saved.config, [])
    config = override(base, assignments, lineage)
    if saved is not None:  # the data and the processes are compared below, once the data is checked
        saved.check_same_settings(config, settings)

    task = task_named(config.task)
    check_distributed_support(config, task, args.strategy)
    world_size = world_size_from_environment()
    # Text is tokenized here, once (later runs reuse the prepared tokens), so that a corpus that cannot train
    # fails before any process starts.
    data, found = task.check_data(config, args.data, subset=settings.subset, world_size=world_size,
                                  progress=not args.no_progress)
    settings = dataclasses.replace(settings, world_size=world_size, data=task.data_fingerprint(config, data, found))
    if saved is not None:
        saved.check_same_inputs(settings)
        task.keep_run_files(args.out, data, found, resume=True, write=os.environ.get("RANK", "0") == "0")
    return RunRequest(config=config, settings=settings, task=task, device=torch.device(args.device), data=data,
                      found=found, out=args.out, resume=args.resume, strategy=args.strategy,
                      checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
                      progress=not args.no_progress, tensorboard=args.tensorboard)
