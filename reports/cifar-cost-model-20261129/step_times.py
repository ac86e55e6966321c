"""Train one run with ``python -m fastcore_ops.training.train``, keeping every step's seconds: what the cost pass models.

    PYTHONPATH=. python reports/cifar-cost-model-20261129/step_times.py --recipe cifar_mild --budget 0.25 \
        --seed 5 --data ../shared/datasets/cifar10-jpeg --out RUN --no-progress --eval-every 0 --threads 2

Takes ``python -m fastcore_ops.training.train``'s arguments. Besides the run's own files, writes into ``--out``
``steps.json`` (``[[step, seconds], ...]``: each step's seconds as ``train_seconds`` counts them)
and ``machine.txt`` (the label a tradeoff sweep gives its runs), so that ``collect.py`` can turn
the folder into a sweep's run and ``by_epoch.py`` can set each epoch beside its model.
"""

import argparse
import json
import sys
from pathlib import Path

import fastcore_ops.training.trainer
from fastcore_ops.training.tradeoff.machine import MACHINE_FILE, machine_label
from fastcore_ops.training.train import main as train_main

STEPS_JSON = "steps.json"


def recording(next_step, steps: list):
    """``Trainer.next_step`` that also appends (step, seconds) to ``steps``."""
    def next_step_recorded(trainer, batches):
        step = trainer.state.step
        elapsed = next_step(trainer, batches)
        if elapsed is not None:
            steps.append((step, elapsed))
        return elapsed
    return next_step_recorded


def main(argv: list[str]) -> int:
    """``python -m fastcore_ops.training.train``'s exit status; on success, its --out also holds steps.json and machine.txt."""
    steps: list = []
    original = fastcore_ops.training.trainer.Trainer.next_step
    fastcore_ops.training.trainer.Trainer.next_step = recording(original, steps)
    try:
        code = train_main(argv)
    finally:
        fastcore_ops.training.trainer.Trainer.next_step = original
    if code == 0:  # fastcore_ops.training.train checked the arguments: --out is there
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        parser.add_argument("--out", type=Path)
        out = parser.parse_known_args(argv)[0].out
        (out / STEPS_JSON).write_text(json.dumps([[step, round(seconds, 6)] for step, seconds in steps]) + "\n")
        (out / MACHINE_FILE).write_text(machine_label("cpu") + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
