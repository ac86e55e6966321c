"""Text to token ids: every byte a token (``bytes``), or a byte-level BPE (``bpe``), behind one interface.

Both tokenizers have ``kind``, ``vocab_size``, ``fingerprint`` (what a prepared folder records
to tell tokenizers apart), ``encode(text) -> numpy array``, ``encode_batch(texts)``,
``decode(ids) -> bytes``, ``token_byte_lengths()`` (bytes of text each token stands for: the
denominator of bits per byte) and ``save(folder)``.

- ``bytes``: 256 tokens, token i is byte i; reads any file, no decoding, nothing to save.
- ``bpe``: a byte-level BPE trained with Hugging Face ``tokenizers``: text is UTF-8 decoded,
  split GPT-2 style, and each byte mapped to one of 256 printable characters before merging;
  the 256 characters are all in the vocabulary, so every byte sequence stays representable.
  Nothing normalizes the text and no space is prepended, so a text's tokens stand for exactly
  its bytes (``token_byte_lengths()[ids].sum() == len(text)``). Saved as ``tokenizer.json``;
  its fingerprint is that file's sha256.

Training is deterministic: the same text gives the same ``tokenizer.json`` byte for byte,
whatever RAYON_NUM_THREADS says. Measured on 3 MB of the standard library at 4096 tokens:
two trainings in one process, and runs with 1 and 2 threads, gave the same sha256; ties
between equally frequent pairs are broken by token id, and with the whole byte alphabet
given up front, ids do not depend on the order in which words are counted.

    >>> tokenizer = train_bpe(["the cat sat on the mat. " * 20], vocab_size=264)
    >>> ids = tokenizer.encode("the cat")
    >>> tokenizer.decode(ids), int(tokenizer.token_byte_lengths()[ids].sum())
    (b'the cat', 7)
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from fastcore_ops.checks import check_choice, check_int

TOKENIZER_KINDS = ("bytes", "bpe")
DEFAULT_VOCAB_SIZES = {"bytes": 256, "bpe": 4096}
# The largest vocabulary accepted, asked for or read from a prepared folder: 4x the largest in
# common use (about 256K tokens); anything above is a typo or a damaged file, not a tokenizer.
MAX_VOCAB_SIZE = 2**20
BPE_FILE = "tokenizer.json"


@runtime_checkable
class Tokenizer(Protocol):
    """What prepare, the loaders and the trainer use of a tokenizer."""

    kind: str
    vocab_size: int
    fingerprint: str

    def encode(self, text: bytes | str) -> np.ndarray: ...

    def encode_batch(self, texts: Sequence[bytes | str], names: Sequence[str] | None = None) -> list[np.ndarray]: ...

    def decode(self, ids) -> bytes: ...

    def token_byte_lengths(self) -> np.ndarray: ...

    def save(self, folder: Path) -> Path | None: ...


def resolve_vocab_size(kind: str, vocab_size: int | None) -> int:
    """The vocabulary size ``kind`` will have: the default for None, checked otherwise.

    Example:
        >>> resolve_vocab_size("bpe", None), resolve_vocab_size("bytes", None)
        (4096, 256)
    """
    check_choice("tokenizer", kind, TOKENIZER_KINDS)
    if vocab_size is None:
        return DEFAULT_VOCAB_SIZES[kind]
    if kind == "bytes":
        check_int("vocab_size", vocab_size)
        if vocab_size != 256:
            raise ValueError(f"vocab_size must be 256 or None for the bytes tokenizer (one token per byte), got "
                             f"{vocab_size}; drop it, or use the bpe tokenizer for another size")
        return vocab_size
    # Above the 256 single bytes, or BPE would learn nothing.
    return check_int("vocab_size", vocab_size, low=257, high=MAX_VOCAB_SIZE)


def decode_utf8(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text; ValueError naming ``name``, the offending byte and the fixes otherwise.

    Example:
        >>> decode_utf8(b"caf\\xe9", "notes.txt")
        Traceback (most recent call last):
        ...
        ValueError: notes.txt is not valid UTF-8 (byte 3 is 0xe9: unexpected end of data); the bpe tokenizer ...
    """
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{name} is not valid UTF-8 (byte {error.start} is 0x{error.object[error.start]:02x}: {error.reason}); "
            f"the bpe tokenizer reads UTF-8 text: convert the file (iconv -f ENCODING -t UTF-8) or remove it, or "
            f"use the bytes tokenizer, which reads any file"
        ) from None


def _hugging_face():
    """Hugging Face's ``tokenizers``, imported here: only the bpe tokenizer needs it installed."""
    try:
        # This module is fastcore_ops/training/text/tokenizers.py: absolute imports find Hugging Face's package
        # as long as it runs as part of the package (python -m ...), never as a loose script.
        import tokenizers
    except ImportError:
        raise ImportError("the bpe tokenizer needs Hugging Face tokenizers: pip install tokenizers, or use the "
                          "bytes tokenizer") from None
    return tokenizers


def _ids(array) -> np.ndarray:
    return np.asarray(array, dtype=np.int64).reshape(-1)


class ByteTokenizer:
    """Every byte a token: ids 0..255, no decoding, no file.

    Example:
        >>> ByteTokenizer().encode("hé").tolist()
        [104, 195, 169]
    """

    kind = "bytes"
    vocab_size = 256
    fingerprint = "bytes"

    def encode(self, text: bytes | str) -> np.ndarray:
        """uint8 ids of the bytes of ``text`` (a str is UTF-8 encoded first)."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return np.frombuffer(data, dtype=np.uint8)

    def encode_batch(self, texts: Sequence[bytes | str], names: Sequence[str] | None = None) -> list[np.ndarray]:
        """The ids of each text (``names`` is accepted for the interface's sake: bytes never fail)."""
        return [self.encode(text) for text in texts]

    def decode(self, ids) -> bytes:
        ids = _ids(ids)
        if ids.size and (ids.min() < 0 or ids.max() > 255):
            raise ValueError(f"ids must be in [0, 255] for the bytes tokenizer, got values in "
                             f"[{ids.min()}, {ids.max()}]")
        return ids.astype(np.uint8).tobytes()

    def token_byte_lengths(self) -> np.ndarray:
        return np.ones(256, dtype=np.int64)

    def save(self, folder: Path) -> None:
        """Nothing to save: the bytes tokenizer has no parameters."""
        return None

    def __repr__(self) -> str:
        return "ByteTokenizer()"


def byte_level_characters() -> dict[int, str]:
    """The character that byte-level BPE writes for each byte (GPT-2's table, which ``tokenizers`` uses).

    Printable Latin-1 bytes stand for themselves; the others (controls, space, a few more)
    take the characters from U+0100 on, in byte order, so no token holds whitespace.

    Example:
        >>> table = byte_level_characters()
        >>> table[ord("a")], table[ord(" ")], table[ord("\\n")]
        ('a', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    others = [byte for byte in range(256) if byte not in table]
    table.update({byte: chr(256 + index) for index, byte in enumerate(others)})
    return table


_BYTE_OF_CHARACTER = {character: byte for byte, character in byte_level_characters().items()}


class BPETokenizer:
    """A byte-level BPE from its ``tokenizer.json`` text; make one with ``train_bpe`` or ``BPETokenizer.load``."""

    kind = "bpe"

    def __init__(self, serialized: str):
        self._serialized = serialized
        hf = _hugging_face()
        try:
            description = json.loads(serialized)
            self._tokenizer = hf.Tokenizer.from_str(serialized)
        except Exception as error:  # tokenizers raises its own exception types
            raise ValueError(f"not a valid tokenizer.json: {error}; prepare the tokens again") from None
        model = (description.get("model") or {}).get("type") if isinstance(description, dict) else None
        if model != "BPE":
            raise ValueError(f"tokenizer.json must hold a BPE model, got {model!r}; prepare the tokens again with "
                             f"--tokenizer bpe")
        self.fingerprint = hashlib.sha256(serialized.encode("utf-8")).hexdigest()
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        if self.vocab_size > MAX_VOCAB_SIZE:
            raise ValueError(f"tokenizer.json holds {self.vocab_size} tokens, more than the {MAX_VOCAB_SIZE} this "
                             f"project accepts: it is not one prepare made; prepare the tokens again")
        self._token_bytes = self._bytes_of_tokens()
        self._lengths = np.array([len(token) for token in self._token_bytes], dtype=np.int64)

    def _bytes_of_tokens(self) -> list[bytes]:
        special = set(self._tokenizer.get_added_tokens_decoder())
        by_id: list[bytes] = []
        for index in range(self.vocab_size):
            token = self._tokenizer.id_to_token(index)
            if token is None:
                raise ValueError(f"tokenizer.json has no token with id {index} of {self.vocab_size}; "
                                 f"prepare the tokens again")
            if index in special:  # stands for no text
                by_id.append(b"")
                continue
            try:
                by_id.append(bytes(_BYTE_OF_CHARACTER[character] for character in token))
            except KeyError:
                raise ValueError(f"token {index} ({token!r}) of tokenizer.json is not byte-level: this is not a "
                                 f"byte-level BPE; prepare the tokens again with --tokenizer bpe") from None
        return by_id

    @classmethod
    def load(cls, folder: Path) -> BPETokenizer:
        """The tokenizer saved in ``folder/tokenizer.json``."""
        path = Path(folder) / BPE_FILE
        if not path.is_file():
            raise ValueError(f"folder {str(folder)!r} has no {BPE_FILE}; prepare the tokens again with "
                             f"--tokenizer bpe")
        return cls(path.read_bytes().decode("utf-8"))

    def save(self, folder: Path) -> Path:
        """Write ``folder/tokenizer.json`` (its sha256 is ``fingerprint``) and return its path."""
        path = Path(folder) / BPE_FILE
        path.write_bytes(self._serialized.encode("utf-8"))
        return path

    def encode(self, text: bytes | str) -> np.ndarray:
        """uint32 ids of ``text``; bytes must be UTF-8 (ValueError otherwise)."""
        return self.encode_batch([text], ["text"])[0]

    def encode_batch(self, texts: Sequence[bytes | str], names: Sequence[str] | None = None) -> list[np.ndarray]:
        """The ids of each text, encoded in parallel by ``tokenizers``; ``names`` label undecodable texts in errors."""
        names = [f"text {index}" for index in range(len(texts))] if names is None else names
        texts = [text if isinstance(text, str) else decode_utf8(text, name) for text, name in zip(texts, names)]
        # encode_batch_fast: the same ids as encode, without computing character offsets.
        return [np.asarray(encoding.ids, dtype=np.uint32) for encoding in self._tokenizer.encode_batch_fast(texts)]

    def decode(self, ids) -> bytes:
        """The exact bytes ``ids`` stand for (even when they split a UTF-8 character)."""
        ids = _ids(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"ids must be in [0, {self.vocab_size - 1}] for this tokenizer, got values in "
                             f"[{ids.min()}, {ids.max()}]")
        return b"".join(self._token_bytes[index] for index in ids.tolist())

    def token_byte_lengths(self) -> np.ndarray:
        return self._lengths.copy()

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, fingerprint={self.fingerprint[:12]!r})"


def train_bpe(texts: Iterable[bytes | str], vocab_size: int = DEFAULT_VOCAB_SIZES["bpe"], *,
              length: int | None = None) -> BPETokenizer:
    """A byte-level BPE of (up to) ``vocab_size`` tokens trained on ``texts``.

    texts: decoded as UTF-8 when bytes; an iterator is read once, so a corpus need not fit in
        memory. An exception it raises (an undecodable file) stops training and propagates.
    length: the number of texts, for ``tokenizers``' own bookkeeping; optional.
    Warns when the texts hold too few distinct pairs to reach ``vocab_size``.

    Example:
        >>> train_bpe(["abababab"] * 3, vocab_size=258).vocab_size
        258
    """
    vocab_size = resolve_vocab_size("bpe", vocab_size)
    hf = _hugging_face()
    decoders, models, pre_tokenizers, trainers = hf.decoders, hf.models, hf.pre_tokenizers, hf.trainers
    model = hf.Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    decoded = (text if isinstance(text, str) else decode_utf8(text, f"text {index}")
               for index, text in enumerate(texts))
    model.train_from_iterator(decoded, trainer, length=length)
    tokenizer = BPETokenizer(model.to_str())
    if tokenizer.vocab_size < vocab_size:
        warnings.warn(f"the training text gave only {tokenizer.vocab_size} BPE tokens of the vocab_size={vocab_size} "
                      f"asked: it has no more pairs to merge; use more text or a smaller vocab_size", stacklevel=2)
    return tokenizer


def load_tokenizer(kind: str, folder: Path | None = None) -> Tokenizer:
    """The tokenizer of ``kind``: bytes needs nothing, bpe reads ``folder/tokenizer.json``.

    Example:
        >>> load_tokenizer("bytes").vocab_size
        256
    """
    check_choice("tokenizer", kind, TOKENIZER_KINDS)
    if kind == "bytes":
        return ByteTokenizer()
    if folder is None:
        raise ValueError("folder must name the folder holding tokenizer.json for the bpe tokenizer, got None")
    return BPETokenizer.load(folder)
