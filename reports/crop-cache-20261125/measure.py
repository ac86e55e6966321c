"""CPU time per image of the pil backend with and without its crop cache, three epochs each.

    PYTHONPATH=. python reports/crop-cache-20261125/measure.py ../shared/datasets/cifar10-jpeg/train --per-class 500

Decodes in this process (num_workers=0, one thread), so the process's CPU time is the loader's
work per image: reading, decoding and cropping, then the batch stage (flip, normalize).
"""

import argparse
import time
from pathlib import Path

import torch

from fastcore_ops.data import Crops, build_loader
from fastcore_ops.training.tasks.classification import first_per_class


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path, help="an ImageFolder of training images")
    parser.add_argument("--per-class", type=int, default=500, help="images per class (default 500)")
    parser.add_argument("--size", type=int, default=32, help="training image size (default 32)")
    parser.add_argument("--batch-size", type=int, default=128, help="batch size (default 128)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs timed with each setting (default 3)")
    parser.add_argument("--cache-mb", type=int, default=1024, help="the crop cache's size when on (default 1024)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    samples, _ = first_per_class(args.train, args.per_class)
    print("crop_cache_mb,epoch,cpu_us_per_image")
    for cache_mb in (0, args.cache_mb):
        loader = build_loader(samples, batch_size=args.batch_size, train=True, image_size=args.size, device="cpu",
                              num_workers=0, crops=Crops(scale=(1.0, 1.0)), seed=0, crop_cache_mb=cache_mb)
        for epoch in range(args.epochs):
            loader.set_epoch(epoch)
            started = time.process_time()
            images = sum(len(labels) for _, labels in loader)
            print(f"{cache_mb},{epoch},{(time.process_time() - started) / images * 1e6:.1f}")
        loader.close()


if __name__ == "__main__":
    main()
