"""Find a dataset's samples: an ImageFolder tree or a list of (path, label) pairs.

Scanning only lists names; it never opens a file (an ImageNet tree has 1.28M of them). Broken
files are found when a backend reads them, and skipped there. Only regular files are samples: a
named pipe, a socket or a device named like an image is left out and named (opening a pipe waits
for a writer that never comes), as is a link that leads nowhere; the listing tells file types
apart without a system call per file.

The walk follows symbolic links (datasets are often assembled from linked folders) but enters
each real folder once, so a link loop cannot make it run forever and a link back to its own
class cannot count that class's images again. What the walk leaves out, it says, with a
``DatasetScanWarning``: a link it did not follow, a folder it could not list, an image name on
something other than a regular file. These are warnings, not errors: the rest of the tree is a
usable dataset, and one unreadable folder (a ``lost+found``, a colleague's private sub-folder)
should not stop a run; but a dataset that silently shrinks would change every result, so it is
never quiet. A root that cannot be listed and a class left without images are errors.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Iterable, Sequence, Union

from fastcore_ops.checks import check_int
from fastcore_ops.data.shards import ShardMember, file_type, is_shard_folder, read_shard_samples

# Formats every backend decodes (fastcore_ops.data.backends.probe checks their signatures); GIF is out
# because DALI cannot decode it.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")

Sample = tuple["str | ShardMember", int]  # a file path, or an image inside a prepared shard
Source = Union[str, os.PathLike, Sequence[tuple[Union[str, os.PathLike], int]]]


def find_samples(source: Source) -> tuple[list[Sample], list[str]]:
    """The (path, label) samples of ``source`` and the class names, in a fixed order.

    ``source`` is either the root of an ImageFolder tree (``root/<class>/<image>``: classes
    are the sorted sub-folder names, images are found by extension, case-insensitively, in
    sorted order), a folder of shards written by ``python -m fastcore_ops.data.prepare`` (each
    path is then a ``shards.ShardMember``, in shard order), or a list of ``(path, label)`` pairs
    (classes are then ``"0" .. str(max label)``).

    >>> samples, classes = find_samples("/data/cifar10/train")   # doctest: +SKIP
    >>> samples[0], classes[:2]                                  # doctest: +SKIP
    (('/data/cifar10/train/airplane/0000.jpg', 0), ['airplane', 'automobile'])
    """
    if isinstance(source, (str, os.PathLike)):
        if is_shard_folder(source):
            return read_shard_samples(source)
        return _scan_image_folder(Path(source))
    if isinstance(source, (list, tuple)):
        return _check_pairs(source)
    raise TypeError(
        f"source must be an ImageFolder root (str or Path) or a list of (path, label) pairs, "
        f"got {type(source).__name__}"
    )


def _is_image(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def is_image_file(path: str | os.PathLike) -> bool:
    """Whether the scan takes ``path`` as an image: an image's name on a regular file (links followed).

    An image's name on anything else is left out with a ``DatasetScanWarning``. For walks other
    than :func:`find_samples`' own, such as torchvision's ``ImageFolder(is_valid_file=...)``.

    >>> is_image_file("notes.txt")
    False
    """
    path = os.fspath(path)
    if not _is_image(os.path.basename(path)):
        return False
    if os.path.isfile(path):
        return True
    _warn_not_regular(path)
    return False


class DatasetScanWarning(UserWarning):
    """Part of an ImageFolder tree was left out of the scan: a folder that could not be listed, a
    link to a folder the scan already covers, or an image name on something other than a regular file."""


def _folder_key(path: str | Path) -> tuple[int, int]:
    """What identifies a real folder, whatever links lead to it."""
    status = os.stat(path)
    return status.st_dev, status.st_ino


def _listing(folder: str) -> tuple[list[str], list[str], list[str]]:
    """(sub-folder names, regular file names, other names) in ``folder``, sorted, hidden names left out.

    Links are followed; OSError if ``folder`` cannot be listed.
    """
    folders, files, others = [], [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:  # the file type the listing holds: no stat, except for links
                kind = folders if entry.is_dir() else files if entry.is_file() else others
            except OSError:
                kind = others
            kind.append(entry.name)
    return sorted(folders), sorted(files), sorted(others)


def _warn_not_regular(path: str) -> None:
    """Say that the image name ``path``, not a regular file, is left out, and what it is."""
    try:
        what = file_type(os.stat(path).st_mode)
    except OSError as error:
        what = f"a link to a missing file ({error.strerror})"
    _warn(f"left out {path!r}: it is {what}, not a regular file, and reading it could wait forever or fail; "
          f"remove it, or put the image file in its place")


def _enter_once(path: str, visited: set[tuple[int, int]]) -> bool:
    """Whether to walk into sub-folder ``path``: True the first time its real folder is reached."""
    try:
        key = _folder_key(path)
    except OSError as error:
        _warn(f"could not open folder {path!r} ({error}); its images are left out of the dataset")
        return False
    if key in visited:
        target = f" -> {os.readlink(path)!r}" if os.path.islink(path) else ""
        _warn(f"did not follow {path!r}{target}: it leads to a folder the scan already covers "
              f"({os.path.realpath(path)!r}), whose images are counted once, where first found")
        return False
    visited.add(key)
    return True


def _warn(message: str) -> None:
    warnings.warn(f"dataset scan: {message}", DatasetScanWarning, stacklevel=2)


def _images_under(folder: Path, visited: set[tuple[int, int]]) -> list[str]:
    """Image paths under ``folder``, depth first: each folder's files, then its sorted sub-folders.

    Nested folders are searched too (like torchvision's ImageFolder); sorting each level keeps
    the order identical on every machine and rank. ``visited`` holds the real folders already
    walked (the caller's, shared by all classes), and gains the ones walked here.
    """
    found = []
    pending = [str(folder)]
    while pending:
        parent = pending.pop()
        try:
            folders, files, others = _listing(parent)
        except OSError as error:
            _warn(f"could not list folder {parent!r} ({error}); its images are left out of the dataset. "
                  f"Fix its permissions, or remove it from the tree")
            continue
        found.extend(os.path.join(parent, name) for name in files if _is_image(name))
        for name in filter(_is_image, others):
            _warn_not_regular(os.path.join(parent, name))
        children = [os.path.join(parent, name) for name in folders]
        pending.extend(reversed([child for child in children if _enter_once(child, visited)]))
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
    # A link from one class into another class's folder (or to the root) is not followed: its
    # images belong to the class whose folder holds them.
    visited = {_folder_key(root), *(_folder_key(root / name) for name in classes)}
    for label, name in enumerate(classes):
        files = _images_under(root / name, visited)
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
        if not isinstance(path, (str, os.PathLike, ShardMember)):
            raise TypeError(f"source[{index}] path must be a str, a Path or a ShardMember (an image in a prepared "
                            f"shard), got {type(path).__name__}")
        check_int(f"source[{index}] label", label, low=0)
        samples.append((path if isinstance(path, ShardMember) else os.fspath(path), label))
    if not samples:
        raise ValueError("source is an empty list; pass at least one (path, label) pair")
    # isfile: a regular file (links followed), so a named pipe in the list is refused, never opened.
    missing = [path for path, _ in samples if not os.path.isfile(path.shard if isinstance(path, ShardMember) else path)]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise FileNotFoundError(f"{len(missing)} file(s) in the (path, label) list do not exist or are not regular "
                                f"files (a named pipe, a socket, a device): {shown}")
    classes = [str(label) for label in range(max(label for _, label in samples) + 1)]
    return samples, classes
