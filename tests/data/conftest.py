"""Fixtures that build small temporary image trees from the real images in ../shared/datasets.

The shared images are only read; trees are written under pytest's tmp_path.

- ``real_jpegs(n)``: paths of n real CIFAR-10 JPEGs (32x32), spread over the classes.
- ``photo_jpegs(n)``: paths of n real full-size ImageNet photos.
- ``make_tree({"cat": {"0.jpg": b"..."}})``: writes a root/<class>/<file> tree, returns root.
- ``coded_tree(classes=3, per_class=4)``: a tree whose images' colour encodes their class
  (``CLASS_COLORS``), so a test can check that every image carries its own file's label;
  ``class_of(images)`` reads the class back from a normalized batch.
- ``bad_files()``: one file per kind of awkward data (truncated, cut inside the compressed data
  and closed with an end marker, empty, text, PNG, grayscale, CMYK, 16-bit, palette, RGBA), each
  marked as decodable or to be skipped.
- ``huge_png_header()``: a whole PNG whose header claims 60000x60000 pixels (a decompression bomb).
"""

from __future__ import annotations

import io
import itertools
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
CIFAR_TRAIN = DATASETS / "cifar10-jpeg" / "train"
IMAGENET_SAMPLE = DATASETS / "imagenet-sample"

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

# Far apart in RGB, so JPEG's small colour errors never move an image to another class.
CLASS_COLORS = [(220, 30, 30), (30, 200, 40), (40, 50, 220), (230, 220, 40), (200, 40, 210), (40, 210, 210)]


def _require(path: Path) -> Path:
    assert path.is_dir(), f"the shared test images are missing: expected {path} (see the project README)"
    return path


def jpeg_bytes(image: Image.Image, **options) -> bytes:
    """``image`` encoded as JPEG (quality 95 unless given)."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=options.pop("quality", 95), **options)
    return buffer.getvalue()


def cut_inside_scan(jpeg: bytes) -> bytes:
    """``jpeg`` cut in the middle of its compressed data and closed again with an end-of-image marker."""
    scan = jpeg.index(b"\xff\xda")
    return jpeg[: scan + (len(jpeg) - scan) // 2] + b"\xff\xd9"


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def huge_png_header() -> bytes:
    """A PNG of nothing but a header claiming 60000x60000 RGB pixels and an end chunk: signature and CRCs intact."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)  # width, height, 8 bits, RGB, defaults
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def pixels_to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Undo the ImageNet normalization of a float batch: 0..255 floats, on the CPU."""
    return (images.float().cpu() * IMAGENET_STD + IMAGENET_MEAN) * 255


def class_of(images: torch.Tensor) -> list[int]:
    """The class each image of a normalized (or uint8) batch from ``coded_tree`` encodes."""
    pixels = pixels_to_uint8(images) if images.is_floating_point() else images.float().cpu()
    means = pixels.mean(dim=(2, 3))
    distances = torch.cdist(means, torch.tensor(CLASS_COLORS, dtype=torch.float32))
    return distances.argmin(dim=1).tolist()


def _write_tree(root: Path, tree: dict[str, dict[str, bytes]]) -> Path:
    for class_name, files in tree.items():
        (root / class_name).mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (root / class_name / name).write_bytes(data)
    return root


@pytest.fixture
def make_tree(tmp_path):
    """Factory: ``make_tree({class: {file name: bytes}})`` writes a fresh tree and returns its root."""
    counter = itertools.count()
    return lambda tree: _write_tree(tmp_path / f"tree{next(counter)}", tree)


@pytest.fixture(scope="session")
def real_jpegs():
    """Factory: ``real_jpegs(n)`` gives n real CIFAR-10 JPEG paths, taken round-robin over the classes."""
    root = _require(CIFAR_TRAIN)
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    files = [sorted(c.iterdir()) for c in classes]

    def pick(count: int) -> list[Path]:
        return [files[i % len(files)][i // len(files)] for i in range(count)]

    return pick


@pytest.fixture(scope="session")
def photo_jpegs():
    """Factory: ``photo_jpegs(n)`` gives the first n full-size ImageNet sample photos, in sorted order."""
    paths = sorted(p for p in _require(IMAGENET_SAMPLE).glob("*/*") if p.is_file())
    return lambda count: paths[:count]


def coded_image(label: int, size: int, index: int) -> Image.Image:
    """A ``size`` square of class ``label``'s colour with a faint per-image texture (images differ)."""
    rng = np.random.default_rng(index)
    pixels = np.array(CLASS_COLORS[label], dtype=np.int16) + rng.integers(-6, 7, (size, size, 3))
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


@pytest.fixture
def coded_tree(make_tree):
    """Factory: ``coded_tree(classes=3, per_class=4, size=40)`` writes class-coloured JPEGs, returns root."""

    def build(classes: int = 3, per_class: int = 4, size: int = 40) -> Path:
        assert classes <= len(CLASS_COLORS), f"at most {len(CLASS_COLORS)} colour-coded classes"
        return make_tree({
            f"class{label}": {f"{i:03d}.jpg": jpeg_bytes(coded_image(label, size, label * 1000 + i)) for i in range(per_class)}
            for label in range(classes)
        })

    return build


@pytest.fixture(scope="session")
def bad_files(real_jpegs):
    """Factory: ``bad_files()`` gives {file name: (bytes, decodable)} for every awkward kind of file."""
    photo = Image.open(real_jpegs(1)[0]).convert("RGB")
    whole = jpeg_bytes(photo)
    sixteen = np.asarray(photo.convert("L"), dtype=np.uint16) * 257

    def build() -> dict[str, tuple[bytes, bool]]:
        return {
            "truncated.jpg": (whole[: len(whole) // 2], False),
            "cut_scan.jpg": (cut_inside_scan(whole), False),
            "empty.jpg": (b"", False),
            "notes.jpg": (b"this is a text file that was named like an image\n", False),
            "picture.png": (png_bytes(photo), True),
            "gray.jpg": (jpeg_bytes(photo.convert("L")), True),
            "cmyk.jpg": (jpeg_bytes(photo.convert("CMYK")), True),
            "deep.png": (png_bytes(Image.fromarray(sixteen)), True),
            "palette.png": (png_bytes(photo.convert("P")), True),
            "alpha.png": (png_bytes(photo.convert("RGBA")), True),
        }

    return build
