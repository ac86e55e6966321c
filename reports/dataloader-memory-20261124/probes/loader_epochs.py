"""Epochs of the pil loader over an image folder, to be timed whole from outside.

    python reports/dataloader-memory-20261124/probes/loader_epochs.py ../shared/datasets/imagenet-sample --epochs 12

Prints the images delivered; to stderr, which fastcore_ops it imported and the CPU time and page
faults of the main process and of its workers. Point PYTHONPATH at a git worktree to time another
commit.
"""

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import fastcore_ops
from fastcore_ops.data import build_loader
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="an ImageFolder tree")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--randaugment", action="store_true", help="RandAugment depth 1 in the batch stage")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=176, help="training image size")
    parser.add_argument("--workers", type=int, default=2, help="decoding workers")
    args = parser.parse_args(argv)
    print(fastcore_ops.__file__, file=sys.stderr)
    loader = build_loader(args.data, train=True, backend="pil", num_workers=args.workers, seed=0,
                          batch_size=args.batch_size, image_size=args.size, device="cpu",
                          randaugment=RandAugmentOptions(depth=1) if args.randaugment else None)
    images = 0
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        for _, labels in loader:
            images += len(labels)
    print(images)
    loader.close()
    del loader
    gc.collect()
    time.sleep(0.5)
    main_usage, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"main user {main_usage.ru_utime:.2f} sys {main_usage.ru_stime:.2f} minflt {main_usage.ru_minflt}; "
          f"workers user {workers.ru_utime:.2f} sys {workers.ru_stime:.2f} minflt {workers.ru_minflt}", file=sys.stderr)


if __name__ == "__main__":
    main()
