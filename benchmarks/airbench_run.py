"""The run of ``python -m benchmarks.airbench_job`` (its module says what it runs, how, and where it differs from
airbench's own run), imported once its command line is parsed: the adapter that lets airbench 0.1.8's
``train94`` run on a CPU, on the images of a JPEG folder.

    >>> interleave_classes([("cat-0", 0), ("cat-1", 0), ("dog-0", 1)])
    [('cat-0', 0), ('dog-0', 1), ('cat-1', 0)]
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from fastcore_ops.training.precision import Precision, choose_precision
from fastcore_ops.training.tasks.classification import split_folders, training_samples

# What this run does that airbench 0.1.8's train94 on CUDA does not, each with why; summary.json lists them and the
# job's docstring states each one.
DEVIATIONS = {
    "device": "the network, the images and the optimizer on the CPU (airbench puts them on CUDA)",
    "precision": "the network's weights in fp32, initialised as airbench's in fp16 then cast (airbench trains fp16 "
                 "weights with fp32 BatchNorm); its forward under the autocast fastcore_ops.training.precision "
                 "chooses (bf16 on a CPU with bf16 units, else none), float32 logits out",
    "images": "read from a JPEG folder (train/, and test/ or val/) instead of torchvision's CIFAR-10 download, into "
              "the train.pt and test.pt airbench's CifarLoader reads",
    "image order": "the training images with their classes interleaved (each class's first image, then each "
                   "class's second, ...), so that the first 5000, which fit the whitening layer, hold 500 of each "
                   "class on the full set, about as many as CIFAR-10's own first 5000 hold",
    "image precision": "the images cast to fp32 after airbench's own fp16 scaling to [0, 1] (the same values; fp16 "
                       "arithmetic is slow on CPUs)",
    "timer": "torch.cuda.Event and torch.cuda.synchronize stood in by a wall clock (a CPU's work is done when its "
             "call returns); airbench times the same spans with it",
    "seed": "torch's global seed set from --seed before training (airbench leaves it as the process starts)",
}

# CIFAR-10's image side: airbench94's network pools 32 down to 1.
IMAGE_SIDE = 32


def interleave_classes(samples: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``samples`` reordered: each class's first sample in class order, then each class's second, and so on."""
    seen = Counter()
    ranked = []
    for path, label in samples:
        ranked.append((seen[label], label, path))
        seen[label] += 1
    return [(path, label) for _, label, path in sorted(ranked)]


def _decode(path: str) -> np.ndarray:
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"))
    if pixels.shape[:2] != (IMAGE_SIDE, IMAGE_SIDE):
        raise ValueError(f"{path}: {pixels.shape[1]}x{pixels.shape[0]} pixels; airbench94's network takes "
                         f"{IMAGE_SIDE}x{IMAGE_SIDE} CIFAR-10 images")
    return pixels


def read_split(root: Path, subset: int | None = None) -> dict:
    """``root``'s ImageFolder (the first ``subset`` images per class) as airbench's CifarLoader keeps a split in its
    ``train.pt``: ``images`` uint8 N x 32 x 32 x 3, ``labels`` int64, ``classes``; classes interleaved.

        >>> split = read_split(Path("../shared/datasets/cifar10-jpeg/test"), subset=1)  # doctest: +SKIP
        >>> split["images"].shape, split["labels"].tolist()[:3]  # doctest: +SKIP
        (torch.Size([10, 32, 32, 3]), [0, 1, 2])
    """
    samples, classes = training_samples(root, subset)
    ordered = interleave_classes(samples)
    return {"images": torch.from_numpy(np.stack([_decode(path) for path, _ in ordered])),
            "labels": torch.tensor([label for _, label in ordered], dtype=torch.int64), "classes": classes}


def cifar_loader(split: dict, folder: Path, *, train: bool, batch_size: int):
    """airbench's own CifarLoader on ``split`` (saved in ``folder`` where it looks for it), on the CPU, its images
    in fp32; training with airbench94's augmentation (flip, translate 2, alternating flips)."""
    from airbench import CifarLoader
    from airbench.lib_airbench94 import hyp

    torch.save(split, folder / ("train.pt" if train else "test.pt"))
    augmented = {"aug": hyp["aug"], "altflip": True} if train else {}
    loader = CifarLoader(str(folder), train=train, batch_size=batch_size, gpu="cpu", **augmented)
    loader.images = loader.images.float()
    return loader


class AutocastNet(nn.Sequential):
    """airbench94's network under ``precision``'s autocast, float32 logits out; its layers keep their names."""

    def __init__(self, precision: Precision, *layers: nn.Module):
        super().__init__(*layers)
        self.precision = precision

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        with self.precision.autocast(images.device):
            return super().forward(images).float()


def cpu_net94(precision: Precision) -> AutocastNet:
    """airbench's ``make_net94`` as it is, its ``.cuda()`` left out, then cast to fp32 under ``precision``."""
    from airbench.lib_airbench94 import make_net94

    with mock.patch.object(nn.Module, "cuda", lambda module, device=None: module):
        net = make_net94()
    return AutocastNet(precision, *net.float().children())


class WallClock:
    """Stands in for ``torch.cuda.Event(enable_timing=True)``; every span airbench measures is kept in ``spans``."""

    spans: list[float] = []

    def __init__(self, enable_timing: bool = False):
        self.at = None

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, end: WallClock) -> float:
        """Milliseconds from this record to ``end``'s, as CUDA's events give them."""
        WallClock.spans.append(end.at - self.at)
        return 1e3 * (end.at - self.at)


def train_on_cpu(train_loader, test_loader, *, epochs: float, precision: Precision) -> dict:
    """airbench's ``train94`` as its users call it (its printed table included), on the CPU: the two top-1s it
    measures, the seconds it times, the optimizer steps it took."""
    from airbench import lib_airbench94, utils

    accuracies, airbench_evaluate = {}, utils.evaluate

    def evaluate(model, loader, tta_level=0):
        accuracies[tta_level] = airbench_evaluate(model, loader, tta_level)
        return accuracies[tta_level]

    steps = []
    counting = register_optimizer_step_post_hook(lambda *_: steps.append(1))
    WallClock.spans = []
    try:
        with (mock.patch.object(torch.cuda, "Event", WallClock),
              mock.patch.object(torch.cuda, "synchronize", lambda: None),
              mock.patch.object(utils, "CifarLoader", lambda *_, **__: test_loader),
              mock.patch.object(utils, "evaluate", evaluate)):
            lib_airbench94.train94(train_loader, epochs=epochs, make_net=lambda: cpu_net94(precision))
    finally:
        counting.remove()
    # airbench times the whitening, each epoch's training, then the evaluation with TTA last.
    *training, tta = WallClock.spans
    tta_level = lib_airbench94.hyp["net"]["tta_level"]
    return {"metrics": {"top1": accuracies[0], "top1_tta": accuracies[tta_level]}, "steps": len(steps),
            "train_seconds": sum(training), "tta_seconds": tta, "airbench_seconds": sum(WallClock.spans)}


def prepare(args) -> tuple[dict, dict]:
    """Check the job's ``args`` and read its training and test splits (:func:`read_split`), before anything is
    written: ``args.precision`` becomes our precision module's choice on the CPU, ``args.epochs`` and
    ``args.batch_size`` airbench94's own where not given, ``args.read_seconds`` the reading's time and
    ``args.train_read_seconds`` its training images' part.
    ValueError or OSError for bad input."""
    from airbench.lib_airbench94 import hyp

    train_root, test_root = split_folders(args.data)
    if args.out.exists() and any(args.out.iterdir()):
        raise ValueError(f"--out {args.out} is not empty; give a new folder")
    args.precision = choose_precision(args.precision, torch.device("cpu"))
    args.epochs = hyp["opt"]["train_epochs"] if args.epochs is None else args.epochs
    args.batch_size = hyp["opt"]["batch_size"] if args.batch_size is None else args.batch_size
    started = time.perf_counter()
    train_split = read_split(train_root, args.subset)
    args.train_read_seconds = time.perf_counter() - started
    splits = train_split, read_split(test_root)
    # airbench's clock starts with its images in memory; what putting them there took is reported beside it.
    args.read_seconds = time.perf_counter() - started
    if len(splits[0]["labels"]) < args.batch_size:
        raise ValueError(f"--batch-size {args.batch_size}: more than the {len(splits[0]['labels'])} training images; "
                         f"airbench drops the last incomplete batch, so give a smaller one or more images")
    print(args.precision.describe(), flush=True)
    return splits


def job(args, splits: tuple[dict, dict]) -> dict:
    """Train airbench94 from ``args.seed`` on ``splits`` (:func:`prepare`); the summary the job writes."""
    train_split, test_split = splits
    with tempfile.TemporaryDirectory(prefix="airbench-") as folder:
        train_loader = cifar_loader(train_split, Path(folder), train=True, batch_size=args.batch_size)
        test_loader = cifar_loader(test_split, Path(folder), train=False, batch_size=2000)  # as train94 makes it
    torch.manual_seed(args.seed)
    result = train_on_cpu(train_loader, test_loader, epochs=args.epochs, precision=args.precision)
    return {**result, "epochs": args.epochs, "batch_size": args.batch_size, "seed": args.seed,
            "train_images": len(train_split["labels"]), "test_images": len(test_split["labels"]),
            "read_seconds": args.read_seconds, "train_read_seconds": args.train_read_seconds,
            "precision": args.precision.describe(), "deviations": DEVIATIONS}
