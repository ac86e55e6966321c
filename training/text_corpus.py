"""A byte-level text corpus every machine has: the Python standard library's own source files.

The ``.py`` files under the running interpreter's standard library, sorted by their path
relative to it, without installed packages (``site-packages``) or test suites, so the
corpus is the same wherever the same Python version runs and nothing is downloaded. Whole
files go to validation (every ``validation_every``-th file in path order), so validation
text is never seen in training, not even as a neighbouring window of the same file.

    >>> corpus = load_stdlib_corpus()
    >>> corpus.train.dtype, set(corpus.train_files) & set(corpus.validation_files)
    (torch.uint8, set())
"""

from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from fastcore_ops.checks import check_int

# Directories left out wherever they sit: third-party code, and test suites (large, full of
# deliberately odd source, and absent from some distributions' Python packages).
EXCLUDED_DIRECTORIES = frozenset({"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"})


@dataclass(frozen=True)
class ByteCorpus:
    """Training and validation bytes (uint8 tensors, files concatenated in path order)."""

    root: Path
    train_files: tuple[str, ...]  # paths relative to root, POSIX form
    validation_files: tuple[str, ...]
    train: torch.Tensor
    validation: torch.Tensor

    def summary(self) -> dict:
        """Sizes for reports: file counts and bytes of each split."""
        return {
            "root": str(self.root),
            "train_files": len(self.train_files),
            "validation_files": len(self.validation_files),
            "train_bytes": self.train.numel(),
            "validation_bytes": self.validation.numel(),
        }


def stdlib_root() -> Path:
    """The running interpreter's standard-library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(root: Path) -> list[str]:
    """Relative POSIX paths of the ``.py`` files under ``root``, sorted, excluded directories pruned.

    Example:
        >>> source_files(stdlib_root())[:2]
        ['__future__.py', '__hello__.py']
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"root must be an existing directory, got {str(root)!r}")
    found = []
    for directory, subdirectories, names in os.walk(root):
        # Pruned in place so os.walk never descends into them (site-packages can be huge).
        subdirectories[:] = [d for d in subdirectories if d not in EXCLUDED_DIRECTORIES]
        relative = Path(directory).relative_to(root)
        found += [(relative / name).as_posix() for name in names if name.endswith(".py")]
    # Sorted as strings, not by os.walk's order, which depends on the file system.
    return sorted(found)


def split_by_file(files: list[str], validation_every: int) -> tuple[list[str], list[str]]:
    """(train, validation): file i (0-based) goes to validation when i % validation_every == validation_every - 1.

    Example:
        >>> split_by_file(["a", "b", "c", "d"], validation_every=2)
        (['a', 'c'], ['b', 'd'])
    """
    check_int("validation_every", validation_every, low=2)
    train, validation = [], []
    for index, name in enumerate(files):
        (validation if index % validation_every == validation_every - 1 else train).append(name)
    return train, validation


def _concatenate(root: Path, files: list[str]) -> torch.Tensor:
    data = b"".join((root / name).read_bytes() for name in files)
    # bytearray: torch.frombuffer needs a writable buffer to share without a warning.
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def load_corpus(root: Path, validation_every: int = 10) -> ByteCorpus:
    """The ``.py`` files under ``root`` as a byte corpus split by file.

    Example:
        >>> corpus = load_corpus(stdlib_root(), validation_every=10)
        >>> len(corpus.validation_files) * 9 <= len(corpus.train_files)
        True
    """
    root = Path(root)
    files = source_files(root)
    train, validation = split_by_file(files, validation_every)
    if not train or not validation:
        raise ValueError(
            f"root {str(root)!r} holds {len(files)} .py file(s); a split with validation_every={validation_every} "
            f"needs at least {validation_every} so that both sides get some"
        )
    return ByteCorpus(root, tuple(train), tuple(validation), _concatenate(root, train), _concatenate(root, validation))


def load_stdlib_corpus(validation_every: int = 10) -> ByteCorpus:
    """The running interpreter's standard library as a byte corpus (see the module docstring)."""
    return load_corpus(stdlib_root(), validation_every)
