"""A corpus tokenized once into memory-mappable files, nanoGPT-style (``python -m fastcore_ops.training.text.prepare``
writes one from the command line).

A prepared folder holds:

- ``train.bin`` and ``validation.bin``: the token ids of each split's files, concatenated in
  path order with no separator, as flat uint16 (vocab_size <= 65536) or uint32;
- ``meta.json``: the format version, tokenizer kind, vocab_size, dtype, each split's token
  count, byte count and file list, the tokenizer's fingerprint, and the source's root, kind
  and fingerprint (see ``fastcore_ops.training.text.corpus.CorpusFiles``);
- ``tokenizer.json`` for the bpe tokenizer, trained on the training files only;
- ``.fastcore_ops-text_prepare``, the mark that this tool wrote the folder and may replace
  what it wrote there (``fastcore_ops.owned_folder``).

Everything is checked before anything is written: the arguments, the destination (absent,
empty, or prepared here before: a folder holding anyone else's files is refused), the text
(both splits hold some, and every file is UTF-8 for bpe, whose tokenizer is trained before
any file is written). The files are then written into a hidden sibling folder of a name no
other process uses, ``.NAME.partial-PID-RANDOM``, moved into place at the end: a failed
preparation removes that folder and nothing else, a killed one leaves at most that folder
behind, never one that looks complete, and the destination stays as it was. Trainers call
:func:`prepared_tokens`, which keeps one folder per (source fingerprint, tokenizer,
vocab_size, validation_every) in :func:`token_cache` and prepares it only when missing.

:func:`load_prepared` treats a prepared folder as untrusted input: ``meta.json`` is read as
JSON and every field checked (the paths it records are never opened), each token file's
size must match it, and each file's ids must be below the vocabulary size: scanned once per
process and file version, 16 MB at a time, 0.011 s per 100 MB from the page cache and 0.05 s
from disk on this project's VM (``reports/token-scan-20261125/``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fastcore_ops.checks import check_bool, check_choice, check_int, check_str
from fastcore_ops.owned_folder import check_claimable, claim_folder, marker
from fastcore_ops.training.text.corpus import CORPUS_KINDS, CorpusFiles, corpus_files
from fastcore_ops.training.text.tokenizers import (BPE_FILE, MAX_VOCAB_SIZE, TOKENIZER_KINDS, Tokenizer, decode_utf8,
                                                   load_tokenizer, resolve_vocab_size, train_bpe)

logger = logging.getLogger(__name__)

TOOL = "text_prepare"  # the owned_folder tool name: its mark in every folder this module writes
FORMAT_VERSION = 1
META_FILE = "meta.json"
SPLITS = ("train", "validation")
TOKEN_DTYPES = ("uint16", "uint32")
CACHE_VARIABLE = "FASTCORE_OPS_CACHE"
# Files are encoded in groups of about this many bytes: tokenizers encodes a group's files in
# parallel, and a group bounds the text held in memory at once (besides one file larger still).
_GROUP_BYTES = 8 << 20
_SCAN_BYTES = 16 << 20  # a token file's ids are checked this many bytes at a time


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned dtype holding ids below ``vocab_size``: uint16 up to 65536, else uint32.

    Example:
        >>> token_dtype(256), token_dtype(65537)
        (dtype('uint16'), dtype('uint32'))
    """
    check_int("vocab_size", vocab_size, low=1, high=2**32)
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def bin_file(split: str) -> str:
    """The file name of ``split``'s tokens: ``train.bin`` or ``validation.bin``."""
    return f"{check_choice('split', split, SPLITS)}.bin"


# What a preparation writes into its folder, meta.json last: the files it may replace there.
_WRITTEN = (marker(".", TOOL).name, BPE_FILE, *map(bin_file, SPLITS), META_FILE)


@dataclass(frozen=True)
class PreparedTokens:
    """A prepared folder, opened: its meta, both splits as read-only memmaps, and its tokenizer."""

    folder: Path
    meta: dict
    train: np.memmap
    validation: np.memmap
    tokenizer: Tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size


# -- where preparations may write ------------------------------------------------------------


def unwritable_reason(folder: Path | str) -> str | None:
    """Why this process cannot make ``folder`` or write into it, or None if it can. Writes nothing.

    The nearest existing one of ``folder`` and its parents decides: it must be a folder this
    process may write to and enter.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     unwritable_reason(Path(handle.name) / "tokens")
        '... is a file, so no folder can be made in it'
        >>> unwritable_reason(tempfile.gettempdir()) is None
        True
    """
    folder = Path(folder)
    nearest = next(place for place in (folder, *folder.parents) if place.exists())
    if nearest == folder and not nearest.is_dir():
        return f"{nearest} is a file, not a folder"
    if not nearest.is_dir():
        return f"{nearest} is a file, so no folder can be made in it"
    if not os.access(nearest, os.W_OK | os.X_OK):
        return f"{nearest} is not writable by this user"
    return None


def token_cache() -> Path:
    """Where prepared tokens are kept between runs: ``$FASTCORE_OPS_CACHE/tokens`` (default ``~/.cache/fastcore_ops``).

    ValueError naming the variable and the fix unless that is a folder this process can make
    and write to (it is made only when tokens are prepared into it). Every text command (this
    module's, and training on text) checks it first, whether or not it reads the cache this
    time: a broken setting shows at once, not on the later run that first needs it.

    Example:
        >>> token_cache().name
        'tokens'
    """
    setting = os.environ.get(CACHE_VARIABLE)
    cache = Path(setting or Path.home() / ".cache" / "fastcore_ops") / "tokens"
    reason = unwritable_reason(cache)
    if reason is None:
        return cache
    if setting:
        raise ValueError(f"{CACHE_VARIABLE}={setting} cannot hold the token cache {cache}: {reason}; point "
                         f"{CACHE_VARIABLE} at a folder you can write to, or unset it to use ~/.cache/fastcore_ops")
    raise ValueError(f"the token cache {cache} cannot be written: {reason}; set {CACHE_VARIABLE} to a folder you "
                     f"can write to")


def _check_destination(destination: Path) -> None:
    """ValueError unless this module may write ``destination``: new, empty or its own, and writable. Writes nothing."""
    check_claimable(destination, TOOL)
    reason = unwritable_reason(destination)
    if reason is not None:
        raise ValueError(f"destination {str(destination)!r} cannot be written: {reason}; choose a folder you can "
                         f"write to")


# -- writing a preparation ---------------------------------------------------------------------


def _write_split(files: CorpusFiles, names: Sequence[str], tokenizer: Tokenizer, dtype: np.dtype, path: Path,
                 progress: bool, split: str) -> dict:
    tokens = size = 0
    bar = tqdm(total=len(names), desc=f"{split} tokens", unit="file", disable=not progress, leave=False)
    with open(path, "wb") as handle:
        start = 0
        while start < len(names):
            group, group_bytes = [], 0
            while start < len(names) and (not group or group_bytes + files.sizes[names[start]] <= _GROUP_BYTES):
                group.append(names[start])
                group_bytes += files.sizes[names[start]]
                start += 1
            texts = [files.read(name) for name in group]
            for ids in tokenizer.encode_batch(texts, [str(files.root / name) for name in group]):
                ids.astype(dtype, copy=False).tofile(handle)
                tokens += ids.size
            size += sum(map(len, texts))
            bar.update(len(group))
        handle.flush()
        os.fsync(handle.fileno())  # on disk before the rename publishes the folder
    bar.close()
    return {"tokens": int(tokens), "bytes": int(size), "files": list(names)}


def _train_tokenizer(files: CorpusFiles, kind: str, vocab_size: int, progress: bool) -> Tokenizer:
    """The tokenizer, trained for bpe: a file that is not UTF-8, in either split, stops it before any writing."""
    if kind == "bytes":
        return load_tokenizer("bytes")
    for name in files.validation_files:  # only decoded here: bpe trains on the training files
        decode_utf8(files.read(name), str(files.root / name))
    names = files.train_files
    texts = (decode_utf8(files.read(name), str(files.root / name))
             for name in tqdm(names, desc="training BPE", unit="file", disable=not progress, leave=False))
    return train_bpe(texts, vocab_size, length=len(names))


def _write_json(path: Path, value: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


def _check_split_size(files: CorpusFiles, split: str, count: int, unit: str) -> None:
    """ValueError unless ``split`` holds 2 ``unit`` or more: evaluating one token needs the one before it."""
    if count < 2:
        names = getattr(files, f"{split}_files")
        raise ValueError(f"the {split} files of {str(files.root)!r} ({len(names)} file(s), the first {names[0]!r}) "
                         f"hold {count} {unit} in all, fewer than the 2 a split needs; add text to them or change "
                         f"validation_every")


def _publish(partial: Path, destination: Path) -> None:
    """Move the finished ``partial`` folder to ``destination``.

    Absent or empty: one rename. Prepared here before: its files replaced one by one, the mark
    first and meta.json last, so a kill midway leaves a marked folder without meta.json, which no
    reader takes for complete and the next preparation replaces. Someone else's files there by
    now: ValueError, nothing touched.
    """
    try:
        os.rename(partial, destination)
        return
    except OSError:
        check_claimable(destination, TOOL)
    (destination / META_FILE).unlink(missing_ok=True)
    for name in _WRITTEN:
        if (partial / name).exists():
            os.replace(partial / name, destination / name)
        else:  # the tokenizer.json of an earlier bpe preparation
            (destination / name).unlink(missing_ok=True)
    partial.rmdir()


def _remove_empty(folders: Sequence[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty: folders this process made and nobody filled."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _prepare(files: CorpusFiles, destination: Path, kind: str, vocab_size: int, progress: bool, *,
             keep_existing: bool = False) -> Path:
    """Prepare ``files`` in a partial folder of this process, then move it to ``destination`` (checked by the caller).

    keep_existing: keep a complete preparation found in ``destination`` by then (another process
    prepared the same cache folder) instead of replacing it.
    """
    for split in SPLITS:
        _check_split_size(files, split, getattr(files, f"{split}_bytes"), "bytes")
    tokenizer = _train_tokenizer(files, kind, vocab_size, progress)
    dtype = token_dtype(tokenizer.vocab_size)
    made = [folder for folder in destination.parents if not folder.exists()]  # deepest first
    destination.parent.mkdir(parents=True, exist_ok=True)
    # A sibling, so the final rename stays on one file system (and so is atomic); hidden, and
    # named after this process with a random suffix: nobody else has it, so it is the only
    # folder a failure here removes.
    partial = destination.parent / f".{destination.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    published = False
    try:
        claim_folder(partial, TOOL)
        tokenizer.save(partial)
        splits = {split: _write_split(files, getattr(files, f"{split}_files"), tokenizer, dtype,
                                      partial / bin_file(split), progress, split) for split in SPLITS}
        for split in SPLITS:  # bpe can make 2 bytes one token
            _check_split_size(files, split, splits[split]["tokens"], "tokens")
        _write_json(partial / META_FILE, {
            "format_version": FORMAT_VERSION,
            "tokenizer": tokenizer.kind,
            "vocab_size": tokenizer.vocab_size,
            "dtype": dtype.name,
            "tokenizer_fingerprint": tokenizer.fingerprint,
            "validation_every": files.validation_every,
            "source_kind": files.kind,
            "source_root": str(files.root.resolve()),
            "source_fingerprint": files.fingerprint,
            **splits,
        })
        if not (keep_existing and (destination / META_FILE).is_file()):
            _publish(partial, destination)
            published = True
    finally:  # KeyboardInterrupt too: leave no partial folder behind
        if not published:
            shutil.rmtree(partial, ignore_errors=True)
            _remove_empty(made)
    return destination


def prepare(source: Path | str | None, destination: Path | str, *, tokenizer: str = "bytes",
            vocab_size: int | None = None, validation_every: int = 10, progress: bool = True) -> Path:
    """Tokenize ``source`` (a folder of text, or None for the standard library) into the folder ``destination``.

    tokenizer: "bytes" or "bpe" (trained here, on the training files only).
    vocab_size: bpe's size (default 4096); None or 256 for bytes.
    validation_every: every k-th file (in path order) is validation.
    destination: absent, empty, or prepared here before (its files are replaced). Returns it;
    ValueError, with ``destination`` as it was, when anything is wrong.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as scratch:
        ...     source = Path(scratch, "text")
        ...     source.mkdir()
        ...     for name in "abcd":
        ...         _ = (source / f"{name}.txt").write_text(f"{name} is a letter. " * 10)
        ...     folder = prepare(source, Path(scratch, "tokens"), validation_every=2, progress=False)
        ...     prepared = load_prepared(folder)
        ...     prepared.meta["train"]["files"], prepared.train.size, prepared.train.dtype
        (['a.txt', 'c.txt'], 300, dtype('uint16'))
    """
    vocab_size = resolve_vocab_size(tokenizer, vocab_size)
    check_bool("progress", progress)
    destination = Path(destination)
    _check_destination(destination)
    return _prepare(corpus_files(source, validation_every), destination, tokenizer, vocab_size, progress)


def cache_key(source_fingerprint: str, tokenizer: str, vocab_size: int, validation_every: int) -> str:
    """16 hex digits naming one preparation: what goes in, with the format version.

    Example:
        >>> cache_key("abc", "bytes", 256, 10) == cache_key("abc", "bytes", 256, 11)
        False
    """
    described = json.dumps([FORMAT_VERSION, source_fingerprint, tokenizer, vocab_size, validation_every])
    return hashlib.sha256(described.encode("utf-8")).hexdigest()[:16]


def prepared_tokens(source: Path | str | None, destination_cache: Path | str, tokenizer: str = "bytes",
                    vocab_size: int | None = None, validation_every: int = 10, *, progress: bool = True) -> Path:
    """The prepared folder of ``source`` under ``destination_cache``, prepared first if it is missing.

    The folder is named ``TOKENIZER-VOCAB-KEY`` with KEY from :func:`cache_key`: a changed
    source file (size or modification time), tokenizer, vocab_size or validation_every gives
    a new folder; the same ones reuse the folder without reading the text again. Nothing in
    the cache that this module did not write is removed or replaced.

    Example:
        >>> folder = prepared_tokens(None, "runs/tokens", "bpe", 4096)  # doctest: +SKIP
        >>> load_prepared(folder).vocab_size  # doctest: +SKIP
        4096
    """
    vocab_size = resolve_vocab_size(tokenizer, vocab_size)
    check_bool("progress", progress)
    files = corpus_files(source, validation_every)
    key = cache_key(files.fingerprint, tokenizer, vocab_size, validation_every)
    folder = Path(destination_cache) / f"{tokenizer}-{vocab_size}-{key}"
    if (folder / META_FILE).is_file():
        return folder
    try:
        check_claimable(folder, TOOL)
    except ValueError:
        raise ValueError(f"the cache folder {str(folder)!r} holds no {META_FILE}, and files that prepare did not "
                         f"write (no {marker(folder, TOOL).name}); move them away and run again") from None
    logger.info("preparing %s tokens of %s into %s", tokenizer, files.root, folder)
    return _prepare(files, folder, tokenizer, vocab_size, progress, keep_existing=True)


# -- reading a preparation: untrusted input ----------------------------------------------------


def _damaged(path: Path, problem: str) -> ValueError:
    return ValueError(f"{str(path)!r} {problem}; delete the folder and prepare again")


def _meta_value(path: Path, table: dict, field: str, check: Callable[[str, object], object], label: str = ""):
    """``table[field]`` once ``check(name, value)`` passes; ValueError naming the file and the field otherwise."""
    label = label or field
    if field not in table:
        raise _damaged(path, f"lacks the field {label!r}")
    try:
        return check(f"field {label!r}", table[field])
    except (TypeError, ValueError) as error:
        raise _damaged(path, f"{str(error):.300}") from None


def _object(name: str, value) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a JSON object, got {type(value).__name__}")
    return value


def _names(name: str, value) -> list:
    if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise TypeError(f"{name} must be a list of file names")
    return value


def _read_meta(folder: Path) -> dict:
    """``folder``'s meta.json with every field checked; ValueError naming the file and the field otherwise.

    Read as JSON only; the paths it records (``source_root``, the file lists) are never opened.
    """
    path = folder / META_FILE
    if not path.is_file():
        raise ValueError(f"folder {str(folder)!r} has no {META_FILE}: it is not a prepared folder; make one with "
                         f"python -m fastcore_ops.training.text.prepare")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError; nesting past the stack
        raise _damaged(path, f"is not valid JSON ({error})") from None
    if not isinstance(meta, dict):
        raise _damaged(path, f"holds a JSON {type(meta).__name__}, not an object of fields")
    version = _meta_value(path, meta, "format_version", check_int)
    if version != FORMAT_VERSION:
        raise _damaged(path, f"has format_version {version}, this code reads {FORMAT_VERSION}")
    kind = _meta_value(path, meta, "tokenizer", functools.partial(check_choice, choices=TOKENIZER_KINDS))
    vocab_size = _meta_value(path, meta, "vocab_size", functools.partial(
        check_int, low=256, high=256 if kind == "bytes" else MAX_VOCAB_SIZE))
    dtype = _meta_value(path, meta, "dtype", functools.partial(check_choice, choices=TOKEN_DTYPES))
    if dtype != token_dtype(vocab_size).name:
        raise _damaged(path, f"says dtype {dtype!r} for vocab_size {vocab_size}, expected "
                             f"{token_dtype(vocab_size).name!r}")
    for field in ("tokenizer_fingerprint", "source_root", "source_fingerprint"):
        _meta_value(path, meta, field, check_str)
    _meta_value(path, meta, "source_kind", functools.partial(check_choice, choices=CORPUS_KINDS))
    _meta_value(path, meta, "validation_every", functools.partial(check_int, low=2))
    for split in SPLITS:
        counts = _meta_value(path, meta, split, _object)
        _meta_value(path, counts, "tokens", functools.partial(check_int, low=1), f"{split}.tokens")
        _meta_value(path, counts, "bytes", functools.partial(check_int, low=0), f"{split}.bytes")
        _meta_value(path, counts, "files", _names, f"{split}.files")
    return meta


def largest_token_id(path: Path | str, dtype: np.dtype | str, *, chunk_bytes: int = _SCAN_BYTES) -> int:
    """The largest id in the token file ``path`` (-1 if empty): numpy's max over maps of ``chunk_bytes`` at a time.

    One map at a time, each released before the next, so the memory the scan holds stays at
    ``chunk_bytes`` (one map of the whole file would keep every page it touched, the file's size).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as scratch:
        ...     np.array([3, 70000, 5], dtype=np.uint32).tofile(Path(scratch, "t.bin"))
        ...     largest_token_id(Path(scratch, "t.bin"), "uint32", chunk_bytes=8)
        70000
    """
    dtype = np.dtype(dtype)
    count, step = Path(path).stat().st_size // dtype.itemsize, max(chunk_bytes // dtype.itemsize, 1)
    largest = -1
    for start in range(0, count, step):
        chunk = np.memmap(path, dtype=dtype, mode="r", offset=start * dtype.itemsize, shape=(min(step, count - start),))
        largest = max(largest, int(chunk.max()))
    return largest


@functools.lru_cache(maxsize=8)
def _scanned_largest_id(path: str, dtype: str, version: tuple[int, ...]) -> int:
    """:func:`largest_token_id`, once per version of a file (``version``: device, inode, size, modification time)."""
    return largest_token_id(path, dtype)


def _map_split(folder: Path, meta: dict, split: str) -> np.memmap:
    path, dtype, tokens = folder / bin_file(split), np.dtype(meta["dtype"]), meta[split]["tokens"]
    expected = tokens * dtype.itemsize
    if not path.is_file():
        raise _damaged(path, f"is missing, but {META_FILE} says {tokens} {dtype.name} tokens ({expected} bytes)")
    info = path.stat()
    if info.st_size % dtype.itemsize:
        raise _damaged(path, f"holds {info.st_size} bytes, not a whole number of {dtype.name} tokens "
                             f"({dtype.itemsize} bytes each): the file is truncated or damaged")
    if info.st_size != expected:
        raise _damaged(path, f"holds {info.st_size} bytes, but {META_FILE} says {tokens} {dtype.name} tokens "
                             f"({expected} bytes): the file is truncated or from another preparation")
    largest = _scanned_largest_id(str(path), dtype.name, (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))
    vocab_size = meta["vocab_size"]
    if largest >= vocab_size:
        raise _damaged(path, f"holds token id {largest}, but the vocabulary has {vocab_size} tokens (ids 0 to "
                             f"{vocab_size - 1}): the file is damaged or was made with another tokenizer")
    return np.memmap(path, dtype=dtype, mode="r", shape=(tokens,))


def load_prepared(folder: Path | str) -> PreparedTokens:
    """Open a prepared folder, checked as untrusted input: meta.json, memory-mapped splits, and the tokenizer.

    Checks every field of meta.json, that each ``.bin`` file's size matches its token count
    and its ids are below the vocabulary size, and that the tokenizer is the one the tokens
    were made with. See :func:`prepare` for an example.
    """
    folder = Path(folder)
    meta = _read_meta(folder)
    train, validation = (_map_split(folder, meta, split) for split in SPLITS)
    tokenizer = load_tokenizer(meta["tokenizer"], folder)
    if (tokenizer.fingerprint, tokenizer.vocab_size) != (meta["tokenizer_fingerprint"], meta["vocab_size"]):
        raise ValueError(f"the tokenizer in {str(folder)!r} (fingerprint {tokenizer.fingerprint[:12]}, "
                         f"{tokenizer.vocab_size} tokens) is not the one {META_FILE} names (fingerprint "
                         f"{str(meta['tokenizer_fingerprint'])[:12]}, {meta['vocab_size']} tokens); delete the "
                         f"folder and prepare again")
    return PreparedTokens(folder, meta, train, validation, tokenizer)
