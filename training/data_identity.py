"""What a run trained on, as a fingerprint saved in ``run.json``, so ``--resume`` continues on the same data.

A part of the data is one entry ``{"files": count, "bytes": total, "sha256": digest}``:

- an image folder: every sample's path relative to its root, its size and its modification
  time (a stat per image: no image is read);
- a prepared image folder (``fastcore_ops.data.prepare``): its ``index.json``, which holds every
  shard's sha256 and every member's label;
- prepared text: each token file's size, modification time and 64 KiB read at 16 evenly spaced
  places (a byte changed elsewhere in a re-tokenized corpus moves its size or its time).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.jpg").write_bytes(b"x" * 10)
    >>> part = files_fingerprint(folder, [folder / "a.jpg"])
    >>> part["files"], part["bytes"]
    (1, 10)
    >>> _ = (folder / "a.jpg").write_bytes(b"x" * 11)
    >>> describe_changes({"train": part}, {"train": files_fingerprint(folder, [folder / "a.jpg"])})
    'train: 10 -> 11 bytes'
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from fastcore_ops.data.shards import INDEX_FILE, ShardMember, is_shard_folder
from fastcore_ops.data.sources import find_samples

_SAMPLES_PER_FILE, _SAMPLE_BYTES = 16, 1 << 16


def _part(records: list[tuple[str, int, bytes]]) -> dict:
    """One part's entry from (name, size, identifying bytes) records, in a fixed order."""
    digest = hashlib.sha256()
    for name, size, identity in sorted(records):
        digest.update(f"{name}\t{size}\t".encode() + identity + b"\n")
    return {"files": len(records), "bytes": sum(size for _, size, _ in records), "sha256": digest.hexdigest()}


def files_fingerprint(root: Path, paths: Iterable[Path]) -> dict:
    """The entry of image files under ``root``: relative paths, sizes and modification times."""
    records = []
    for path in paths:
        status = os.stat(path)
        records.append((os.path.relpath(path, root), status.st_size, str(status.st_mtime_ns).encode()))
    return _part(records)


def sampled_fingerprint(root: Path, paths: Iterable[Path]) -> dict:
    """The entry of large files under ``root``: sizes, modification times and evenly spaced samples of bytes."""
    records = []
    for path in paths:
        status, digest = os.stat(path), hashlib.sha256()
        with open(path, "rb") as file:
            for index in range(_SAMPLES_PER_FILE):
                file.seek(status.st_size * index // _SAMPLES_PER_FILE)
                digest.update(file.read(_SAMPLE_BYTES))
        records.append((os.path.relpath(path, root), status.st_size,
                        f"{status.st_mtime_ns}\t{digest.hexdigest()}".encode()))
    return _part(records)


def image_fingerprint(train_root: Path, train_samples: list, eval_root: Path) -> dict:
    """The fingerprint of an image run: its training samples (after ``--subset``) and its evaluation folder."""
    def part(root: Path, samples: list) -> dict:
        if is_shard_folder(root):
            return sampled_fingerprint(root, [root / INDEX_FILE]) | {"files": len(samples)}
        return files_fingerprint(root, [Path(path) for path, _ in samples if not isinstance(path, ShardMember)])

    return {"train": part(train_root, train_samples), "eval": part(eval_root, find_samples(eval_root)[0])}


def text_fingerprint(folder: Path, token_files: Iterable[str]) -> dict:
    """The fingerprint of a language-model run: its prepared token files, one part each."""
    return {name: sampled_fingerprint(folder, [folder / name]) for name in token_files}


def describe_changes(saved: dict, now: dict) -> str:
    """What differs between two fingerprints, in a few words per part (empty when nothing does)."""
    changes = []
    for part in sorted(saved.keys() | now.keys()):
        before, after = saved.get(part), now.get(part)
        if before == after:
            continue
        if before is None or after is None:
            changes.append(f"{part}: {'added' if before is None else 'gone'}")
        elif before.get("files") != after.get("files"):
            changes.append(f"{part}: {before.get('files')} -> {after.get('files')} files")
        elif before.get("bytes") != after.get("bytes"):
            changes.append(f"{part}: {before.get('bytes')} -> {after.get('bytes')} bytes")
        else:
            changes.append(f"{part}: same size, other contents or modification times")
    return "; ".join(changes)
