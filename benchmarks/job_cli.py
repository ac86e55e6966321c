"""The command line of the jobs ``benchmarks.peers`` starts (``composer_job``, ``step_floor``): one recipe on
its data, a summary.json in a new folder.

    >>> parser = job_parser("python -m benchmarks.step_floor", "The floor.")
    >>> sorted(action.dest for action in parser._actions if action.dest != "help")
    ['assignments', 'data', 'device', 'imports', 'out', 'recipe', 'subset']
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.training.plugins import add_import_option, import_modules
from fastcore_ops.training.recipes import list_recipes

# Where the composer job's training images come from: torchvision's DataLoader, or our loader.
LOADERS = ("torchvision", "ours")


def installed_in(package: str):
    """An argparse type: a folder holding ``package`` (a peer that ``make peers`` installs there).

        >>> installed_in("composer")("/nowhere")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: /nowhere holds no composer package; install it there with `make peers`
    """
    def folder(text: str) -> Path:
        if not (Path(text) / package / "__init__.py").is_file():
            raise argparse.ArgumentTypeError(f"{text} holds no {package} package; install it there with `make peers`")
        return Path(text)

    return folder


def job_parser(prog: str, description: str) -> cli.ArgumentParser:
    """A parser with the arguments every job takes; a job adds its own."""
    parser = cli.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--recipe", required=True, help="a recipe")
    parser.add_argument("--data", type=Path,
                        help="the recipe's data; image classification: a folder with train/ and val/ (or test/)")
    parser.add_argument("--out", type=Path, required=True, help="an empty or new folder for summary.json")
    parser.add_argument("--subset", type=cli.positive_int, help="train on the first N images of each class")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override; repeatable")
    cli.add_device_option(parser)
    add_import_option(parser)
    return parser


def job_command(build_parser: Callable[[], cli.ArgumentParser], work: str) -> Callable[[list[str] | None], int]:
    """The ``main(argv)`` of a job whose parser ``build_parser`` makes and whose work is the module ``work``.

    Once parsed, the recipe with its overrides becomes ``args.config``, refused unless the module's
    ``check(config)`` passes it, and its data is checked by its task (as ``args.data`` and
    ``args.found``); then the module's ``job(args)`` runs it, and what that returns is written as
    ``--out``/summary.json. Exit 2 with one ``error:`` line on bad input.

        >>> main = job_command(lambda: job_parser("python -m benchmarks.step_floor", "The floor."), "benchmarks.floor")
        >>> main(["--recipe", "cifar_mild"])  # stderr: error: the following arguments are required: --out; ...
        2
    """

    def check(args: argparse.Namespace) -> None:
        import torch  # the job's machinery, torch with it: once the command line parsed

        from fastcore_ops.training.config import override
        from fastcore_ops.training.recipes import get_recipe
        from fastcore_ops.training.tasks.registry import task_named

        import_modules(args.imports)
        args.device = torch.device(args.device)
        recipe = get_recipe(cli.check_name("--recipe", args.recipe, list_recipes(), "recipe"))
        args.config = override(recipe, args.assignments)
        importlib.import_module(work).check(args.config)
        args.data, args.found = task_named(args.config.task).check_data(args.config, args.data, subset=args.subset,
                                                                        world_size=1, progress=False)
        if args.out.exists() and any(args.out.iterdir()):
            raise ValueError(f"--out {args.out} is not empty; give a new folder")

    @cli.command(build_parser, check)
    def main(args: argparse.Namespace) -> None:
        from fastcore_ops.training.precision import choose_precision

        # The precision every job of the comparison computes in, and why, chosen once (fastcore_ops.training.precision).
        args.precision = choose_precision(args.config.precision, args.device)
        print(args.precision.describe(), flush=True)
        summary = importlib.import_module(work).job(args) | {"precision": args.precision.describe()}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2))

    return main
