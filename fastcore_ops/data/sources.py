"""Find a dataset's samples: an ImageFolder tree or a list of (path, label) pairs.

Scanning only lists names; it never opens a file (an ImageNet tree has 1.28M of them). Broken
files are found when a backend reads them, and skipped there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence, Union

# Formats every backend decodes (fastcore_ops.data.probe checks their signatures); GIF is out
# because DALI cannot decode it.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")

Sample = tuple[str, int]
Source = Union[str, os.PathLike, Sequence[tuple[Union[str, os.PathLike], int]]]


def find_samples(source: Source) -> tuple[list[Sample], list[str]]:
    """The (path, label) samples of ``source`` and the class names, in a fixed order.

    ``source`` is either the root of an ImageFolder tree (``root/<class>/<image>``: classes
    are the sorted sub-folder names, images are found by extension, case-insensitively, in
    sorted order) or a list of ``(path, label)`` pairs (classes are then ``"0" .. str(max label)``).

    >>> samples, classes = find_samples("/data/cifar10/train")   # doctest: +SKIP
    >>> samples[0], classes[:2]                                  # doctest: +SKIP
    (('/data/cifar10/train/airplane/0000.jpg', 0), ['airplane', 'automobile'])
    """
    if isinstance(source, (str, os.PathLike)):
        return _scan_image_folder(Path(source))
    if isinstance(source, (list, tuple)):
        return _check_pairs(source)
    raise TypeError(
        f"source must be an ImageFolder root (str or Path) or a list of (path, label) pairs, "
        f"got {type(source).__name__}"
    )


def _is_image(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def _images_under(folder: Path) -> list[str]:
    # Nested folders are searched too (like torchvision's ImageFolder); sorting each level keeps
    # the order identical on every machine and rank.
    found = []
    for parent, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(parent, name) for name in sorted(files) if _is_image(name))
    return found


def _scan_image_folder(root: Path) -> tuple[list[Sample], list[str]]:
    if not root.exists():
        raise FileNotFoundError(f"dataset root {str(root)!r} does not exist; pass the folder that holds one sub-folder per class")
    if not root.is_dir():
        raise NotADirectoryError(f"dataset root {str(root)!r} is not a folder; pass the folder that holds one sub-folder per class")
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir() and not entry.name.startswith("."))
    if not classes:
        loose = [name for name in os.listdir(root) if _is_image(name)]
        hint = f" (it holds {len(loose)} loose images: move them into one sub-folder per class)" if loose else ""
        raise ValueError(f"dataset root {str(root)!r} has no class sub-folders{hint}; expected root/<class>/<image>")
    samples: list[Sample] = []
    empty = []
    for label, name in enumerate(classes):
        files = _images_under(root / name)
        if not files:
            empty.append(name)
        samples.extend((path, label) for path in files)
    if len(empty) == len(classes):
        raise ValueError(
            f"dataset root {str(root)!r} holds no images in any of its {len(classes)} class folders; "
            f"accepted extensions: {', '.join(IMAGE_EXTENSIONS)}"
        )
    if empty:
        raise ValueError(
            f"class folder(s) with no images under {str(root)!r}: {', '.join(map(repr, empty))}; "
            f"add images ({', '.join(IMAGE_EXTENSIONS)}) or remove the folder(s)"
        )
    return samples, classes


def _check_pairs(pairs: Iterable) -> tuple[list[Sample], list[str]]:
    samples: list[Sample] = []
    for index, pair in enumerate(pairs):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise TypeError(f"source[{index}] must be a (path, label) pair, got {pair!r}")
        path, label = pair
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"source[{index}] path must be a str or Path, got {type(path).__name__}")
        # bool is an int subclass, but True as a label is a bug, not class 1.
        if isinstance(label, bool) or not isinstance(label, int) or label < 0:
            raise TypeError(f"source[{index}] label must be a non-negative int, got {label!r}")
        samples.append((os.fspath(path), label))
    if not samples:
        raise ValueError("source is an empty list; pass at least one (path, label) pair")
    missing = [path for path, _ in samples if not os.path.isfile(path)]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise FileNotFoundError(f"{len(missing)} file(s) in the (path, label) list do not exist: {shown}")
    classes = [str(label) for label in range(max(label for _, label in samples) + 1)]
    return samples, classes
