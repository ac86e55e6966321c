"""How a process of a multi-process run (under torchrun) ends: at once, once its output is flushed.

Gloo's worker threads free a finished collective's tensors a moment after the collective returns, and freeing
a tensor that Python knew takes the GIL. Where the interpreter has begun to shut down by then, Python ends
that thread in the middle of the C++ call, and the process aborts ("terminate called without an active
exception", exit -6) although its run succeeded; torchrun then reports the job failed and stops the other
ranks, perhaps before rank 0 wrote its summary. Here it hit 9 of 113 runs of two processes on a busy 2-core
CPU, FSDP and DDP alike (``reports/torchrun-exit-abort-20261205/``). Skipping the shutdown, after
flushing what it would have flushed, closes that window; the trainer has already closed its loaders, logs and
process group.

    end_process(main())  # how python -m fastcore_ops.training.train ends
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def end_process(status: int) -> NoReturn:
    """Exit with ``status``: one of several torchrun processes without the interpreter's shutdown (see above)."""
    # torchrun's WORLD_SIZE read here, not through assemble.world_size_from_environment: that module imports torch,
    # and the command imports this before parsing (--help loads no heavy module).
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        sys.exit(status)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)
