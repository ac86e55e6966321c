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
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from fastcore_ops import cli
from fastcore_ops.training.plugins import add_import_option
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.refusal import refuse

if TYPE_CHECKING:
    from fastcore_ops.training.trainer import FitResult


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
    parser.add_argument("--budget", type=cli.finite_float,
                        help="override schedule.scale_schedule_ratio, the budget: every schedule stretched or shrunk "
                             "by it (a tradeoff's --budgets)")
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
    parser.add_argument("--strategy", default="ddp",
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
    from fastcore_ops.training.request import checked_request
    from fastcore_ops.training.session import train_request

    return train_request(checked_request(args))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = parse_args(argv)
    except cli.REFUSALS as error:
        return refuse(error)
    from fastcore_ops.training.launch import run_command  # torch and the trainer: only once the command line parsed

    return run_command(args)


if __name__ == "__main__":
    from fastcore_ops.training.rank_exit import end_process

    end_process(main())
