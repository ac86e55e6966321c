"""Writing an image dataset as WebDataset tar shards: what ``python -m fastcore_ops.data.prepare`` runs once its
command line is parsed (:mod:`fastcore_ops.data.prepare` says what it writes, and how it resumes and refuses).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import multiprocessing
import os
import re
import tarfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from fastcore_ops.checks import check_bool, check_int
from fastcore_ops.data.shards.settings import PrepareSettings
from fastcore_ops.data.backends.pil import UnusableImage, default_num_workers, to_rgb
from fastcore_ops.data.backends.probe import image_format, jpeg_truncation, unusable_reason
from fastcore_ops.data.shards import (
    INDEX_FILE,
    INDEX_FORMAT,
    INDEX_VERSION,
    SHARD_KEYS,
    JsonFields,
    ShardMember,
    is_shard_folder,
    read_encoded,
    read_index,
    sha256_of,
)
from fastcore_ops.data.sources import Source, find_samples
from fastcore_ops.owned_folder import check_claimable, claim_folder, marker, owns, release_folder

PROGRESS_FILE = "prepare-progress.jsonl"
TOOL = "prepare"  # its marker, .fastcore_ops-prepare, says a folder is prepare's to change
# What prepare writes, and so may delete: in a folder it owns, and by these exact names only.
_SHARD = r"shard-\d{6,}\.tar"
_PARTIAL = re.compile(rf"({_SHARD}|{re.escape(INDEX_FILE)}|{re.escape(PROGRESS_FILE)})\.partial")
_WRITTEN = re.compile(rf"({_SHARD}|{re.escape(PROGRESS_FILE)})(\.partial)?|{_PARTIAL.pattern}")


def shrunk_jpeg(data: bytes, max_side: int, quality: int) -> bytes:
    """The image in ``data`` as JPEG bytes with its longer side at most ``max_side``; UnusableImage if it cannot be.

    A JPEG that already fits is returned unchanged.

    >>> buffer = io.BytesIO(); Image.new("RGB", (640, 480)).save(buffer, "PNG")
    >>> Image.open(io.BytesIO(shrunk_jpeg(buffer.getvalue(), 256, 90))).size
    (256, 192)
    """
    reason = unusable_reason(data)
    if reason is None and image_format(data) == "jpeg":
        reason = jpeg_truncation(data)
    if reason is not None:
        raise UnusableImage(reason)
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        scale = min(1.0, max_side / max(width, height))
        if scale == 1.0 and image.format == "JPEG" and image.mode in ("RGB", "L"):
            return data
        target = (max(1, round(width * scale)), max(1, round(height * scale)))
        image.draft("RGB", target)  # libjpeg's DCT scaling: decode no more pixels than the target needs
        image = to_rgb(image)
        if image.size != target:
            image = image.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
        out = io.BytesIO()
        image.save(out, "JPEG", quality=quality)
        return out.getvalue()
    except UnusableImage:
        raise
    except Exception as error:  # noqa: BLE001  (Pillow's plugins raise many types on malformed files)
        raise UnusableImage(f"{type(error).__name__}: {error}") from error


def _encode(job: tuple[str, int, int]) -> tuple[bytes | None, str | None]:
    """Worker: (JPEG bytes, None), or (None, the reason the file was left out)."""
    path, max_side, quality = job
    try:
        return shrunk_jpeg(read_encoded(path), max_side, quality), None
    except (UnusableImage, OSError) as error:
        return None, str(error)


def _shard_name(number: int) -> str:
    return f"shard-{number:06d}.tar"


def _add_member(tar: tarfile.TarFile, name: str, data: bytes) -> int:
    """Append one member with fixed metadata (the same bytes on every run); returns where its data starts."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    start = tar.offset + len(info.tobuf(tar.format, tar.encoding, tar.errors))
    tar.addfile(info, io.BytesIO(data))
    return start


@contextlib.contextmanager
def _writing(path: Path):
    """Name ``path`` in an OSError raised while writing it: a failed write or fsync names no file."""
    try:
        yield
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise OSError(error.errno, error.strerror, os.fspath(path)) from error


def _write_shard(path: Path, members: list[tuple[str, bytes, int]]) -> list[list]:
    """Write (key, jpeg, label) members to ``path`` atomically; returns [key, offset, size, label] per member."""
    partial = path.with_name(path.name + ".partial")
    placed = []
    with _writing(partial), open(partial, "wb") as file:
        with tarfile.open(fileobj=file, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for key, jpeg, label in members:
                placed.append([key, _add_member(tar, f"{key}.jpg", jpeg), len(jpeg), label])
                _add_member(tar, f"{key}.cls", str(label).encode())
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)
    return placed


class _Progress:
    """The shards finished so far, one JSON line each after a first line of the settings.

    Read (and checked) when the object is made, written only from :meth:`start` on, so a
    refused command leaves the file as it was. A last line without its newline is a write cut
    short by a stop: it is dropped, and its shard written again.
    """

    def __init__(self, folder: Path, header: dict):
        self.folder, self.header = folder, header
        self.path = folder / PROGRESS_FILE
        self.fields = JsonFields(self.path, "delete it to start this preparation over")
        self.shards: list[dict] = []
        self.skipped: list[dict] = []
        if os.path.lexists(self.path):
            self._resume()

    def _resume(self) -> None:
        *lines, _cut = self.fields.text().split("\n")
        if not lines:
            self.fields.fail("", "holds no complete line (a run was stopped before it recorded its settings)")
        first, *entries = (self.fields.parse(line, f"line {number}") for number, line in enumerate(lines, 1))
        if self.fields.kind("line 1", first, dict) != self.header:
            changed = sorted(key for key in self.header if first.get(key) != self.header[key])
            raise ValueError(f"{self.folder} holds an unfinished preparation with other {', '.join(changed)}; rerun "
                             f"with its settings ({', '.join(f'{k}={first.get(k)!r}' for k in changed)}), pass "
                             f"another folder, or delete {self.path} to start over")
        keys_seen: set[str] = set()
        for number, entry in enumerate(entries):
            self._check(number, entry, keys_seen)
        for number, entry in enumerate(entries):
            if not self._intact(number, entry):
                break  # that shard and the ones after it are written again
            self.shards.append(entry)
            self.skipped += entry["skipped"]

    def _check(self, number: int, entry, keys_seen: set[str]) -> None:
        """Line ``number + 2``: shard ``number``'s entry as prepare writes it (as shards/format.py reads)."""
        field = f"line {number + 2}"
        self.fields.keys(field, entry, (*SHARD_KEYS, "skipped"))
        if entry["file"] != _shard_name(number):
            self.fields.fail(f"{field}.file", f"must be {_shard_name(number)!r} (shard {number}), "
                                              f"got {entry['file']!r}")
        self.fields.shard(field, entry, len(self.header["classes"]), keys_seen)
        self.fields.skipped(f"{field}.skipped", entry["skipped"])

    def _intact(self, number: int, entry: dict) -> bool:
        """Whether the shard on disk is the one the entry records (a plain file of its size and sha256)."""
        try:
            path = self.fields.plain_file(f"line {number + 2}.file", entry["file"], self.folder)
        except FileNotFoundError:
            return False
        return path.stat().st_size == entry["bytes"] and sha256_of(path) == entry["sha256"]

    def start(self) -> None:
        """Write the settings and the shards kept so far (replacing what was there), ready for :meth:`add`."""
        partial = self.path.with_name(self.path.name + ".partial")
        with _writing(partial):
            partial.write_text("".join(json.dumps(entry) + "\n" for entry in (self.header, *self.shards)))
        os.replace(partial, self.path)

    def add(self, entry: dict) -> None:
        with _writing(self.path), open(self.path, "a") as file:
            file.write(json.dumps(entry) + "\n")
            file.flush()
            os.fsync(file.fileno())
        self.shards.append(entry)
        self.skipped += entry["skipped"]


def _check_source(source: Source, destination: Path) -> tuple[list[tuple[str, int]], list[str]]:
    """The source's (image file, label) samples and classes; ValueError if it is prepared or holds ``destination``."""
    if isinstance(source, (str, os.PathLike)):
        if is_shard_folder(source):
            raise ValueError(f"{source} is already a prepared folder (it has {INDEX_FILE}): train on it as it is, or "
                             f"prepare from the ImageFolder tree it was made from")
        root, target = Path(source).resolve(), destination.resolve()
        if target == root or root in target.parents:
            raise ValueError(f"the destination {destination} is the source {source} or inside it, and would mix its "
                             f"shards with the images; pass a destination outside the source")
    samples, classes = find_samples(source)
    if any(isinstance(path, ShardMember) for path, _ in samples):
        raise ValueError("the source lists images inside prepared shards; prepare reads image files: pass the "
                         "ImageFolder tree the shards were made from")
    return samples, classes


def _finished(destination: Path, settings: PrepareSettings) -> Path:
    """The index of ``destination``, already prepared: ValueError if with other settings."""
    finished = read_index(destination)["settings"]
    if finished != asdict(settings):
        raise ValueError(f"{destination} already holds a dataset prepared with {finished}, not "
                         f"{asdict(settings)}; pass another folder, or delete this one")
    return destination / INDEX_FILE


def prepare_shards(source: Source, destination: str | os.PathLike, settings: PrepareSettings = PrepareSettings(), *,
                   workers: int | None = None, progress: bool = True) -> Path:
    """Write ``source`` (ImageFolder root or (path, label) list) as shards in ``destination``; returns the index path.

    ``destination`` must be new, empty, or one prepare wrote (its ``.fastcore_ops-prepare``
    marker, owned_folder.py): nothing else in a folder is ever replaced or deleted. Everything is
    checked before the folder is created or marked, and a start that fails before its first
    shard is finished leaves it as it was. Resumes an unfinished run into the same folder; a
    finished folder is left as it is.

    >>> prepare_shards("/data/cifar10/train", "/fast/cifar10/train", PrepareSettings(max_side=64))  # doctest: +SKIP
    PosixPath('/fast/cifar10/train/index.json')
    """
    if not isinstance(settings, PrepareSettings):
        raise TypeError(f"settings must be a PrepareSettings, got {type(settings).__name__}")
    workers = default_num_workers() if workers is None else check_int("workers", workers, low=1)
    check_bool("progress", progress)
    destination = Path(destination)
    if is_shard_folder(destination):
        return _finished(destination, settings)
    samples, classes = _check_source(source, destination)
    check_claimable(destination, TOOL)
    order = np.random.default_rng(settings.seed).permutation(len(samples))
    samples = [samples[index] for index in order]
    listing = hashlib.sha256("\n".join(f"{path}\t{label}" for path, label in samples).encode()).hexdigest()
    done = _Progress(destination, {"settings": asdict(settings), "classes": classes, "samples": len(samples),
                                   "sources_sha256": listing})
    marked_here = not owns(destination, TOOL)
    created = claim_folder(destination, TOOL)
    try:
        _remove_own(destination, _PARTIAL)
        done.start()
        _write_shards(samples, destination, settings, done, workers, progress)
        return _write_index(destination, classes, settings, done)
    except BaseException as error:
        undone = marked_here and not done.shards
        if undone:  # nothing worth resuming: leave the folder as it was
            _remove_own(destination, _WRITTEN)
            if created:
                release_folder(destination, TOOL)
            else:
                marker(destination, TOOL).unlink()
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            if not undone:
                _remove_own(destination, _PARTIAL)  # gives back the space of the file cut short
            raise OSError(_disk_full_message(error, destination, undone, created, len(done.shards))) from error
        raise


def _disk_full_message(error: OSError, destination: Path, undone: bool, created: bool, finished: int) -> str:
    """What a preparation stopped by a full disk (or quota) says: the file, what it left, and the fix."""
    writing = f"writing {error.filename}" if error.filename else f"writing into {destination}"
    if not undone:
        left = (f"kept the {finished} finished shard(s) and {PROGRESS_FILE} in {destination} and deleted the file "
                f"cut short; once there is space, rerun the same command to continue from there")
    elif created:
        left = f"deleted what it wrote, and {destination}, which it had created"
    else:
        left = f"deleted what it wrote: {destination} is as it was"
    return (f"the disk is full ({error.strerror}) while {writing}; prepare {left}. Free space on that disk "
            f"(df -h shows how much is left), or pass a destination folder on another disk")


def _remove_own(folder: Path, names: re.Pattern) -> None:
    """Delete the files (or links) in ``folder`` whose names match ``names``; only ever in a folder prepare owns."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if names.fullmatch(entry.name) and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                os.unlink(entry.path)


def _write_shards(samples: list[tuple[str, int]], destination: Path, settings: PrepareSettings, done: _Progress,
                  workers: int, progress: bool) -> None:
    """Encode and write the shards after the ones ``done`` holds, recording each as it is finished."""
    shard_count = -(-len(samples) // settings.shard_size)
    bar = tqdm(total=len(samples), initial=len(done.shards) * settings.shard_size, unit="img", disable=not progress,
               desc=f"preparing {destination.name}")
    with multiprocessing.Pool(workers) as pool:
        for number in range(len(done.shards), shard_count):
            start = number * settings.shard_size
            chunk = samples[start : start + settings.shard_size]
            jobs = [(os.fspath(path), settings.max_side, settings.quality) for path, _ in chunk]
            members, skipped = [], []
            for position, ((path, label), (jpeg, reason)) in enumerate(zip(chunk, pool.imap(_encode, jobs, 8)), start):
                bar.update()
                if jpeg is None:
                    skipped.append({"source": os.fspath(path), "reason": reason})
                else:
                    members.append((f"{position:09d}", jpeg, label))
            shard = destination / _shard_name(number)
            placed = _write_shard(shard, members)
            done.add({"file": shard.name, "bytes": shard.stat().st_size, "sha256": sha256_of(shard),
                      "members": placed, "skipped": skipped})
    bar.close()


def _write_index(destination: Path, classes: list[str], settings: PrepareSettings, done: _Progress) -> Path:
    counts = [0] * len(classes)
    for shard in done.shards:
        for *_, label in shard["members"]:
            counts[label] += 1
    index = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "classes": classes, "class_counts": counts,
             "samples": sum(counts), "settings": asdict(settings), "skipped": done.skipped,
             "shards": [{key: shard[key] for key in SHARD_KEYS} for shard in done.shards]}
    partial = destination / (INDEX_FILE + ".partial")
    partial.write_text(json.dumps(index))
    os.replace(partial, destination / INDEX_FILE)
    done.path.unlink()
    return destination / INDEX_FILE
