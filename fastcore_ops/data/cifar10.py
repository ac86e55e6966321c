"""CIFAR-10 as the JPEG ImageFolder the recipes train on: what ``python -m fastcore_ops.data.datasets cifar10`` runs
once its command line is parsed (:mod:`fastcore_ops.data.datasets` says what it writes and checks).
"""

from __future__ import annotations

import io
import os
import tempfile
import urllib.error
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from fastcore_ops.owned_folder import check_claimable, claim_folder

TOOL = "datasets"
# CIFAR-10's classes in label order, and the images each has in each split.
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR10_PER_CLASS = {"train": 5000, "test": 1000}
QUALITY = 75  # with 4:2:0 chroma: the encoding of the project's copy (../shared/datasets/README.md)
PAGE = "https://www.cs.toronto.edu/~kriz/cifar.html"


def cifar10_split(root: Path, train: bool, download: bool) -> tuple[np.ndarray, list[int]]:
    """The images (N, 32, 32, 3 uint8) and labels of one split of the CIFAR-10 archive under ``root``, through
    torchvision, which checks each file against its published checksum before it reads it (and downloads and
    checks the archive first, with ``download``); ValueError for an archive that fails the check."""
    from torchvision.datasets import CIFAR10  # its import is slow: after the command line is parsed

    try:
        split = CIFAR10(str(root), train=train, download=download)
    except RuntimeError as error:  # torchvision's "not found or corrupted"
        raise ValueError(f"the CIFAR-10 archive in {root} is not the published one ({error}); pass "
                         f"cifar-10-python.tar.gz as downloaded from {PAGE}") from None
    except (urllib.error.URLError, OSError) as error:
        raise ValueError(f"cannot download CIFAR-10 ({error}); download cifar-10-python.tar.gz yourself and pass "
                         f"it with --archive") from None
    if tuple(split.classes) != CIFAR10_CLASSES:
        raise ValueError(f"the CIFAR-10 archive in {root} names the classes {split.classes}; pass the CIFAR-10 one")
    return split.data, list(split.targets)


def jpeg_bytes(image: np.ndarray) -> bytes:
    """One image (H, W, 3 uint8) as the JPEG this command writes.

        >>> jpeg_bytes(np.zeros((32, 32, 3), np.uint8))[:2]
        b'\\xff\\xd8'
    """
    buffer = io.BytesIO()
    Image.fromarray(image, "RGB").save(buffer, "JPEG", quality=QUALITY, subsampling="4:2:0")
    return buffer.getvalue()


def write_split(images: np.ndarray, labels: list[int], folder: Path, progress: bool) -> None:
    """``folder/<class>/NNNN.jpg`` for each image, numbered within its class in the order given."""
    counts = [0] * len(CIFAR10_CLASSES)
    for name in CIFAR10_CLASSES:
        (folder / name).mkdir(parents=True, exist_ok=True)
    for image, label in tqdm(zip(images, labels), total=len(labels), desc=folder.name, disable=not progress):
        path = folder / CIFAR10_CLASSES[label] / f"{counts[label]:04d}.jpg"
        partial = path.with_name(f".{path.name}.partial")
        partial.write_bytes(jpeg_bytes(image))
        partial.replace(path)  # whole or absent, even when the command is stopped mid-write
        counts[label] += 1


def check_cifar10(folder: Path, per_class: dict[str, int] | None = None) -> None:
    """ValueError unless ``folder`` holds CIFAR-10 as this command writes it: for each split and class exactly
    ``per_class[split]`` images (default: CIFAR-10's counts) named 0000.jpg on, each a 32 x 32 RGB JPEG."""
    for split, count in (per_class or CIFAR10_PER_CLASS).items():
        for name in CIFAR10_CLASSES:
            expected = [f"{number:04d}.jpg" for number in range(count)]
            found = sorted(entry.name for entry in os.scandir(folder / split / name) if not entry.name.startswith("."))
            if found != expected:
                raise ValueError(f"{folder / split / name} holds {len(found)} files, not {count} named 0000.jpg to "
                                 f"{count - 1:04d}.jpg; run the command again")
            for file_name in expected:
                with Image.open(folder / split / name / file_name) as image:
                    if (image.format, image.mode, image.size) != ("JPEG", "RGB", (32, 32)):
                        raise ValueError(f"{folder / split / name / file_name} is a {image.format} {image.mode} "
                                         f"{image.size}, not a 32 x 32 RGB JPEG; run the command again")


def make_cifar10(out: Path, archive: Path | None, progress: bool = True) -> None:
    """Write CIFAR-10 as a JPEG ImageFolder into ``out`` (see the module's docstring), from ``archive`` or a
    download; ValueError before ``out`` is touched for an archive that is not CIFAR-10's."""
    from torchvision.datasets import CIFAR10
    from torchvision.datasets.utils import check_integrity

    check_claimable(out, TOOL)
    # Checked here, so that torchvision, finding it intact where it looks for its download, only unpacks it: one
    # that failed its check there would be downloaded again, over the link to the user's file.
    if archive is not None and not check_integrity(str(archive), CIFAR10.tgz_md5):
        raise ValueError(f"--archive {archive}: not the published cifar-10-python.tar.gz (its MD5 is not "
                         f"{CIFAR10.tgz_md5}); pass the python version's archive from {PAGE}")
    with tempfile.TemporaryDirectory(prefix="cifar10-") as root:
        if archive is not None:
            (Path(root) / CIFAR10.filename).symlink_to(archive.resolve())
        splits = {split: cifar10_split(Path(root), split == "train", download=True) for split in CIFAR10_PER_CLASS}
    claim_folder(out, TOOL)
    for split, (images, labels) in splits.items():
        write_split(images, labels, out / split, progress)
    check_cifar10(out)
