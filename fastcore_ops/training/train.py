"""``python -m fastcore_ops.training.train``: train a recipe: an image classifier or a language model.

    python -m fastcore_ops.training.train --recipe cifar_mild --data ../shared/datasets/cifar10-jpeg --out runs/mild
    python -m fastcore_ops.training.train --recipe cifar_mild_small --data ... --out runs/mild --set optimizer.lr=0.4 --subset 500
    python -m fastcore_ops.training.train --out runs/mild --data ... --resume          # continue a stopped run
    torchrun --nproc_per_node=2 -m fastcore_ops.training.train --recipe cifar_mild --data ... --out runs/ddp
    python -m fastcore_ops.training.torchrun --nproc_per_node=2 -m fastcore_ops.training.train ...  # torchrun, exiting as this command does
    python -m fastcore_ops.training.train --recipe gpt_alibi --out runs/gpt            # text: Python's own source
    python -m fastcore_ops.training.train --recipe gpt_alibi --data my_texts/ --out runs/gpt --set text.tokenizer=bpe
    python -m fastcore_ops.training.train --import my_package.my_task --recipe my_recipe --out runs/mine  # your own task

Writes ``config.json`` (the effective configuration), ``run.json`` (``--subset``, ``--eval-every``),
``metrics.jsonl``, ``curves.png``, ``checkpoint.pt`` (and the previous ones, ``checkpoint.1.pt``, ...)
and ``summary.json`` (the result, and in ``skipped_files`` each input file left out as unreadable, relative to
``--data``, with the reason) to ``--out``. Invalid settings, data or models exit with status 2 and one
``error: ...`` line, leaving ``--out`` as it was: everything is checked before anything is
written, and a new run that fails before its first checkpoint removes what it wrote.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

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
from fastcore_ops.training.parallel import STRATEGIES
from fastcore_ops.training.plugins import add_import_option, import_modules
from fastcore_ops.training.recipes import get_recipe, list_recipes
from fastcore_ops.training.run_folder import (CONFIG_NAME, RUN_FILES, SUMMARY_NAME, NewRunFiles, RunSettings,
                                              check_out_outside_data, check_resume, check_run_folder, check_same_inputs,
                                              check_settings)
from fastcore_ops.training.tasks.base import metric_phrase
from fastcore_ops.training.tasks.registry import all_tasks, task_named
from fastcore_ops.training.tensorboard_events import tensorboard_missing
from fastcore_ops.training.trainer import FitResult, TrainingInterrupted


def child_environment(**extra: str) -> dict[str, str]:
    """The environment in which to start this command as a child process, at full speed.

    Kernels never go through Triton's interpreter (a test process switches it on, and its times
    would mean nothing). The child finds ``fastcore_ops`` as its parent did: installed, from the
    working directory (the repository's root) or from the PYTHONPATH it inherits.

        >>> child_environment()["FASTCORE_OPS_INTERPRET"]
        '0'
    """
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    return {**environment, "FASTCORE_OPS_INTERPRET": "0", **extra}


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.train``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.train", description=cli.description(__doc__))
    parser.add_argument("--recipe", help=f"one of: {', '.join(list_recipes())} (not needed with --resume)")
    parser.add_argument("--data", type=Path,
                        help="images: a folder with train/ and val/ (or test/) ImageFolders; text: a folder of text "
                             "files or one prepared by python -m fastcore_ops.training.text.prepare (default: the Python standard "
                             "library's source)")
    parser.add_argument("--out", type=Path, required=True, help="the run's folder (checkpoint, metrics, plot)")
    parser.add_argument("--model", help="override model.name (cifar_resnet20, resnet50, any torchvision classifier, "
                                         "timm:resnet18 or any timm model, gpt, ...)")
    parser.add_argument("--epochs", type=cli.finite_float, help="override schedule.epochs")
    parser.add_argument("--scale-schedule", type=cli.finite_float, help="override schedule.scale_schedule_ratio")
    parser.add_argument("--seed", type=int, help="override seed")
    parser.add_argument("--subset", type=cli.positive_int, help="train on the first N images of each class; evaluation still "
                                                   "reads every image of val/ (or test/)")
    parser.add_argument("--eval-every", type=cli.non_negative_int, metavar="EPOCHS",
                        help="evaluate after every EPOCHS epochs (default: 1, or the resumed run's); 0 evaluates "
                             "only at the end")
    parser.add_argument("--checkpoint-every", type=cli.positive_int, metavar="STEPS",
                        help="checkpoint every STEPS steps within an epoch (default: every 10 minutes of training); "
                             "every epoch's end is always checkpointed")
    parser.add_argument("--keep-checkpoints", type=cli.positive_int, default=2, metavar="K",
                        help="keep the K newest checkpoints; a resume falls back to an older one, with a warning, "
                             "when the newest is damaged")
    cli.add_device_option(parser)
    parser.add_argument("--strategy", choices=STRATEGIES, default="ddp",
                        help="with torchrun: ddp replicates the model on every process; fsdp (FSDP2) shards a "
                             "language model's parameters, gradients and optimizer state between them")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="override any configuration field; repeatable")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its last checkpoint; every setting must match the "
                             "saved run's, except a longer --epochs, which extends an unfinished run (from the resumed "
                             "step on, the LR follows the cosine of the new length)")
    cli.add_no_progress_option(parser)
    add_import_option(parser)
    parser.add_argument("--tensorboard", action="store_true",
                        help="also write each evaluation (losses, metrics, LR, samples per second, phase times) as "
                             "TensorBoard event files in --out, beside metrics.jsonl (needs the tensorboard package)")
    parser.add_argument("--threads", type=cli.positive_int,
                        help="on a CPU, PyTorch's threads (default: OMP_NUM_THREADS where set, else one per core "
                             "that other work left idle at start; see fastcore_ops/training/compute_threads.py)")
    parser.add_argument("--return-freed-memory", action="store_true",
                        help="on a CPU, let the C library give freed memory back to the system between steps: "
                             "less resident memory, slower steps (by default it is kept for reuse; see "
                             "fastcore_ops/host_memory.py)")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _assignments(args: argparse.Namespace) -> list[str]:
    """``--set`` values, after those of the flags that set one field (so ``--set`` wins)."""
    flags = [f"{field}={getattr(args, flag)}" for flag, field in (
        ("model", "model.name"), ("epochs", "schedule.epochs"),
        ("scale_schedule", "schedule.scale_schedule_ratio"), ("seed", "seed")) if getattr(args, flag) is not None]
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


# How long a rank other than 0 that refuses waits for torchrun to end it (below): torchrun ends it as soon as
# rank 0 has said why and exited, so this is only a guard, long enough for a slow rank 0 on a busy machine.
RANK_0_GRACE_SECONDS = 120.0


def refuse(error: BaseException) -> int:
    """Refuse the run (exit 2), saying why once: every torchrun rank refuses alike, and rank 0 says so.

    torchrun ends every other rank as soon as one exits with an error: a rank other than 0 that
    exited at once could have rank 0 ended before it printed the line. So under torchrun such a rank
    waits (up to RANK_0_GRACE_SECONDS) for torchrun to end it, which it does once rank 0 has exited.
    """
    if os.environ.get("RANK", "0") == "0":
        return cli.refuse(error)
    if "TORCHELASTIC_RUN_ID" in os.environ:
        for number in (signal.SIGTERM, signal.SIGINT):  # torchrun ends ranks with SIGTERM, or the signal it got
            signal.signal(number, _exit_refused)
        time.sleep(RANK_0_GRACE_SECONDS)
    return 2


def _exit_refused(number, frame):
    raise SystemExit(2)


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


def fit(recipe: str | None, *, out: str | os.PathLike, data: str | os.PathLike | None = None,
        overrides: Mapping[str, object] | None = None, subset: int | None = None, eval_every: int | None = None,
        device: str = "cpu", resume: bool = False, progress: bool = True) -> FitResult:
    """Train ``recipe`` from Python (a script, a notebook) as ``python -m fastcore_ops.training.train`` does:
    the same checks before anything is written, the same run folder ``out``. ``overrides`` are ``--set``'s
    assignments; settings, data or a folder the command would refuse raise ValueError (or OSError, TypeError)
    and leave ``out`` as it was; a stop signal raises TrainingInterrupted once the run is checkpointed, and
    ``fit(None, out=out, data=data, resume=True)`` continues it. Unlike the command, it leaves PyTorch's
    thread count and the C library's memory settings to you.

        from fastcore_ops.training import fit
        result = fit("cifar_mild_small", data="data/cifar10-jpeg", out="runs/mild", subset=500,
                     overrides={"optimizer.lr": 0.4})
        print(result.metrics["top1"], result.train_seconds)  # what summary.json in runs/mild holds
    """
    argv = ["--out", os.fspath(out), "--device", device]
    for flag, value in (("--recipe", recipe), ("--data", data), ("--subset", subset), ("--eval-every", eval_every)):
        if value is not None:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    argv += [f"--set={field}={value}" for field, value in (overrides or {}).items()]
    argv += ["--resume"] * resume + ["--no-progress"] * (not progress)
    args = parse_args(argv)
    return train_checked(args, checked_start(args))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
