"""``python -m fastcore_ops.training.torchrun``: torchrun, ending with the exit status of the training command it ran.

    python -m fastcore_ops.training.torchrun --nproc_per_node=2 -m fastcore_ops.training.train --recipe cifar_mild --data ... --out runs/ddp

Takes torchrun's arguments. torchrun itself ends every failure of a process it started with its own
traceback and exit status 1, and a stop signal it received with another traceback and 1: a refused
run (every process exits 2, rank 0 printing the one ``error:`` line) and a stopped one (every
process checkpoints and exits 128 + the signal) then look like crashes to a script or a scheduler.
Here the command exits as ``python -m fastcore_ops.training.train`` does, without the traceback: 2 after a
refusal, 130 or 143 after a stop. Any other failure keeps torchrun's traceback and status. A
command line torchrun cannot parse is refused in one ``error:`` line (exit 2), not with its usage, and
so is one it would fail on with a traceback (a process count that is not a number >= 1, a node
count < 1, a ``-m`` module or a script that does not exist), before any process is started.

Its options are torchrun's own, parsed by torch's parser: ``--help`` alone (before the training
command) prints this and points there, without importing torch; ``torchrun --help`` lists them.
"""

from __future__ import annotations

import functools
import importlib.util
import signal
import sys
from pathlib import Path

from fastcore_ops import cli

PROG = "python -m fastcore_ops.training.torchrun"

# fastcore_ops.training.train's statuses that come with their own message: a refusal, and a stop that checkpointed.
SAID_ALREADY = (2, 128 + signal.SIGINT, 128 + signal.SIGTERM)


def asks_for_help(argv: list[str]) -> bool:
    """Whether ``argv`` asks for this command's help: -h or --help before any word that is not an option (the
    training command, or an option's value: torch's parser then decides).

        >>> asks_for_help(["--nproc_per_node=2", "--help"]), asks_for_help(["-m", "mod", "--help"])
        (True, False)
    """
    for word in argv:
        if word in ("-h", "--help"):
            return True
        if not word.startswith("-"):
            return False
    return False


def short_help() -> str:
    """This command's --help: its usage and description, and where its options (torchrun's) are listed."""
    return (f"usage: {PROG} [torchrun's options] (-m MODULE | SCRIPT) [its arguments]\n\n{cli.description(__doc__)}\n\n"
            f"Its options are torchrun's own: torchrun --help lists them.\n")


def parse_args(argv: list[str] | None):
    """torchrun's arguments; ValueError, not its usage, for a command line it cannot parse."""
    from torch.distributed import run as torchrun

    parser = torchrun.get_args_parser()
    parser.prog = PROG
    parser.error = functools.partial(cli.ArgumentParser.error, parser)
    return parser.parse_args(argv)


# The words torchrun takes for --nproc_per_node besides a number (its determine_local_world_size).
NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")


def check_args(args) -> None:
    """ValueError for parsed arguments that torchrun would fail on with a traceback, before it starts anything."""
    check_nproc_per_node(args.nproc_per_node)
    check_nnodes(args.nnodes)
    if args.max_restarts < 0:
        raise ValueError(f"--max-restarts {args.max_restarts}: must be a whole number >= 0, as in --max-restarts=0")
    if not args.training_script:
        raise ValueError("the training command is empty; name a module with -m, or a script, as in: -m fastcore_ops.training.train")
    if args.module and args.no_python:
        raise ValueError("-m/--module runs a Python module and --no-python an executable: pass one of them")
    if args.module:
        check_module(args.training_script)
    elif not args.no_python and not Path(args.training_script).exists():
        raise ValueError(f"{cli.shown(args.training_script)}: no such script; name a Python file, or a module "
                         f"with -m, as in: -m fastcore_ops.training.train")


def check_nproc_per_node(text: str) -> int:
    """The number of processes per node ``--nproc_per_node text`` starts; ValueError unless it is at least 1.

        >>> check_nproc_per_node("2")
        2
    """
    from torch.distributed import run as torchrun

    fix = f"give a whole number >= 1 or one of {', '.join(NPROC_WORDS)}, as in --nproc_per_node=2"
    try:
        count = torchrun.determine_local_world_size(text)
    except Exception as error:  # a word torchrun does not know, or a device this machine lacks
        reason = str(error).rstrip(".") if text in NPROC_WORDS else "not a number of processes"
        raise ValueError(f"--nproc_per_node {text!r}: {reason}; {fix}") from None
    if count < 1:
        raise ValueError(f"--nproc_per_node {text!r}: starts {count} processes; {fix}")
    return count


def check_nnodes(text: str) -> tuple[int, int]:
    """The least and most nodes ``--nnodes text`` (N or MIN:MAX) allows; ValueError unless 1 <= MIN <= MAX.

        >>> check_nnodes("1:4")
        (1, 4)
    """
    from torch.distributed import run as torchrun

    try:
        low, high = torchrun.parse_min_max_nnodes(text)
    except (ValueError, RuntimeError):
        low = high = 0
    if not 0 < low <= high:
        raise ValueError(f"--nnodes {text!r}: must be a number of nodes >= 1, or MIN:MAX with 1 <= MIN <= MAX; "
                         f"as in --nnodes=1 or --nnodes=1:4")
    return low, high


def check_module(name: str) -> None:
    """ValueError unless ``python -m name`` finds a module to run (found, not imported: importing runs it)."""
    shown = cli.shown(name)
    fix = ("name a module on the Python path (the working directory, PYTHONPATH or an installed package), "
           "as in: -m fastcore_ops.training.train")
    try:
        spec = importlib.util.find_spec(name)
        package = spec is not None and spec.submodule_search_locations is not None
        runnable = not package or importlib.util.find_spec(f"{name}.__main__") is not None  # a package runs __main__
    except Exception as error:  # not a module name, or a parent package missing or raising as it is imported
        raise ValueError(f"-m {shown}: cannot be found ({type(error).__name__}: {error}); {fix}") from None
    if spec is None:
        raise ValueError(f"-m {shown}: no such module; {fix}")
    if not runnable:
        raise ValueError(f"-m {shown}: a package without a __main__ module, which python -m cannot run; {fix}")


def main(argv: list[str] | None = None) -> int:
    if asks_for_help(sys.argv[1:] if argv is None else argv):
        print(short_help(), end="")
        return 0
    from torch.distributed import run as torchrun  # once help is ruled out: torch takes seconds to import
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        args = parse_args(argv)
        check_args(args)
    except ValueError as error:
        return cli.refuse(error)
    try:
        torchrun.run(args)
    except ChildFailedError as failed:
        _, first = failed.get_first_failure()  # torchrun's root cause: the others were stopped after it
        if first.exitcode in SAID_ALREADY:
            return first.exitcode
        raise
    except SignalException as stop:  # torchrun passed it on to every process: a training run checkpoints on it
        return 128 + stop.sigval
    return 0


if __name__ == "__main__":
    sys.exit(main())
