"""The loaders ``python -m benchmarks.dataloader`` times, and how it times them.

The baseline is the loader most training scripts use, tuned fairly: torchvision's ImageFolder,
RandomResizedCrop, flip, (RandAugment), ToTensor and Normalize per image, a DataLoader with a
worker per core, persistent workers, pinned memory on CUDA.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch
import torchvision
from torchvision import transforms
from torchvision.transforms import functional
from tqdm import tqdm

from fastcore_ops.data.sources import is_image_file

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class ScheduledResizedCrop(torch.nn.Module):
    """torchvision's random-resized crop at a size the main process changes between epochs.

    The size sits in shared memory, so persistent workers see each new epoch's size: what a
    careful torchvision user would write for progressive resizing.
    """

    def __init__(self, size: int):
        super().__init__()
        self.size = multiprocessing.Value("i", size, lock=False)

    def forward(self, image):
        top, left, height, width = transforms.RandomResizedCrop.get_params(image, (0.08, 1.0), (3 / 4, 4 / 3))
        return functional.resized_crop(image, top, left, height, width, [self.size.value] * 2, antialias=True)


def torchvision_loader(root: Path, *, crop: torch.nn.Module, batch_size: int, workers: int, device: torch.device,
                       randaugment: bool) -> torch.utils.data.DataLoader:
    """The usual per-image torchvision pipeline around ``crop``."""
    steps = [crop, transforms.RandomHorizontalFlip()]
    steps += [transforms.RandAugment(num_ops=1)] if randaugment else []
    steps += [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    # is_image_file: the files our loaders take (a named pipe named like an image would hang a worker).
    dataset = torchvision.datasets.ImageFolder(str(root), transforms.Compose(steps), is_valid_file=is_image_file)
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, drop_last=True, num_workers=workers,
        persistent_workers=workers > 0, pin_memory=device.type == "cuda",
    )


def _run_epoch(loader: Iterable, device: torch.device) -> int:
    """Draw one epoch of batches onto the device; the number of images."""
    count = 0
    for images, labels in loader:
        # A no-op for our loaders, which deliver on the device already; the baseline's copy.
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        count += images.shape[0]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return count


def images_per_second(loader: Iterable, epochs: int, device: torch.device, label: str,
                      before_epoch: Callable[[int], None] | None = None) -> tuple[float, int]:
    """Images per second over ``epochs`` epochs after one warm-up epoch (worker start-up, caches).

    ``before_epoch(epoch)`` runs before each epoch, untimed; by default the loader's own
    ``set_epoch`` when it has one.
    """
    if before_epoch is None:
        before_epoch = getattr(loader, "set_epoch", lambda epoch: None)
    before_epoch(0)
    _run_epoch(loader, device)
    seconds, images = 0.0, 0
    for epoch in tqdm(range(1, epochs + 1), desc=label, leave=False):
        before_epoch(epoch)
        start = time.perf_counter()
        images += _run_epoch(loader, device)
        seconds += time.perf_counter() - start
    if hasattr(loader, "close"):
        loader.close()
    del loader
    gc.collect()  # stop persistent workers now, not inside a later loader's forked workers
    return images / seconds, images


def _spin(stop) -> None:
    while not stop.is_set():
        pass


@contextlib.contextmanager
def one_core_busy() -> Iterator[None]:
    """Another process keeps one core busy meanwhile, as other work does on a shared machine."""
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        yield
    finally:
        stop.set()
        spinner.join(timeout=5)
