"""The training command's work once its command line is parsed, in three stages: check everything
(:mod:`fastcore_ops.training.request`), set a CPU's threads and memory up, then train
(:mod:`fastcore_ops.training.session`). :mod:`fastcore_ops.training.train` parses, then imports this and torch
with it.

    run_command(parse_args(["--recipe", "cifar_mild", "--data", "data/cifar10-jpeg", "--out", "runs/mild"]))  # 0
"""

from __future__ import annotations

import argparse
import os

from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.training.compute_threads import use_threads
from fastcore_ops.training.refusal import refuse, refuse_in_training
from fastcore_ops.training.request import REFUSALS, checked_request
from fastcore_ops.training.session import train_request
from fastcore_ops.training.trainer import TrainingInterrupted


def run_command(args: argparse.Namespace) -> int:
    """Check and train the run ``args`` (the training command's, parsed) asks for; the command's exit status."""
    try:
        request = checked_request(args)
    except REFUSALS as error:
        return refuse(error)
    if request.device.type == "cpu":
        threads = use_threads(args.threads)
        if os.environ.get("RANK", "0") == "0":
            print(threads.describe())
        if not args.return_freed_memory:
            keep_freed_memory()
    try:
        train_request(request)
    except TrainingInterrupted as stop:
        return 128 + stop.signal_number
    except REFUSALS as error:  # found once the run started: a model that cannot run its data, ...
        return refuse_in_training(error)
    return 0
