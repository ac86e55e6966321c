"""Wall time per epoch of a recipe's training loader alone, built as the trainer builds it.

    PYTHONPATH=. python reports/loader-per-image-20261203/measure.py --recipe cifar_record_muon \
        --data ../shared/datasets/cifar10-jpeg --epochs 4

The loader is the one ``fastcore_ops.training.train`` would train on (the recipe's batch size, workers,
crops and augmentations), iterated here with nothing consuming its batches, so an epoch's time is what the
loader costs a run on this machine: the first epoch decodes every image, later ones serve kept crops. Prints
CSV: epoch, seconds, images.
"""

import argparse
import time
from pathlib import Path

import torch

from fastcore_ops.training.assemble import scaled
from fastcore_ops.training.config import override
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tasks.classification import build_image_classification


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="cifar_record_muon", help="a registered recipe (default cifar_record_muon)")
    parser.add_argument("--data", type=Path, required=True, help="a folder with train/ and test/ (or val/)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs timed (default 4)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a change to the recipe, as fastcore_ops.training.train takes it (repeatable)")
    args = parser.parse_args(argv)
    config = scaled(override(get_recipe(args.recipe), args.set))
    _, train, task = build_image_classification(config, plan_methods(config), data=args.data,
                                                device=torch.device("cpu"))
    print("epoch,seconds,images")
    try:
        for epoch in range(args.epochs):
            train.set_epoch(epoch)
            started = time.perf_counter()
            images = sum(len(targets) for _, targets in train)
            print(f"{epoch},{time.perf_counter() - started:.2f},{images}", flush=True)
    finally:
        train.close()
        task.close()


if __name__ == "__main__":
    main()
