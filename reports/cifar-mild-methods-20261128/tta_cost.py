"""Time a recipe's evaluation with and without test-time augmentation: TTA's inference cost.

    PYTHONPATH=. python reports/cifar-mild-methods-20261128/tta_cost.py ../shared/datasets/cifar10-jpeg \
        > reports/cifar-mild-methods-20261128/tta-cost/tta_cost.csv

Builds the recipe's trainer twice, once as it is and once with ``methods.tta`` set, and times
``Trainer.evaluate`` over the whole evaluation set (decoding, forward passes, counting), the two
alternating for --rounds rounds after one untimed pass each. The weights are the untrained
initial ones: what a pass costs does not depend on them. Prints CSV: evaluation, round, seconds;
then, on stderr, each evaluation's median and TTA's over the plain one.
"""

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import torch

from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.recipes import get_recipe


def timed_evaluation(trainer) -> float:
    """Seconds of one evaluation pass."""
    start = time.perf_counter()
    trainer.evaluate()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a folder with train/ and test/ ImageFolders")
    parser.add_argument("--recipe", default="cifar_mild")
    parser.add_argument("--tta", default="methods.tta={}", help="the --set that turns TTA on (default: the flip)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="a change to the recipe, for both evaluations; repeatable")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes of each evaluation")
    parser.add_argument("--threads", type=int, default=2, help="torch's compute threads, as in the cost pass")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    recipe = override(get_recipe(args.recipe), args.set)
    trainers = {name: build_trainer(config, data=args.data, out=None, device=torch.device("cpu"), progress=False,
                                    eval_every=0)
                for name, config in (("plain", recipe), ("tta", override(recipe, [args.tta])))}
    for trainer in trainers.values():
        trainer.evaluate()  # untimed: kernels built, files in the page cache
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["evaluation", "round", "seconds"])
    seconds = {name: [] for name in trainers}
    for round_number in range(args.rounds):
        for name, trainer in trainers.items():
            elapsed = timed_evaluation(trainer)
            seconds[name].append(elapsed)
            writer.writerow([name, round_number, f"{elapsed:.3f}"])
    sys.stdout.flush()
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"median seconds per pass: plain {medians['plain']:.2f}, with TTA {medians['tta']:.2f}; "
          f"TTA over plain {medians['tta'] / medians['plain']:.2f}x", file=sys.stderr)
    for trainer in trainers.values():
        trainer.train_loader.close()
        trainer.task.close()


if __name__ == "__main__":
    main()
