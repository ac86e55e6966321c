"""One pil worker's time per image at a given size, in this process: the whole path and where it goes.

    python reports/dataloader-memory-20261124/probes/worker_time.py ../shared/datasets/imagenet-sample 88

Decodes the folder's images through PilBackend(num_workers=0) with the batch stage (flip +
normalize), freed memory kept as in a worker, one thread: an untimed epoch first (so every file
is known whole), then two timed epochs, then cProfile of a third.
"""

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import torch

from fastcore_ops.data.backends.decoded import RunPlan
from fastcore_ops.data.backends.pil import PilBackend
from fastcore_ops.data.sources import find_samples
from fastcore_ops.data.transforms.device_stage import DeviceAugment
from fastcore_ops.host_memory import keep_freed_memory


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="an ImageFolder tree")
    parser.add_argument("size", type=int, help="the side each batch is decoded at")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--profile-lines", type=int, default=14, help="functions shown from the profile")
    args = parser.parse_args(argv)
    keep_freed_memory()
    torch.set_num_threads(1)
    samples, _ = find_samples(args.data)
    backend = PilBackend(batch_size=args.batch_size, train=True, image_size=176, num_workers=0,
                         stage=DeviceAugment(train=True))
    runs = range(0, len(samples), args.batch_size)

    def epoch(number: int) -> int:
        plans = [RunPlan(args.size, number * 100 + index) for index in range(len(runs))]
        return sum(len(batch.labels) for batch in backend.batches(samples, number, 0, plans))

    epoch(0)
    start = time.perf_counter()
    images = epoch(1) + epoch(2)
    print(f"{args.size}px: {1e3 * (time.perf_counter() - start) / images:.3f} ms/img single-threaded")
    profile = cProfile.Profile()
    profile.enable()
    epoch(3)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile_lines)


if __name__ == "__main__":
    main()
