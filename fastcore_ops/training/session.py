"""Train a checked :class:`~fastcore_ops.training.request.RunRequest`: join torchrun's process group, build the
trainer, write the run's files, train, and write the summary.

A new run that fails before its first checkpoint removes what it wrote
(:class:`~fastcore_ops.training.run_folder.NewRunFiles`), so the corrected command finds ``--out`` as it was; one
that checkpointed keeps its files, to resume.

    >>> from fastcore_ops.training.request import checked_request
    >>> result = train_request(checked_request(args))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys

import torch.distributed as dist

from fastcore_ops.training.assemble import build_trainer, init_distributed, joined_world_size, lr_scaling_note
from fastcore_ops.training.checkpoint import CHECKPOINT_NAME, CheckpointPolicy
from fastcore_ops.training.config import config_hash
from fastcore_ops.training.request import RunRequest
from fastcore_ops.training.run_folder import RUN_FILES, SUMMARY_NAME, NewRunFiles, write_run
from fastcore_ops.training.tasks.base import metric_phrase
from fastcore_ops.training.trainer import FitResult, TrainingInterrupted


def describe_metric(result: FitResult) -> str:
    """The final metric as one phrase: ``top-1 61.20%`` or ``validation loss (nats/token) 1.234``.

        >>> describe_metric(FitResult(metrics={"top1": 0.612}, metric="top1", higher_is_better=True,
        ...     metric_label="top-1 (%)", steps=1, epochs_seen=1, train_seconds=1.0, first_epoch_seconds=1.0,
        ...     samples_per_second=1.0, sample_unit="images"))
        'top-1 61.20%'
    """
    return metric_phrase(result.metric_label, result.metrics[result.metric])


def skipped_on_every_process(task) -> list[dict]:
    """The input files any process of the run skipped as unreadable (:meth:`Task.skipped_files`), once each."""
    found = task.skipped_files()
    if dist.is_initialized():  # each process read its own share of the data
        shares = [None] * dist.get_world_size()
        dist.all_gather_object(shares, found)
        found = [entry for share in shares for entry in share]
    unique = {entry["file"]: entry for entry in found}
    return [unique[name] for name in sorted(unique)]


def train_request(request: RunRequest) -> FitResult:
    """Train the checked ``request``; TrainingInterrupted when a stop signal checkpointed it."""
    config, settings, out = request.config, request.settings, request.out
    with contextlib.nullcontext() if request.resume else NewRunFiles(out):
        device = init_distributed(request.device)
        is_main = not dist.is_initialized() or dist.get_rank() == 0
        lr_note = lr_scaling_note(config, joined_world_size())
        trainer = build_trainer(config, data=request.data, out=out, device=device, subset=settings.subset,
                                progress=request.progress, eval_every=settings.eval_every,
                                checkpoint_policy=CheckpointPolicy(every_steps=request.checkpoint_every,
                                                                   keep=request.keep_checkpoints),
                                found=request.found, strategy=request.strategy, tensorboard=request.tensorboard)
        try:
            opening = [f"{config.name} ({config_hash(config)}) on {device}, writing to {out}", lr_note,
                       trainer.precision.describe(), *trainer.task.log_lines()]
            if not request.resume:
                request.task.keep_run_files(out, request.data, request.found, resume=False, write=is_main)
            if is_main:
                write_run(out, config, settings)
                print("\n".join(opening))
            result = trainer.fit(resume=request.resume)
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
            (out / SUMMARY_NAME).write_text(json.dumps(summary, indent=2) + "\n")
            compiling = f" | compile time {result.compile_seconds:.1f} s" if config.compile else ""
            print(f"{config.name}: {describe_metric(result)} | train time {result.train_seconds:.1f} s "
                  f"(evaluation, checkpoints and compilation excluded){compiling} | "
                  f"{result.samples_per_second:.0f} {result.sample_unit}/s | {result.steps} steps")
            written = [name for name in (*RUN_FILES, CHECKPOINT_NAME) if (out / name).is_file()]
            if request.tensorboard:
                written.append(f"TensorBoard event files (tensorboard --logdir {out})")
            print(f"in {out}: {', '.join(written)}")
    return result
