"""``python -m training.torchrun``: torchrun, ending with the exit status of the training command it ran.

    python -m training.torchrun --nproc_per_node=2 -m training.train --recipe cifar_mild --data ... --out runs/ddp

Takes torchrun's arguments. torchrun itself ends every failure of a process it started with its own
traceback and exit status 1, and a stop signal it received with another traceback and 1: a refused
run (every process exits 2, rank 0 printing the one ``error:`` line) and a stopped one (every
process checkpoints and exits 128 + the signal) then look like crashes to a script or a scheduler.
Here the command exits as ``python -m training.train`` does, without the traceback: 2 after a
refusal, 130 or 143 after a stop. Any other failure keeps torchrun's traceback and status. A
command line torchrun cannot parse is refused in one ``error:`` line (exit 2), not with its usage.
"""

from __future__ import annotations

import functools
import signal
import sys

from torch.distributed import run as torchrun
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

from fastcore_ops import cli

# training.train's statuses that come with their own message: a refusal, and a stop that checkpointed.
SAID_ALREADY = (2, 128 + signal.SIGINT, 128 + signal.SIGTERM)


def parse_args(argv: list[str] | None):
    """torchrun's arguments; ValueError, not its usage, for a command line it cannot parse."""
    parser = torchrun.get_args_parser()
    parser.prog = "python -m training.torchrun"
    parser.error = functools.partial(cli.ArgumentParser.error, parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
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
