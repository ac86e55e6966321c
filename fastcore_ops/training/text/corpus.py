"""Which text files a corpus holds, and which of them are validation: the files, not yet their tokens.

A corpus is one of two things:

- by default (``source=None``), the Python standard library's own source: the ``.py`` files
  under the running interpreter's standard library, without installed packages
  (``site-packages``) or test suites, so the corpus is the same wherever the same Python
  version runs and nothing is downloaded;
- a folder of text files: every regular file under it whose suffix (any case) is in
  ``TEXT_SUFFIXES``. Not every file: images, archives or ``.pyc`` files would enter the
  token stream silently as noise, so the accepted kinds are listed, and a file without a
  suffix (``LICENSE``, ``Makefile``) is left out. Hidden files and directories (a name
  starting with ".": ``.git``, ``.venv``) are version-control and tool state, not text, and
  are skipped in both kinds.

Walks follow symbolic links but visit each real directory once, keyed by
``(st_dev, st_ino)``, so a link loop cannot make them endless; the files come out as sorted
relative POSIX paths, the same on every machine. Whole files go to validation (every
``validation_every``-th file in path order), so validation text is never seen in training,
not even as a neighbouring window of the same file.

    >>> files = corpus_files()
    >>> files.kind, set(files.train_files) & set(files.validation_files)
    ('stdlib', set())

:func:`load_corpus` reads a split's bytes into tensors, for the small byte-level experiments
(``fastcore_ops.training.alibi_extrapolation``); training reads tokens prepared by ``fastcore_ops.training.text.prepare``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sysconfig
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import torch

from fastcore_ops.checks import check_int

# Directories left out of the standard library wherever they sit: third-party code, and test
# suites (large, full of deliberately odd source, and absent from some distributions' Python).
EXCLUDED_DIRECTORIES = frozenset({"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"})

# What a folder corpus reads: prose and markup, data formats, and common source languages.
TEXT_SUFFIXES = frozenset({
    ".txt", ".md", ".rst", ".tex", ".html", ".xml",
    ".json", ".jsonl", ".csv", ".tsv", ".yaml", ".yml", ".toml", ".ini", ".cfg",
    ".py", ".c", ".h", ".cpp", ".hpp", ".js", ".ts", ".java", ".go", ".rs", ".sh",
})

CORPUS_KINDS = ("stdlib", "folder")


@dataclass(frozen=True)
class CorpusFiles:
    """A corpus's files split into training and validation, with their sizes and a fingerprint.

    ``fingerprint``: sha256 over every file's relative path, size and modification time, so a
    changed, added or removed file changes it (the key of ``prepared_tokens``'s cache). The
    root is left out: a moved or copied folder (``cp -a``) keeps its fingerprint.
    """

    root: Path
    kind: str  # "stdlib" or "folder"
    validation_every: int
    train_files: tuple[str, ...]  # paths relative to root, POSIX form, sorted
    validation_files: tuple[str, ...]
    sizes: Mapping[str, int]  # bytes of every file, by relative path
    fingerprint: str

    @property
    def train_bytes(self) -> int:
        return sum(self.sizes[name] for name in self.train_files)

    @property
    def validation_bytes(self) -> int:
        return sum(self.sizes[name] for name in self.validation_files)

    def read(self, name: str) -> bytes:
        """The bytes of file ``name``; ValueError if its size changed since the files were listed.

        A changed file would make the fingerprint describe text that was not read.
        """
        data = (self.root / name).read_bytes()
        if len(data) != self.sizes[name]:
            raise ValueError(f"{str(self.root / name)!r} changed while the corpus was read ({self.sizes[name]} "
                             f"bytes when listed, {len(data)} now); run again once the files stay put")
        return data


def stdlib_root() -> Path:
    """The running interpreter's standard-library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def walk_files(root: Path, keep: Callable[[str], bool], *, excluded_directories: Collection[str] = ()) -> list[str]:
    """Relative POSIX paths of the files under ``root`` whose name ``keep`` accepts, sorted.

    Follows symbolic links, visiting each real directory once; skips hidden names and
    directories named in ``excluded_directories``; warns about unreadable directories.

    Example:
        >>> walk_files(stdlib_root() / "json", lambda name: name.endswith(".py"))
        ['__init__.py', 'decoder.py', 'encoder.py', 'scanner.py', 'tool.py']
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"root must be an existing directory, got {str(root)!r}")
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    pending = [(str(root), "")]  # (directory, its path relative to root with a trailing "/")
    while pending:
        directory, relative = pending.pop()
        try:
            info = os.stat(directory)
            key = (info.st_dev, info.st_ino)
            if key in seen:  # reached again through a link: a loop, or two ways to one folder
                continue
            seen.add(key)
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError as error:
            warnings.warn(f"skipped directory {directory!r} of the corpus: {error}; make it readable or remove it",
                          stacklevel=2)
            continue
        subdirectories = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_directory, is_file = entry.is_dir(), entry.is_file()  # both follow links
            except OSError:  # vanished or unreadable: treated like a broken link
                continue
            if is_directory and entry.name not in excluded_directories:
                subdirectories.append((entry.path, f"{relative}{entry.name}/"))
            elif is_file and keep(entry.name):
                found.append(f"{relative}{entry.name}")
        # Reversed onto the stack so directories are visited in name order: which path reaches
        # a shared real directory first then depends on the tree only, not on the file system.
        pending += reversed(subdirectories)
    # Sorted as strings, not in visiting order ("a-b" sorts before "a/b").
    return sorted(found)


def source_files(root: Path) -> list[str]:
    """The standard library's selection under ``root``: ``.py`` files, third-party code and tests left out.

    Example:
        >>> source_files(stdlib_root())[:2]
        ['__future__.py', '__hello__.py']
    """
    return walk_files(root, lambda name: name.endswith(".py"), excluded_directories=EXCLUDED_DIRECTORIES)


def text_files(root: Path, suffixes: Collection[str] = TEXT_SUFFIXES) -> list[str]:
    """A folder corpus's selection under ``root``: every file whose lowercased suffix is in ``suffixes``.

    Example:
        >>> text_files(stdlib_root() / "json")
        ['__init__.py', 'decoder.py', 'encoder.py', 'scanner.py', 'tool.py']
    """
    wanted = frozenset(suffix.lower() for suffix in suffixes)
    return walk_files(root, lambda name: os.path.splitext(name)[1].lower() in wanted)


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


def _split(root: Path, files: list[str], validation_every: int, *, argument: str, kind_of_file: str):
    train, validation = split_by_file(files, validation_every)
    if not train or not validation:
        # With validation_every >= 2, validation_every files give both sides at least one.
        raise ValueError(
            f"{argument} {str(root)!r} holds {len(files)} {kind_of_file} file(s); a split with validation_every="
            f"{validation_every} needs at least {validation_every} so that both sides get some: add files or "
            f"lower validation_every"
        )
    return train, validation


def _fingerprint(root: Path, files: list[str]) -> tuple[dict[str, int], str]:
    sizes, digest = {}, hashlib.sha256()
    for name in files:
        info = (root / name).stat()
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{str(root / name)!r} is no longer a regular file; run again once the corpus stays put")
        sizes[name] = info.st_size
        # NUL-separated: no file name holds a NUL, so no two listings hash alike by accident.
        digest.update(f"{name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
    return sizes, digest.hexdigest()


def corpus_files(source: Path | str | None = None, validation_every: int = 10, *,
                 suffixes: Collection[str] = TEXT_SUFFIXES) -> CorpusFiles:
    """The files of a corpus, split by file: the standard library's source (``source=None``) or a folder's text.

    suffixes: what a folder corpus reads (see ``TEXT_SUFFIXES``); the standard library reads ``.py``.

    Example:
        >>> files = corpus_files(None, validation_every=10)
        >>> len(files.validation_files) == len(files.train_files + files.validation_files) // 10
        True
    """
    check_int("validation_every", validation_every, low=2)
    if source is None:
        root, kind = stdlib_root(), "stdlib"
        files = source_files(root)
        argument, kind_of_file = "the standard library", ".py"
    else:
        if not isinstance(source, (str, os.PathLike)):
            raise TypeError(f"source must be a folder path or None (the standard library), got "
                            f"{type(source).__name__} {source!r}")
        root, kind = Path(source), "folder"
        if not root.is_dir():
            raise ValueError(f"source must be an existing folder of text files, got {str(root)!r}; check the "
                             f"path, or pass no source to use the Python standard library")
        files = text_files(root, suffixes)
        argument, kind_of_file = "source", "text"
        if not files:
            raise ValueError(
                f"source {str(root)!r} holds no text files (none with a suffix among "
                f"{' '.join(sorted(suffixes))}, hidden ones skipped); put text files in it, or pass no source to "
                f"use the Python standard library"
            )
    train, validation = _split(root, files, validation_every, argument=argument, kind_of_file=kind_of_file)
    sizes, fingerprint = _fingerprint(root, files)
    return CorpusFiles(root, kind, validation_every, tuple(train), tuple(validation), MappingProxyType(sizes),
                       fingerprint)


# -- the split's bytes in memory, for small byte-level experiments ---------------------------


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


def _concatenate(root: Path, files: list[str]) -> torch.Tensor:
    data = b"".join((root / name).read_bytes() for name in files)
    # bytearray: torch.frombuffer needs a writable buffer to share without a warning.
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def load_corpus(root: Path, validation_every: int = 10) -> ByteCorpus:
    """The ``.py`` files under ``root`` (the standard library's selection) as a byte corpus split by file.

    Example:
        >>> corpus = load_corpus(stdlib_root(), validation_every=10)
        >>> len(corpus.validation_files) * 9 <= len(corpus.train_files)
        True
    """
    root = Path(root)
    files = source_files(root)
    train, validation = _split(root, files, validation_every, argument="root", kind_of_file=".py")
    return ByteCorpus(root, tuple(train), tuple(validation), _concatenate(root, train), _concatenate(root, validation))


def load_stdlib_corpus(validation_every: int = 10) -> ByteCorpus:
    """The running interpreter's standard library as a byte corpus (see the module docstring).

    Example:
        >>> load_stdlib_corpus().train.dtype
        torch.uint8
    """
    return load_corpus(stdlib_root(), validation_every)
