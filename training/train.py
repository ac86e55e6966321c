"""``python -m training.train``: train a recipe on an ImageFolder data set.

    python -m training.train --recipe cifar_mild --data ../shared/datasets/cifar10-jpeg --out runs/mild
    python -m training.train --recipe cifar_mild --data ... --out runs/mild --set optimizer.lr=0.4 --subset 500
    python -m training.train --out runs/mild --data ... --resume          # continue a stopped run
    torchrun --nproc_per_node=2 -m training.train --recipe cifar_mild --data ... --out runs/ddp

Writes ``config.json`` (the effective configuration), ``metrics.jsonl``, ``curves.png``,
``checkpoint.pt`` and ``summary.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from training.assemble import build_trainer, check_distributed_support, init_distributed, split_folders
from training.config import config_hash, from_dict, override, to_dict
from training.recipes import get_recipe, list_recipes
from training.trainer import CHECKPOINT_NAME, TrainingInterrupted

CONFIG_NAME = "config.json"
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def child_environment(**extra: str) -> dict[str, str]:
    """The environment in which to start this command as a child process, at full speed.

    Kernels never go through Triton's interpreter (a test process switches it on, and its times
    would mean nothing), and the project is importable from any working directory.

        >>> child_environment()["FASTCORE_OPS_INTERPRET"]
        '0'
    """
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    python_path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    return {**environment, "FASTCORE_OPS_INTERPRET": "0", "PYTHONPATH": python_path, **extra}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m training.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", help=f"one of: {', '.join(list_recipes())} (not needed with --resume)")
    parser.add_argument("--data", type=Path, required=True, help="folder with train/ and val/ (or test/) ImageFolders")
    parser.add_argument("--out", type=Path, required=True, help="the run's folder (checkpoint, metrics, plot)")
    parser.add_argument("--model", help="override model.name (cifar_resnet20, resnet50, any torchvision classifier)")
    parser.add_argument("--epochs", type=float, help="override schedule.epochs")
    parser.add_argument("--scale-schedule", type=float, help="override schedule.scale_schedule_ratio")
    parser.add_argument("--seed", type=int, help="override seed")
    parser.add_argument("--subset", type=int, help="train on the first N images of each class")
    parser.add_argument("--eval-every", type=int, default=1, metavar="EPOCHS",
                        help="evaluate after every EPOCHS epochs (default 1); 0 evaluates only at the end")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="override any configuration field; repeatable")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (for logs)")
    return parser.parse_args(argv)


def effective_config(args: argparse.Namespace):
    """The recipe with every command-line override applied, or the saved one of a resumed run."""
    saved = args.out / CONFIG_NAME
    if args.resume and saved.is_file() and args.recipe is None:
        return from_dict(json.loads(saved.read_text()))
    if args.recipe is None:
        raise ValueError("--recipe is required (or --resume with an --out that holds a run's config.json)")
    assignments = list(args.assignments)
    for flag, field in (("model", "model.name"), ("epochs", "schedule.epochs"),
                        ("scale_schedule", "schedule.scale_schedule_ratio"), ("seed", "seed")):
        if getattr(args, flag) is not None:
            assignments.insert(0, f"{field}={getattr(args, flag)}")
    config = override(get_recipe(args.recipe), assignments)
    if args.resume and saved.is_file():
        before = from_dict(json.loads(saved.read_text()))
        if config_hash(before) != config_hash(config):
            raise ValueError(f"--resume: the run in {args.out} was made with another configuration; "
                             f"resume it without --recipe/--set, or start a new run with another --out")
    return config


def check_run_folder(args: argparse.Namespace) -> None:
    """Refuse to overwrite a run, and to resume one that is not there."""
    has_checkpoint = (args.out / CHECKPOINT_NAME).is_file()
    if args.resume and not has_checkpoint:
        raise ValueError(f"--resume: no {CHECKPOINT_NAME} in {args.out}; start the run without --resume")
    if not args.resume and has_checkpoint:
        raise ValueError(f"{args.out} already holds a run; pass --resume to continue it or choose another --out")


def check_device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name!r} is not a device name; use cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available here; use --device cpu")
    return device


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        check_run_folder(args)
        config = effective_config(args)
        check_distributed_support(config)
        split_folders(args.data)
        if args.subset is not None and args.subset < 1:
            raise ValueError(f"--subset must be >= 1 (images per class), got {args.subset}")
        if args.eval_every < 0:
            raise ValueError(f"--eval-every must be >= 0 (0 evaluates only at the end), got {args.eval_every}")
        device = check_device(args.device)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    device = init_distributed(device)
    is_main = not dist.is_initialized() or dist.get_rank() == 0
    if is_main:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / CONFIG_NAME).write_text(json.dumps(to_dict(config), indent=2) + "\n")
        print(f"{config.name} ({config_hash(config)}) on {device}, writing to {args.out}")
    trainer = build_trainer(config, data=args.data, out=args.out, device=device, subset=args.subset,
                            progress=not args.no_progress, eval_every=args.eval_every)
    try:
        result = trainer.fit(resume=args.resume)
    except TrainingInterrupted as stop:
        print(stop, file=sys.stderr)
        return 128 + stop.signal_number
    finally:
        trainer.train_loader.close()
        trainer.eval_loader.close()
        if dist.is_initialized():
            dist.destroy_process_group()
    if is_main:
        (args.out / "summary.json").write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n")
        print(f"{config.name}: top-1 {100 * result.top1:.2f}% | train time {result.train_seconds:.1f} s "
              f"(evaluation and checkpoints excluded) | {result.images_per_second:.0f} images/s | "
              f"{result.steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
