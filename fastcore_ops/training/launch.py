"""The training command's work once its command line is parsed: check everything, then train
(:mod:`fastcore_ops.training.train` parses, then imports this and torch with it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import torch
import torch.distributed as dist

from fastcore_ops import cli
from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.training.assemble import (build_trainer, check_distributed_support, init_distributed,
                                            joined_world_size, lr_scaling_note, world_size_from_environment)
from fastcore_ops.training.checkpoint import CHECKPOINT_NAME, CheckpointError, CheckpointPolicy
from fastcore_ops.training.compute_threads import use_threads
from fastcore_ops.training.config import TrainConfig, config_hash, load_config, override, to_dict
from fastcore_ops.training.models.timm_models import is_timm_name
from fastcore_ops.training.plugins import import_modules
from fastcore_ops.training.recipes import get_recipe, list_recipes
from fastcore_ops.training.run_folder import (CONFIG_NAME, RUN_FILES, SUMMARY_NAME, NewRunFiles, RunSettings,
                                              check_out_outside_data, check_resume, check_run_folder, check_same_inputs,
                                              check_settings)
from fastcore_ops.training.tasks.base import metric_phrase
from fastcore_ops.training.tasks.registry import all_tasks, task_named
from fastcore_ops.training.tensorboard_events import tensorboard_missing
from fastcore_ops.training.train import refuse
from fastcore_ops.training.trainer import FitResult, TrainingInterrupted


def _assignments(args: argparse.Namespace) -> list[str]:
    """``--set`` values, after those of the flags that set one field (so ``--set`` wins)."""
    flags = [f"{field}={getattr(args, flag)}" for flag, field in (
        ("model", "model.name"), ("epochs", "schedule.epochs"),
        ("budget", "schedule.scale_schedule_ratio"), ("seed", "seed")) if getattr(args, flag) is not None]
    return [*flags, *args.assignments]


def requested_settings(args: argparse.Namespace, saved: RunSettings | None = None) -> RunSettings:
    """The run settings the command line asks for; a flag left out keeps the saved run's value."""
    base = saved or RunSettings()
    return RunSettings(subset=base.subset if args.subset is None else args.subset,
                       eval_every=base.eval_every if args.eval_every is None else args.eval_every)


def new_run(args: argparse.Namespace) -> tuple[TrainConfig, RunSettings]:
    """The recipe with every command-line override applied, and the run settings."""
    if args.recipe is None:
        raise ValueError("--recipe is required (or --resume with an --out that holds a run's config.json)")
    return override(get_recipe(args.recipe), _assignments(args)), requested_settings(args)


def resumed_run(args: argparse.Namespace) -> tuple[TrainConfig, RunSettings]:
    """The saved run in ``--out``, refusing any change but a longer ``--epochs`` (see fastcore_ops.training.run_folder).

    The data and the number of processes are compared by :func:`checked_start`, once the data is checked.
    """
    saved = load_config(args.out / CONFIG_NAME)
    requested = override(get_recipe(args.recipe) if args.recipe else saved, _assignments(args))
    check_resume(saved, requested, args.out, finished=(args.out / SUMMARY_NAME).is_file())
    saved_settings = RunSettings.load(args.out)
    settings = requested_settings(args, saved_settings)
    check_settings(saved_settings, settings, args.out)
    return requested, settings


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse command-line values out of range and unknown names (the configuration's fields are checked by its
    validate)."""
    if args.recipe is not None:
        cli.check_name("--recipe", args.recipe, list_recipes(), "recipe")
    # A timm name is checked with the configuration, by its task: listing timm's models would import timm.
    if args.model is not None and not is_timm_name(args.model):
        cli.check_name("--model", args.model, [name for task in all_tasks() for name in task.model_names()], "model")
    missing = tensorboard_missing() if args.tensorboard else None
    if missing is not None:
        raise ValueError(f"--tensorboard: {missing}, or leave --tensorboard out")


def check_data(config: TrainConfig, data: Path | None, settings: RunSettings, *,
               progress: bool = True) -> tuple[Path | None, object]:
    """(the data folder the trainer reads, what the task found in it), with the data checked before any work.

    Text is tokenized here, once (later runs reuse the prepared tokens), so that a corpus that
    cannot train fails before any process starts.
    """
    return task_named(config.task).check_data(config, data, subset=settings.subset,
                                              world_size=world_size_from_environment(), progress=progress)


def write_run(out: Path, config: TrainConfig, settings: RunSettings) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_NAME).write_text(json.dumps(to_dict(config), indent=2) + "\n")
    settings.save(out)


def describe_metric(result: FitResult) -> str:
    """The final metric as one phrase: ``top-1 61.20%`` or ``validation loss (nats/token) 1.234``.

        >>> describe_metric(FitResult(metrics={"top1": 0.612}, metric="top1", higher_is_better=True,
        ...     metric_label="top-1 (%)", steps=1, epochs_seen=1, train_seconds=1.0, first_epoch_seconds=1.0,
        ...     samples_per_second=1.0, sample_unit="images"))
        'top-1 61.20%'
    """
    return metric_phrase(result.metric_label, result.metrics[result.metric])


@dataclasses.dataclass
class CheckedRun:
    """A run whose settings, device and data passed every check, ready to start."""

    config: TrainConfig
    settings: RunSettings
    device: torch.device
    data: Path | None
    found: object  # what the task's check_data found in the data, for the trainer to build from


def checked_start(args: argparse.Namespace) -> CheckedRun:
    """Everything the run needs, checked, before anything is written; ValueError, TypeError or OSError otherwise."""
    import_modules(args.imports)
    check_arguments(args)
    check_out_outside_data(args.out, args.data)
    check_run_folder(args.out, args.resume)
    config, settings = resumed_run(args) if args.resume else new_run(args)
    check_distributed_support(config, args.strategy)
    device = torch.device(args.device)
    data, found = check_data(config, args.data, settings, progress=not args.no_progress)
    task = task_named(config.task)
    settings = dataclasses.replace(settings, world_size=world_size_from_environment(),
                                   data=task.data_fingerprint(config, data, found))
    if args.resume:
        check_same_inputs(RunSettings.load(args.out), settings, args.out)
        task.keep_run_files(args.out, data, resume=True, write=os.environ.get("RANK", "0") == "0")
    return CheckedRun(config, settings, device, data, found)


# What a user's mistake raises (a setting, a file, the data, a checkpoint): one "error:" line and exit 2.
REFUSALS = (*cli.REFUSALS, CheckpointError)


def skipped_on_every_process(task) -> list[dict]:
    """The input files any process of the run skipped as unreadable (:meth:`Task.skipped_files`), once each."""
    found = task.skipped_files()
    if dist.is_initialized():  # each process read its own share of the data
        shares = [None] * dist.get_world_size()
        dist.all_gather_object(shares, found)
        found = [entry for share in shares for entry in share]
    unique = {entry["file"]: entry for entry in found}
    return [unique[name] for name in sorted(unique)]


def run_checked(args: argparse.Namespace, run: CheckedRun) -> FitResult:
    """Train the checked run; TrainingInterrupted when a stop signal checkpointed it."""
    config, settings = run.config, run.settings
    device = init_distributed(run.device)
    is_main = not dist.is_initialized() or dist.get_rank() == 0
    trainer = build_trainer(config, data=run.data, out=args.out, device=device, subset=settings.subset,
                            progress=not args.no_progress, eval_every=settings.eval_every,
                            checkpoint_policy=CheckpointPolicy(every_steps=args.checkpoint_every,
                                                               keep=args.keep_checkpoints),
                            found=run.found, strategy=args.strategy, tensorboard=args.tensorboard)
    try:
        if not args.resume:
            task_named(config.task).keep_run_files(args.out, run.data, resume=False, write=is_main)
        if is_main:
            write_run(args.out, config, settings)
            print(f"{config.name} ({config_hash(config)}) on {device}, writing to {args.out}")
            print(lr_scaling_note(config, joined_world_size()))
            print(trainer.precision.describe())
            for line in trainer.task.log_lines():
                print(line)
        result = trainer.fit(resume=args.resume)
        skipped = skipped_on_every_process(trainer.task)
    except TrainingInterrupted as stop:
        if is_main:  # every rank stopped at the same step; one says so
            print(stop, file=sys.stderr)
        raise
    finally:
        trainer.train_loader.close()
        trainer.task.close()
        if dist.is_initialized():
            dist.destroy_process_group()
    if is_main:
        summary = dataclasses.asdict(result) | {"skipped_files": skipped}
        (args.out / SUMMARY_NAME).write_text(json.dumps(summary, indent=2) + "\n")
        compiling = f" | compile time {result.compile_seconds:.1f} s" if config.compile else ""
        print(f"{config.name}: {describe_metric(result)} | train time {result.train_seconds:.1f} s "
              f"(evaluation, checkpoints and compilation excluded){compiling} | "
              f"{result.samples_per_second:.0f} {result.sample_unit}/s | {result.steps} steps")
        written = [name for name in (*RUN_FILES, CHECKPOINT_NAME) if (args.out / name).is_file()]
        if args.tensorboard:
            written.append(f"TensorBoard event files (tensorboard --logdir {args.out})")
        print(f"in {args.out}: {', '.join(written)}")
    return result


def train_checked(args: argparse.Namespace, run: CheckedRun) -> FitResult:
    """:func:`run_checked`, except that a new run that fails before its first checkpoint leaves ``--out`` as it
    was (nothing to resume); one that checkpointed keeps its files, to resume."""
    started = None if args.resume else NewRunFiles(args.out)
    try:
        return run_checked(args, run)
    except BaseException:
        if started is not None:
            started.undo_unless_checkpointed()
        raise


def run_command(args: argparse.Namespace) -> int:
    """Check and train the run ``args`` (the training command's, parsed) asks for; the command's exit status."""
    try:
        run = checked_start(args)
    except REFUSALS as error:
        return refuse(error)
    if run.device.type == "cpu":
        threads = use_threads(args.threads)
        if os.environ.get("RANK", "0") == "0":
            print(threads.describe())
        if not args.return_freed_memory:
            keep_freed_memory()
    try:
        train_checked(args, run)
    except TrainingInterrupted as stop:
        return 128 + stop.signal_number
    except REFUSALS as error:  # found once the run started: a model that cannot run its data, ...
        return refuse(error)
    return 0
