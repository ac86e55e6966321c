"""Prepared datasets: WebDataset-format tar shards with an index of where every image sits.

``python -m fastcore_ops.data.prepare`` (prepare.py) writes a folder of

    shard-000000.tar, shard-000001.tar, ...   # <key>.jpg + <key>.cls members, as WebDataset reads them
    index.json                                # classes, counts, each shard's members and checksum

Any WebDataset reader (the ``webdataset`` package, DALI's ``readers.webdataset``) reads the tar
files as they are. ``build_loader`` reads them through the index instead: each sample is a
``ShardMember`` (shard file, byte offset, byte count), so the loader reads one image with one
seek and shuffles per sample, not per shard, with the same order, seeds, sharding per rank and
mid-epoch resume as an ImageFolder tree.

    >>> samples, classes = read_shard_samples("prepared/train")   # doctest: +SKIP
    >>> len(read_encoded(samples[0][0]))                          # doctest: +SKIP
    18211
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

INDEX_FILE = "index.json"
INDEX_FORMAT = "fastcore_ops.shards"
INDEX_VERSION = 1


class ShardMember(NamedTuple):
    """Where one prepared image's encoded bytes are: ``size`` bytes from ``offset`` in ``shard``."""

    shard: str
    offset: int
    size: int
    key: str

    def __str__(self) -> str:  # how skipped-file warnings name it
        return f"{self.shard}#{self.key}.jpg"


def is_shard_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder written by ``python -m fastcore_ops.data.prepare``.

    >>> is_shard_folder("/nonexistent")
    False
    """
    return (Path(path) / INDEX_FILE).is_file()


def read_index(folder: str | os.PathLike) -> dict:
    """The shard folder's index, checked against the shard files beside it; ValueError naming the problem."""
    folder = Path(folder)
    try:
        index = json.loads((folder / INDEX_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{folder / INDEX_FILE} cannot be read ({error}); prepare the dataset again") from None
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        raise ValueError(f"{folder / INDEX_FILE} is not an index of fastcore_ops shards (no format "
                         f"{INDEX_FORMAT!r}); pass an ImageFolder root or a folder written by fastcore_ops.data.prepare")
    if index.get("version") != INDEX_VERSION:
        raise ValueError(f"{folder / INDEX_FILE} has index version {index.get('version')!r}; this fastcore_ops "
                         f"reads version {INDEX_VERSION}: prepare the dataset again with this version")
    for shard in index["shards"]:
        path = folder / shard["file"]
        if not path.is_file():
            raise FileNotFoundError(f"shard {str(path)!r}, listed in {INDEX_FILE}, is missing; copy the whole "
                                    f"prepared folder, or prepare it again")
        if path.stat().st_size != shard["bytes"]:
            raise ValueError(f"shard {str(path)!r} has {path.stat().st_size} bytes, {INDEX_FILE} says "
                             f"{shard['bytes']}: it was cut or changed; copy it again, or prepare the dataset again")
    return index


def read_shard_samples(folder: str | os.PathLike) -> tuple[list[tuple[ShardMember, int]], list[str]]:
    """The (ShardMember, label) samples of a shard folder, in shard order, and its class names."""
    folder = Path(folder)
    index = read_index(folder)
    samples = [(ShardMember(str(folder / shard["file"]), offset, size, key), label)
               for shard in index["shards"] for key, offset, size, label in shard["members"]]
    if not samples:
        raise ValueError(f"the prepared dataset {str(folder)!r} holds no images "
                         f"({len(index.get('skipped', []))} source files were unreadable); check its source")
    return samples, list(index["classes"])


def read_encoded(path: str | ShardMember) -> bytes:
    """The encoded bytes of one sample: a whole file, or one member of a shard. OSError when they cannot be read."""
    if not isinstance(path, ShardMember):
        with open(path, "rb") as file:
            return file.read()
    with open(path.shard, "rb") as file:
        file.seek(path.offset)
        data = file.read(path.size)
    if len(data) != path.size:
        raise OSError(f"the shard ends {path.size - len(data)} bytes early")
    return data
