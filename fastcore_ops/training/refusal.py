"""How the training command refuses a run under torchrun: before training every rank refuses alike, and rank 0
says why once; what training finds, each rank that finds it says.

    >>> refuse(ValueError("--epochs must be > 0, got -1"))  # "error: --epochs must be > 0, got -1" on stderr
    2
"""

from __future__ import annotations

import os
import signal
import sys
import time

from fastcore_ops import cli

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


def refuse_in_training(error: BaseException) -> int:
    """Refuse a run for what its training found (a model that cannot take its data, a file it cannot read): exit 2.

    One rank may find it alone (in its own shard of the data), so each rank that finds it says so at once, naming
    itself where it is not rank 0. Waiting silently for rank 0, as :func:`refuse` does, would leave the other ranks
    in their next collective until this one exited, and then only their lost connection would show.

        >>> refuse_in_training(OSError("cannot read data/train/0001.jpg"))  # "error: cannot read ..." on stderr
        2
    """
    rank = os.environ.get("RANK", "0")
    if rank == "0":
        return cli.refuse(error)
    print(f"error: rank {rank}: {cli.error_line(error).removeprefix('error: ')}", file=sys.stderr)
    return 2
