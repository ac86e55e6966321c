"""Part 4: the loader with its batch stage on the device, against torchvision's DataLoader on the same files.

No dataset travels to a lent GPU, so the part writes its own JPEGs: smooth colour fields with
grain, at ImageNet-like sides (500 x 375), which cost about what photos cost to decode. Both
loaders take random-resized crops, flips and one RandAugment op per image; ours runs the flips
and RandAugment on the device, torchvision's per image in its workers. Ours is also timed with
its whole device stage (ColOut, padded crops and progressive resizing too), and through DALI where it
imports.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

from benchmarks.gpu_check.parts import Mode, Recorder
from benchmarks.loaders import images_per_second, torchvision_loader
from fastcore_ops.data import ColOutOptions, PaddedCropOptions, ProgressiveResize, RandAugmentOptions, build_loader
from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.backends.pil import default_num_workers


@dataclass(frozen=True)
class Workload:
    """The files the part writes and how it loads them."""

    images: int
    width: int
    height: int
    batch_size: int
    image_size: int
    workers: int
    epochs: int


def workload(small: bool) -> Workload:
    if small:
        return Workload(images=48, width=64, height=48, batch_size=8, image_size=32, workers=1, epochs=1)
    return Workload(images=1024, width=500, height=375, batch_size=128, image_size=176,
                    workers=default_num_workers(), epochs=2)


def write_jpegs(root: Path, work: Workload, classes: int = 4) -> Path:
    """``work.images`` JPEGs in ``classes`` class folders under ``root``: smooth random colour fields with grain."""
    generator = np.random.default_rng(0)
    for index in range(work.images):
        folder = root / f"class{index % classes}"
        folder.mkdir(parents=True, exist_ok=True)
        field = Image.fromarray(generator.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize(
            (work.width, work.height), Image.BICUBIC)
        grain = generator.integers(-12, 13, (work.height, work.width, 3), dtype=np.int16)
        pixels = np.clip(np.asarray(field, dtype=np.int16) + grain, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{index:05d}.jpg", quality=90)
    return root


def _ours(root: Path, work: Workload, device: torch.device, backend: str, whole_stage: bool):
    stage = dict(randaugment=RandAugmentOptions(depth=1))
    if whole_stage:
        stage.update(colout=ColOutOptions(), padded_crop=PaddedCropOptions(),
                     progressive_resize=ProgressiveResize(initial_scale=0.5, size_increment=8), epochs=work.epochs + 1)
    return build_loader(root, batch_size=work.batch_size, train=True, image_size=work.image_size, device=device,
                        backend=backend, num_workers=work.workers, **stage)


def run(mode: Mode, record: Recorder) -> None:
    """Images per second of each loader over ``epochs`` epochs after a warm-up epoch; one row each."""
    work, device = workload(mode.small), mode.device
    with tempfile.TemporaryDirectory(prefix="gpu-check-jpegs-") as folder:
        root = write_jpegs(Path(folder), work)
        loaders = {"torchvision DataLoader, per image in its workers": lambda: torchvision_loader(
            root, crop=transforms.RandomResizedCrop(work.image_size, antialias=True), batch_size=work.batch_size,
            workers=work.workers, device=device, randaugment=True)}
        backends = ["pil"] + (["dali"] if dali_available() is None else [])
        for backend in backends:
            loaders[f"ours ({backend}), flips and RandAugment on the device"] = (
                lambda backend=backend: _ours(root, work, device, backend, whole_stage=False))
        loaders["ours (pil), its whole stage: + ColOut, padded crops, progressive resizing"] = (
            lambda: _ours(root, work, device, "pil", whole_stage=True))
        baseline = None
        for name, build in loaders.items():
            rate, images = images_per_second(build(), work.epochs, device, name)
            baseline = baseline or rate
            record.row(loader=name, images=images, images_per_second=rate, vs_torchvision=rate / baseline)
    record.note(f"{work.images} JPEGs of {work.width} x {work.height} written by the part, batches of "
                f"{work.batch_size} at {work.image_size} px on {device}, {work.workers} decoding workers, "
                f"{work.epochs} timed epochs after one warm-up epoch."
                + ("" if dali_available() is None else f" DALI not timed: {dali_available()}."))
