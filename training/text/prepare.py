"""Tokenize a corpus once into memory-mappable files, nanoGPT-style.

    python -m training.text.prepare runs/tokens/stdlib-bytes                  # the standard library, bytes
    python -m training.text.prepare my_texts/ runs/tokens/mine --tokenizer bpe --vocab-size 4096

A prepared folder holds:

- ``train.bin`` and ``validation.bin``: the token ids of each split's files, concatenated in
  path order with no separator, as flat uint16 (vocab_size <= 65536) or uint32;
- ``meta.json``: the format version, tokenizer kind, vocab_size, dtype, each split's token
  count, byte count and file list, the tokenizer's fingerprint, and the source's root, kind
  and fingerprint (see ``training.text.corpus.CorpusFiles``);
- ``tokenizer.json`` for the bpe tokenizer, trained on the training files only.

Written into a hidden sibling folder and renamed into place at the end, so a killed
preparation leaves at most a ``.NAME.partial-*`` folder behind, never one that looks
complete. Trainers call :func:`prepared_tokens`, which keeps one folder per (source
fingerprint, tokenizer, vocab_size, validation_every) in a cache folder and prepares it only
when missing; :func:`load_prepared` maps its files read-only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fastcore_ops.checks import check_bool, check_choice, check_int
from training.text.corpus import CorpusFiles, corpus_files
from training.text.tokenizers import (
    TOKENIZER_KINDS, Tokenizer, decode_utf8, load_tokenizer, resolve_vocab_size, train_bpe,
)

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
META_FILE = "meta.json"
SPLITS = ("train", "validation")
# Files are encoded in groups of about this many bytes: tokenizers encodes a group's files in
# parallel, and a group bounds the text held in memory at once (besides one file larger still).
_GROUP_BYTES = 8 << 20


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
    if kind == "bytes":
        return load_tokenizer("bytes")
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


def _prepare(files: CorpusFiles, destination: Path, kind: str, vocab_size: int, progress: bool) -> Path:
    for split, count in (("train", files.train_bytes), ("validation", files.validation_bytes)):
        if count == 0:
            raise ValueError(f"the {split} files of {str(files.root)!r} are all empty (0 bytes), so the {split} "
                             f"split would hold no tokens; add text to them or change validation_every")
    destination.parent.mkdir(parents=True, exist_ok=True)
    # A sibling, so the final rename stays on one file system (and so is atomic); hidden and
    # named after its process, so concurrent preparations of one folder never share it.
    partial = destination.parent / f".{destination.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    try:
        tokenizer = _train_tokenizer(files, kind, vocab_size, progress)
        tokenizer.save(partial)
        dtype = token_dtype(tokenizer.vocab_size)
        splits = {split: _write_split(files, getattr(files, f"{split}_files"), tokenizer, dtype,
                                      partial / bin_file(split), progress, split) for split in SPLITS}
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
        try:
            os.rename(partial, destination)
        except OSError:
            # Another process finished the same folder first: its result is as good as ours.
            if not (destination / META_FILE).is_file():
                raise
            shutil.rmtree(partial, ignore_errors=True)
    except BaseException:  # KeyboardInterrupt too: leave no partial folder behind
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return destination


def prepare(source: Path | str | None, destination: Path | str, *, tokenizer: str = "bytes",
            vocab_size: int | None = None, validation_every: int = 10, progress: bool = True) -> Path:
    """Tokenize ``source`` (a folder of text, or None for the standard library) into the new folder ``destination``.

    tokenizer: "bytes" or "bpe" (trained here, on the training files only).
    vocab_size: bpe's size (default 4096); None or 256 for bytes.
    validation_every: every k-th file (in path order) is validation.
    Returns ``destination``; ValueError if it exists already.

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
    if destination.exists():
        raise ValueError(f"destination {str(destination)!r} exists already; remove it or choose a new folder "
                         f"(prepared_tokens reuses a folder it prepared before)")
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
    a new folder; the same ones reuse the folder without reading the text again.

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
    if folder.exists():
        raise ValueError(f"the cache folder {str(folder)!r} exists but holds no {META_FILE}: it was not made by "
                         f"prepare; remove it and run again")
    logger.info("preparing %s tokens of %s into %s", tokenizer, files.root, folder)
    return _prepare(files, folder, tokenizer, vocab_size, progress)


def _read_meta(folder: Path) -> dict:
    path = folder / META_FILE
    if not path.is_file():
        raise ValueError(f"folder {str(folder)!r} has no {META_FILE}: it is not a prepared folder; make one with "
                         f"python -m training.text.prepare")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{str(path)!r} is not valid JSON ({error}); delete the folder and prepare again") from None
    wanted = ("format_version", "tokenizer", "vocab_size", "dtype", "tokenizer_fingerprint", *SPLITS)
    missing = [key for key in wanted if not isinstance(meta, dict) or key not in meta]
    if missing:
        raise ValueError(f"{str(path)!r} lacks {', '.join(missing)}; delete the folder and prepare again")
    if meta["format_version"] != FORMAT_VERSION:
        raise ValueError(f"{str(path)!r} has format_version {meta['format_version']!r}, this code reads "
                         f"{FORMAT_VERSION}; delete the folder and prepare again")
    check_choice("meta.json tokenizer", meta["tokenizer"], TOKENIZER_KINDS)
    if meta["dtype"] != token_dtype(meta["vocab_size"]).name:
        raise ValueError(f"{str(path)!r} says dtype {meta['dtype']!r} for vocab_size {meta['vocab_size']}, "
                         f"expected {token_dtype(meta['vocab_size']).name!r}; delete the folder and prepare again")
    return meta


def _map_split(folder: Path, meta: dict, split: str) -> np.memmap:
    path, dtype = folder / bin_file(split), np.dtype(meta["dtype"])
    tokens = meta[split].get("tokens") if isinstance(meta[split], dict) else None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"{META_FILE} in {str(folder)!r} gives {split} tokens {tokens!r}, not a count >= 1; "
                         f"delete the folder and prepare again")
    expected = tokens * dtype.itemsize
    actual = path.stat().st_size if path.is_file() else None
    if actual != expected:
        found = "is missing" if actual is None else f"holds {actual} bytes"
        raise ValueError(f"{str(path)!r} {found}, but {META_FILE} says {tokens} {dtype.name} tokens ({expected} "
                         f"bytes): the file is truncated or from another preparation; delete the folder and "
                         f"prepare again")
    return np.memmap(path, dtype=dtype, mode="r", shape=(tokens,))


def load_prepared(folder: Path | str) -> PreparedTokens:
    """Open a prepared folder: meta.json (read as JSON only), memory-mapped splits, and the tokenizer.

    Checks that each ``.bin`` file's size matches its token count in meta.json and that the
    tokenizer is the one the tokens were made with. See :func:`prepare` for an example.
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.text.prepare", description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", type=Path, default=None,
                        help="folder of text files (default: the Python standard library's source)")
    parser.add_argument("destination", type=Path, help="new folder to write the prepared tokens to")
    parser.add_argument("--tokenizer", choices=TOKENIZER_KINDS, default="bytes")
    parser.add_argument("--vocab-size", type=int, default=None, help="bpe's vocabulary size (default 4096)")
    parser.add_argument("--validation-every", type=int, default=10, help="every k-th file is validation")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    options = parser.parse_args(argv)
    try:
        folder = prepare(options.source, options.destination, tokenizer=options.tokenizer,
                         vocab_size=options.vocab_size, validation_every=options.validation_every,
                         progress=not options.no_progress)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    meta = load_prepared(folder).meta
    print(f"{folder}: {meta['tokenizer']} tokenizer, {meta['vocab_size']} tokens ({meta['dtype']})")
    for split in SPLITS:
        counts = meta[split]
        print(f"  {split:<10} {counts['tokens']:>12,} tokens {counts['bytes']:>12,} bytes {len(counts['files']):>6} "
              f"files ({counts['bytes'] / counts['tokens']:.2f} bytes per token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
