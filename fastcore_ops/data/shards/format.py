"""Prepared datasets: WebDataset-format tar shards with an index of where every image sits.

``python -m fastcore_ops.data.prepare`` (prepare.py) writes a folder of

    shard-000000.tar, shard-000001.tar, ...   # <key>.jpg + <key>.cls members, as WebDataset reads them
    index.json                                # classes, counts, each shard's members and checksum

Any WebDataset reader (the ``webdataset`` package, DALI's ``readers.webdataset``) reads the tar
files as they are. ``build_loader`` reads them through the index instead: each sample is a
``ShardMember`` (shard file, byte offset, byte count), so the loader reads one image with one
seek and shuffles per sample, not per shard, with the same order, seeds, sharding per rank and
mid-epoch resume as an ImageFolder tree.

A prepared folder may come from elsewhere, so its index is data to check, not to trust. When
the folder is opened, ``read_index`` checks every field (a ValueError names the file, the field
and the fix) and confines the shards to plain files directly inside the folder: no path, no
symbolic link, nothing outside it is ever read. Each shard's sha256 is checked once per process
before its first image is read (``verify_shards``; the loader runs it before its first batch),
so a shard changed or swapped after preparing stops the run instead of losing images or
labelling them wrongly.

    >>> samples, classes = read_shard_samples("prepared/train")   # doctest: +SKIP
    >>> len(read_encoded(samples[0][0]))                          # doctest: +SKIP
    18211
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import Iterable, NamedTuple, NoReturn

INDEX_FILE = "index.json"
INDEX_FORMAT = "fastcore_ops.shards"
INDEX_VERSION = 1
# An index of 25M images fits; a larger file is not one prepare wrote, and parsing it would only fill memory.
MAX_JSON_BYTES = 1 << 30

_TAR_BLOCK = 512  # a tar member's data starts at a multiple of it
_INDEX_KEYS = ("classes", "class_counts", "samples", "settings", "skipped", "shards")
SHARD_KEYS = ("file", "bytes", "sha256", "members")
_MEMBER_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_JSON_NAMES = {int: "an int", str: "a string", list: "a list", dict: "an object"}
_INDEX_FIX = ("the prepared folder was changed or damaged: copy it again from where it was prepared, or prepare the "
              "dataset again with python -m fastcore_ops.data.prepare")

# (shard path, sha256) pairs this process has checked; DataLoader workers forked later inherit them.
_VERIFIED: set[tuple[str, str]] = set()


class ShardMember(NamedTuple):
    """Where one prepared image's encoded bytes are: ``size`` bytes from ``offset`` in ``shard``.

    ``sha256``: the whole shard's checksum from the index, checked before the shard's first read
    in a process (None: not checked).
    """

    shard: str
    offset: int
    size: int
    key: str
    sha256: str | None = None

    def __str__(self) -> str:  # how skipped-file warnings name it
        return f"{self.shard}#{self.key}.jpg"


class ShardChecksumError(ValueError):
    """A shard's bytes differ from the sha256 its index gives: it was changed after it was prepared."""


def is_shard_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder written by ``python -m fastcore_ops.data.prepare``.

    >>> is_shard_folder("/nonexistent")
    False
    """
    return (Path(path) / INDEX_FILE).is_file()


def _shown(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    result = dict(pairs)
    if len(result) < len(pairs):
        twice = [key for key, count in Counter(key for key, _ in pairs).items() if count > 1]
        raise ValueError(f"key {twice[0]!r} appears twice in one object")
    return result


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str) -> object:
    """``text`` as JSON from outside: ValueError for invalid JSON, NaN or Infinity, a key twice in an object, or
    nesting past Python's recursion limit (json.loads raises RecursionError there, which no caller expects).

    >>> parse_json("[" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: maximum recursion depth exceeded while decoding a JSON array from a unicode string
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except RecursionError as error:
        raise ValueError(str(error)) from None


class JsonFields:
    """Checks on the values of a JSON file from elsewhere: each failure a ValueError naming the file, field and fix.

    >>> JsonFields(Path("out/index.json"), "prepare it again").integer("samples", True)
    Traceback (most recent call last):
    ...
    ValueError: out/index.json: samples must be an int, got bool True; prepare it again
    """

    def __init__(self, path: Path, fix: str):
        self.path, self.fix = path, fix

    def fail(self, field: str, problem: str) -> NoReturn:
        """ValueError: ``field`` (empty: the whole file) has ``problem``."""
        raise ValueError(f"{self.path}{': ' + field if field else ''} {problem}; {self.fix}")

    def text(self) -> str:
        """The file's text: ValueError if it is too large to be an index, or not UTF-8."""
        try:
            size = self.path.stat().st_size
            if size > MAX_JSON_BYTES:
                self.fail("", f"holds {size} bytes, more than the {MAX_JSON_BYTES} that prepare writes for 25M images")
            data = self.path.read_bytes()
        except OSError as error:
            self.fail("", f"cannot be read ({error.strerror or error})")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            self.fail("", f"is not UTF-8 text ({error})")

    def parse(self, text: str, field: str = "") -> object:
        """``text`` as JSON: no NaN or Infinity, no key twice in an object, no nesting past Python's recursion limit."""
        try:
            return parse_json(text)
        except ValueError as error:
            self.fail(field, f"is not valid JSON ({error})")

    def kind(self, field: str, value, kind: type):
        """``value`` if its type is exactly ``kind`` (a bool is not an int)."""
        if type(value) is not kind:
            self.fail(field, f"must be {_JSON_NAMES[kind]}, got {_shown(value)}")
        return value

    def integer(self, field: str, value, low: int = 0) -> int:
        """``value`` if it is an int >= ``low``."""
        if self.kind(field, value, int) < low:
            self.fail(field, f"must be >= {low}, got {value}")
        return value

    def keys(self, field: str, value, keys: Iterable[str]) -> dict:
        """``value`` if it is an object holding ``keys``."""
        missing = [key for key in keys if key not in self.kind(field, value, dict)]
        if missing:
            self.fail(field, f"lacks {', '.join(map(repr, missing))}")
        return value

    def shard(self, field: str, entry, class_count: int, keys_seen: set[str]) -> list[int]:
        """Check one shard entry's fields (not its file: :meth:`plain_file`); returns its members' count per class.

        ``keys_seen``: the member keys of the shards checked before; this shard's are added.
        """
        self.keys(field, entry, SHARD_KEYS)
        self.kind(f"{field}.file", entry["file"], str)
        size = self.integer(f"{field}.bytes", entry["bytes"])
        if not _SHA256.fullmatch(self.kind(f"{field}.sha256", entry["sha256"], str)):
            self.fail(f"{field}.sha256", f"must be 64 lowercase hex digits, got {_shown(entry['sha256'])}")
        return self._members(f"{field}.members", self.kind(f"{field}.members", entry["members"], list), size,
                             class_count, keys_seen)

    def skipped(self, field: str, entries) -> list[dict]:
        """Check a list of ``{"source": ..., "reason": ...}`` objects: the source files left out."""
        for number, entry in enumerate(self.kind(field, entries, list)):
            for key in ("source", "reason"):
                self.kind(f"{field}[{number}].{key}", self.keys(f"{field}[{number}]", entry, (key,))[key], str)
        return entries

    def plain_file(self, field: str, name, folder: Path) -> Path:
        """``folder / name`` if ``name`` is a plain name and that a regular file; FileNotFoundError if absent."""
        name = self.kind(field, name, str)
        if name in ("", ".", "..") or os.path.basename(name) != name or "\\" in name or "\0" in name:
            self.fail(field, f"is {name!r}; only a plain file name is accepted, for a file directly inside the folder")
        path = folder / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise FileNotFoundError(f"{str(path)!r}, listed in {self.path}, is missing; copy the whole prepared "
                                    f"folder, or prepare it again") from None
        if stat.S_ISLNK(mode):
            self.fail(field, f"names {name!r}, a symbolic link; only plain files inside the folder are read: copy the "
                             f"folder with the files the links point to (cp -rL)")
        if not stat.S_ISREG(mode):
            self.fail(field, f"names {name!r}, which is not a regular file")
        return path

    def _members(self, field: str, members: list, shard_bytes: int, class_count: int, keys_seen: set[str]) -> list[int]:
        counts = [0] * class_count
        for number, member in enumerate(members):
            problem = _member_problem(member, shard_bytes, class_count)
            if problem is None and member[0] in keys_seen:
                problem = f"lists key {member[0]!r} a second time"
            if problem is not None:
                self.fail(f"{field}[{number}]", problem)
            keys_seen.add(member[0])
            counts[member[3]] += 1
        ordered = sorted(range(len(members)), key=lambda number: members[number][1])
        for before, after in zip(ordered, ordered[1:]):
            end = members[before][1] + members[before][2]
            if members[after][1] < end:
                self.fail(f"{field}[{after}]", f"starts at byte {members[after][1]}, inside {field}[{before}] "
                                               f"(bytes {members[before][1]} to {end})")
        return counts


def _member_problem(member, shard_bytes: int, class_count: int) -> str | None:
    """What is wrong with one ``[key, offset, size, label]`` entry of a shard of ``shard_bytes`` bytes, or None."""
    if type(member) is not list or len(member) != 4:
        return f"must be a [key, offset, size, label] list, got {_shown(member)}"
    key, offset, size, label = member
    if type(key) is not str or not _MEMBER_KEY.fullmatch(key):
        return f"has key {_shown(key)}; a key is 1 to 64 letters, digits, '_' or '-'"
    for name, value in (("offset", offset), ("size", size), ("label", label)):
        if type(value) is not int:
            return f"has {name} {_shown(value)}, not an int"
    if offset < 0 or size < 1 or offset + size > shard_bytes:
        return f"has offset {offset} and size {size}, which do not lie inside the shard's {shard_bytes} bytes"
    if offset % _TAR_BLOCK:
        return f"has offset {offset}, which is not at the start of a {_TAR_BLOCK}-byte tar block, where a member begins"
    if not 0 <= label < class_count:
        return f"has label {label}; there are {class_count} classes, labels 0 to {class_count - 1}"
    return None


def read_index(folder: str | os.PathLike) -> dict:
    """The shard folder's index, every field checked, and the shard files beside it checked against it.

    ValueError naming ``index.json`` and the field for a corrupt or inconsistent index (a wrong
    type, a label out of range, counts that do not add up, a member listed twice or outside its
    shard, a shard named by a path or a link, a shard of another size); FileNotFoundError for a
    missing shard. Checksums are checked later, before each shard's first read (:func:`verify_shards`).

    >>> read_index("/nonexistent")
    Traceback (most recent call last):
    ...
    ValueError: /nonexistent/index.json cannot be read (No such file or directory); the prepared folder was ...
    """
    folder = Path(folder)
    fields = JsonFields(folder / INDEX_FILE, _INDEX_FIX)
    index = fields.parse(fields.text())
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        raise ValueError(f"{folder / INDEX_FILE} is not an index of fastcore_ops shards (no format "
                         f"{INDEX_FORMAT!r}); pass an ImageFolder root or a folder written by fastcore_ops.data.prepare")
    if index.get("version") != INDEX_VERSION:
        raise ValueError(f"{folder / INDEX_FILE} has index version {index.get('version')!r}; this fastcore_ops "
                         f"reads version {INDEX_VERSION}: prepare the dataset again with this version")
    fields.keys("", index, _INDEX_KEYS)
    classes = _classes(fields, index["classes"])
    fields.kind("settings", index["settings"], dict)
    fields.skipped("skipped", index["skipped"])
    counts = [0] * len(classes)
    keys_seen: set[str] = set()
    for number, shard in enumerate(fields.kind("shards", index["shards"], list)):
        shard_counts = fields.shard(f"shards[{number}]", shard, len(classes), keys_seen)
        counts = [total + count for total, count in zip(counts, shard_counts)]
    _check_counts(fields, index, counts)
    _check_shard_files(fields, folder, index["shards"])
    return index


def _check_shard_files(fields: JsonFields, folder: Path, shards: list[dict]) -> None:
    """Each shard file: named once, a plain file inside ``folder``, of the size the index gives."""
    named: set[str] = set()
    for number, shard in enumerate(shards):
        if shard["file"] in named:
            fields.fail(f"shards[{number}].file", f"names {shard['file']!r} a second time")
        named.add(shard["file"])
        path = fields.plain_file(f"shards[{number}].file", shard["file"], folder)
        if path.stat().st_size != shard["bytes"]:
            raise ValueError(f"shard {str(path)!r} has {path.stat().st_size} bytes, {fields.path} says "
                             f"{shard['bytes']}: it was cut or changed; copy it again, or prepare the dataset again")


def _classes(fields: JsonFields, classes) -> list[str]:
    for number, name in enumerate(fields.kind("classes", classes, list)):
        if not fields.kind(f"classes[{number}]", name, str):
            fields.fail(f"classes[{number}]", "is an empty name")
    if not classes or len(set(classes)) < len(classes):
        fields.fail("classes", "must list one or more class names, each once")
    return classes


def _check_counts(fields: JsonFields, index: dict, counts: list[int]) -> None:
    """``class_counts`` and ``samples`` against the members the shards list (``counts``, per class)."""
    class_counts = fields.kind("class_counts", index["class_counts"], list)
    for number, count in enumerate(class_counts):
        fields.integer(f"class_counts[{number}]", count)
    if class_counts != counts:
        fields.fail("class_counts", f"is {class_counts}, but the shards list {counts} images per class "
                                    f"({len(index['classes'])} classes)")
    if fields.integer("samples", index["samples"]) != sum(counts):
        fields.fail("samples", f"is {index['samples']}, but the shards list {sum(counts)} images")


def read_shard_samples(folder: str | os.PathLike) -> tuple[list[tuple[ShardMember, int]], list[str]]:
    """The (ShardMember, label) samples of a shard folder, in shard order, and its class names (:func:`read_index`)."""
    folder = Path(folder)
    index = read_index(folder)
    samples = []
    for shard in index["shards"]:
        path, checksum = str(folder / shard["file"]), shard["sha256"]  # one string per shard, shared by its members
        samples += [(ShardMember(path, offset, size, key, checksum), label)
                    for key, offset, size, label in shard["members"]]
    if not samples:
        raise ValueError(f"the prepared dataset {str(folder)!r} holds no images "
                         f"({len(index['skipped'])} source files were unreadable); check its source")
    return samples, list(index["classes"])


def sha256_of(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)  # releases the GIL: verify_shards' threads hash in parallel
    return digest.hexdigest()


def verify_shards(samples: Iterable[tuple[object, int]], threads: int | None = None) -> int:
    """Check the sha256 of each shard ``samples`` read from that this process has not checked yet; returns how many.

    ShardChecksumError naming the shards that differ from their index. ``threads``: shards hashed
    at once (default: one per core).

    >>> verify_shards([("red.jpg", 0)])   # image files have no checksum to check
    0
    """
    pending = sorted({(path.shard, path.sha256) for path, _ in samples
                      if isinstance(path, ShardMember) and path.sha256 is not None} - _VERIFIED)
    if not pending:
        return 0
    with ThreadPoolExecutor(min(len(pending), threads or os.cpu_count() or 1)) as pool:
        found = list(pool.map(sha256_of, map(itemgetter(0), pending)))
    changed = [shard for (shard, expected), actual in zip(pending, found) if actual != expected]
    _VERIFIED.update(pair for pair, actual in zip(pending, found) if actual == pair[1])
    if changed:
        shown = ", ".join(map(repr, changed[:5])) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        index = Path(changed[0]).parent / INDEX_FILE
        raise ShardChecksumError(f"{len(changed)} shard(s) differ from the sha256 {index} gives them: {shown}; they "
                                 f"were changed or damaged after preparing: copy the prepared folder again, or prepare "
                                 f"the dataset again")
    return len(pending)


def read_encoded(path: str | ShardMember) -> bytes:
    """The encoded bytes of one sample: a whole file, or one member of a shard. OSError when they cannot be read.

    A shard's checksum is checked first, once per process (ShardChecksumError if it differs). A path
    that is not a regular file (a named pipe, a socket, a device) raises NotARegularFile unread.
    """
    if not isinstance(path, ShardMember):
        return _read_regular_file(path)
    if path.sha256 is not None and (path.shard, path.sha256) not in _VERIFIED:
        verify_shards([(path, 0)])
    with open(path.shard, "rb") as file:
        file.seek(path.offset)
        data = file.read(path.size)
    if len(data) != path.size:
        raise OSError(f"the shard ends {path.size - len(data)} bytes early")
    return data


class NotARegularFile(OSError):
    """A sample path that names a named pipe, a socket or a device: it is never read."""


def file_type(mode: int) -> str:
    """What a file of ``stat`` mode ``mode`` is, in words.

    >>> file_type(stat.S_IFIFO)
    'a named pipe'
    """
    kinds = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((words for is_kind, words in kinds if is_kind(mode)), "not a regular file")


def _read_regular_file(path: str | os.PathLike) -> bytes:
    """The bytes of the regular file ``path`` (links followed); NotARegularFile for anything else, unread."""
    # Without O_NONBLOCK, opening a named pipe waits for a writer that never comes; with it the open
    # returns at once, and fstat (of what was opened, so no swap in between) tells what it is.
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a socket, which open() refuses
            raise NotARegularFile(_left_unread(os.stat(path).st_mode)) from None
        raise
    with open(descriptor, "rb") as file:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(_left_unread(mode))
        return file.read()


def _left_unread(mode: int) -> str:
    return f"{file_type(mode)}, not a regular file: left unread, as reading one can wait forever; remove it"
