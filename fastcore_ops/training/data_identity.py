"""What a run trained on, as a fingerprint saved in ``run.json``, so ``--resume`` continues on the same data.

A part of the data is one entry ``{"files": count, "bytes": total, "sha256": digest}``:

- an image folder: every sample's path relative to its root, its size and its modification
  time (a stat per image: no image is read);
- a prepared image folder (``fastcore_ops.data.prepare``): its ``index.json``, which holds every
  shard's sha256 and every member's label;
- prepared text: each token file's size, modification time and 64 KiB read at 16 evenly spaced
  places (a byte changed elsewhere in a re-tokenized corpus moves its size or its time).

Each entry also holds ``contents``, a digest of the same paths and sizes with bytes instead of
times (for an image folder, 256 evenly spaced images read whole), and ``written``, the oldest and
the newest modification time. A copy of the data (a data set provisioned again, a folder copied
to another disk) changes every time: :func:`same_data` takes it as the same data when its
contents digest matches and every file was written after the newest file of the original, which
an edit in place of some files is not.

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
_FILES_READ = 256  # images read whole for an image folder's contents digest


def _digest(records) -> str:
    digest = hashlib.sha256()
    for name, size, identity in sorted(records):
        digest.update(f"{name}\t{size}\t".encode() + identity + b"\n")
    return digest.hexdigest()


def _part(records: list[tuple[str, int, int, bytes]], stamp) -> dict:
    """One part's entry from (name, size, modification time, content bytes) records, in a fixed order.

    stamp(time, content): the bytes ``sha256`` takes of a file, as runs have saved them from the start.
    """
    times = [mtime for _, _, mtime, _ in records]
    return {"files": len(records), "bytes": sum(size for _, size, _, _ in records),
            "sha256": _digest([(name, size, stamp(mtime, content)) for name, size, mtime, content in records]),
            "contents": _digest([(name, size, content) for name, size, _, content in records]),
            "written": [min(times, default=0), max(times, default=0)]}


def _read_whole(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def files_fingerprint(root: Path, paths: Iterable[Path]) -> dict:
    """The entry of image files under ``root``: relative paths, sizes and modification times, and the
    contents of :data:`_FILES_READ` evenly spaced ones."""
    paths = sorted(paths, key=lambda path: os.path.relpath(path, root))
    read = set(paths[::max(1, len(paths) // _FILES_READ)][:_FILES_READ])
    records = []
    for path in paths:
        status = os.stat(path)
        content = _read_whole(path) if path in read else b""
        records.append((os.path.relpath(path, root), status.st_size, status.st_mtime_ns, content))
    return _part(records, lambda mtime, content: str(mtime).encode())


def sampled_fingerprint(root: Path, paths: Iterable[Path]) -> dict:
    """The entry of large files under ``root``: sizes, modification times and evenly spaced samples of bytes."""
    records = []
    for path in paths:
        status, digest = os.stat(path), hashlib.sha256()
        with open(path, "rb") as file:
            for index in range(_SAMPLES_PER_FILE):
                file.seek(status.st_size * index // _SAMPLES_PER_FILE)
                digest.update(file.read(_SAMPLE_BYTES))
        records.append((os.path.relpath(path, root), status.st_size, status.st_mtime_ns, digest.digest()))
    return _part(records, lambda mtime, content: f"{mtime}\t{content.hex()}".encode())


def same_data(saved: dict, now: dict) -> bool:
    """Whether fingerprints ``saved`` and ``now`` are of the same data: equal part by part, or a part copied
    whole (the same contents digest, every file written after the newest one saved).

        >>> part = {"files": 2, "bytes": 9, "sha256": "a", "contents": "c", "written": [10, 20]}
        >>> same_data({"train": part}, {"train": part | {"sha256": "b", "written": [30, 40]}})
        True
        >>> same_data({"train": part}, {"train": part | {"sha256": "b", "written": [15, 40]}})  # some edited
        False
    """
    if saved.keys() != now.keys():
        return False
    return all(saved[name] == now[name] or _copied(saved[name], now[name]) for name in saved)


def _copied(before: dict, after: dict) -> bool:
    if "contents" not in before or "written" not in before:  # saved before these were recorded
        return False
    return before["contents"] == after["contents"] and after["written"][0] > before["written"][1]


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
