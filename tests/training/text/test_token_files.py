"""A prepared folder is untrusted input: meta.json's every field, each token file's size and ids checked on opening."""

import json
import os
import shutil

import numpy as np
import pytest

from fastcore_ops.training.text import tokens as tokens_module
from fastcore_ops.training.text.tokens import META_FILE, largest_token_id, load_prepared, prepare


@pytest.fixture(scope="module")
def prepared_once(tmp_path_factory):
    """A bytes and a bpe preparation of a small corpus, made once: each test damages a copy."""
    from tests.training.text.conftest import sample_text, write_tree

    root = tmp_path_factory.mktemp("token-files")
    text = write_tree(root / "text", {f"f{i}.txt": sample_text(i, 80).encode() for i in range(8)})
    return {kind: prepare(text, root / kind, tokenizer=kind, vocab_size=300 if kind == "bpe" else None,
                          validation_every=4, progress=False) for kind in ("bytes", "bpe")}


@pytest.fixture
def copy_of(prepared_once, tmp_path):
    return lambda kind: shutil.copytree(prepared_once[kind], tmp_path / kind)


def _rewrite_meta(folder, change):
    meta = json.loads((folder / META_FILE).read_text())
    (folder / META_FILE).write_text(json.dumps(change(meta)))


def _without(table, *path):
    *parents, last = path
    for key in parents:
        table = table[key]
    del table[last]


def _set(path, value):
    def change(meta):
        table = meta
        for key in path[:-1]:
            table = table[key]
        table[path[-1]] = value
        return meta
    return change


REQUIRED = ("format_version", "tokenizer", "vocab_size", "dtype", "tokenizer_fingerprint", "validation_every",
            "source_kind", "source_root", "source_fingerprint", "train", "validation")


@pytest.mark.parametrize("field", [*REQUIRED, "train.tokens", "validation.bytes", "validation.files"])
def test_a_missing_field_of_meta_json_is_named(field, copy_of):
    folder = copy_of("bytes")
    _rewrite_meta(folder, lambda meta: _without(meta, *field.split(".")) or meta)
    with pytest.raises(ValueError, match=rf"meta\.json' lacks the field '{field}'; delete the folder and prepare"):
        load_prepared(folder)


@pytest.mark.parametrize("kind, path, value, message", [
    ("bytes", ["format_version"], 99, "has format_version 99, this code reads 1"),
    ("bytes", ["format_version"], "1", "field 'format_version' must be an int, got str '1'"),
    ("bytes", ["tokenizer"], "pickle", "field 'tokenizer' must be one of 'bytes', 'bpe', got 'pickle'"),
    ("bytes", ["vocab_size"], True, "field 'vocab_size' must be an int in \\[256, 256\\], got bool True"),
    ("bytes", ["vocab_size"], 257, "field 'vocab_size' must be an int in \\[256, 256\\], got 257"),
    ("bpe", ["vocab_size"], 2**40, "field 'vocab_size' must be an int in \\[256, 1048576\\], got 1099511627776"),
    ("bpe", ["vocab_size"], -3, "field 'vocab_size' must be an int in \\[256, 1048576\\], got -3"),
    ("bpe", ["vocab_size"], 300.0, "field 'vocab_size' must be an int in \\[256, 1048576\\], got float 300.0"),
    ("bytes", ["dtype"], "float32", "field 'dtype' must be one of 'uint16', 'uint32', got 'float32'"),
    ("bytes", ["dtype"], "O", "field 'dtype' must be one of 'uint16', 'uint32', got 'O'"),
    ("bytes", ["dtype"], "uint32", "says dtype 'uint32' for vocab_size 256, expected 'uint16'"),
    ("bytes", ["tokenizer_fingerprint"], None, "field 'tokenizer_fingerprint' must be a str, got NoneType None"),
    ("bytes", ["source_kind"], "url", "field 'source_kind' must be one of 'stdlib', 'folder', got 'url'"),
    ("bytes", ["validation_every"], 1, "field 'validation_every' must be an int >= 2, got 1"),
    ("bytes", ["train"], [1, 2], "field 'train' must be a JSON object, got list"),
    ("bytes", ["train", "tokens"], "160", "field 'train.tokens' must be an int >= 1, got str '160'"),
    ("bytes", ["validation", "tokens"], 0, "field 'validation.tokens' must be an int >= 1, got 0"),
    ("bytes", ["validation", "bytes"], -1, "field 'validation.bytes' must be an int >= 0, got -1"),
    ("bytes", ["validation", "files"], "../../etc", "field 'validation.files' must be a list of file names"),
])
def test_a_field_of_meta_json_of_the_wrong_type_or_value_is_named(kind, path, value, message, copy_of):
    folder = copy_of(kind)
    _rewrite_meta(folder, _set(path, value))
    with pytest.raises(ValueError, match=rf"meta\.json' {message}.*; delete the folder and prepare again"):
        load_prepared(folder)


@pytest.mark.parametrize("content, message", [
    (b"{", "is not valid JSON"),
    (b"\xff\xfe", "is not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "is not valid JSON"),  # nested past the interpreter's stack
    (b"[1, 2]", "holds a JSON list, not an object of fields"),
])
def test_a_meta_json_that_is_not_a_json_object_is_refused(content, message, copy_of):
    folder = copy_of("bytes")
    (folder / META_FILE).write_bytes(content)
    with pytest.raises(ValueError, match=f"meta.json' {message}"):
        load_prepared(folder)


def test_the_paths_meta_json_records_are_never_opened(copy_of):
    folder = copy_of("bytes")
    expected = load_prepared(folder).train.tolist()
    _rewrite_meta(folder, lambda meta: {**meta, "source_root": "/nonexistent", "train": {
        **meta["train"], "files": ["../../../etc/shadow", "/dev/zero"]}})
    assert load_prepared(folder).train.tolist() == expected


@pytest.mark.parametrize("kind, split, largest", [("bytes", "train", 256), ("bytes", "validation", 65535),
                                                  ("bpe", "train", 300), ("bpe", "validation", 4000)])
def test_token_ids_at_or_above_the_vocabulary_size_are_refused_on_opening(kind, split, largest, copy_of):
    folder = copy_of(kind)
    tokens = np.fromfile(folder / f"{split}.bin", dtype=np.uint16)
    tokens[len(tokens) // 2] = largest
    tokens.tofile(folder / f"{split}.bin")
    vocab_size = 256 if kind == "bytes" else 300
    with pytest.raises(ValueError, match=rf"{split}\.bin' holds token id {largest}, but the vocabulary has "
                                         rf"{vocab_size} tokens \(ids 0 to {vocab_size - 1}\).*prepare again"):
        load_prepared(folder)
    tokens[len(tokens) // 2] = vocab_size - 1  # the largest id there is: accepted
    tokens.tofile(folder / f"{split}.bin")
    assert load_prepared(folder).vocab_size == vocab_size


def test_a_token_file_of_a_partial_token_is_refused(copy_of):
    folder = copy_of("bytes")
    with open(folder / "validation.bin", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ValueError, match=r"validation\.bin' holds \d+ bytes, not a whole number of uint16 tokens "
                                         r"\(2 bytes each\)"):
        load_prepared(folder)
    (folder / "validation.bin").unlink()
    (folder / "validation.bin").mkdir()
    with pytest.raises(ValueError, match=r"validation\.bin' is missing, but meta\.json says"):
        load_prepared(folder)


def test_each_token_file_is_scanned_once_per_version(copy_of, monkeypatch):
    folder = copy_of("bytes")
    scanned = []
    scan = tokens_module.largest_token_id
    monkeypatch.setattr(tokens_module, "largest_token_id",
                        lambda path, dtype: scanned.append(path) or scan(path, dtype))
    for _ in range(3):
        load_prepared(folder)
    assert sorted(scanned) == [str(folder / "train.bin"), str(folder / "validation.bin")]
    info = (folder / "train.bin").stat()
    os.utime(folder / "train.bin", ns=(info.st_atime_ns, info.st_mtime_ns + 1000))  # a new version: scanned again
    load_prepared(folder)
    assert scanned[2:] == [str(folder / "train.bin")]


@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
def test_the_chunked_scan_finds_the_largest_id(dtype, tmp_path):
    values = np.random.default_rng(3).integers(0, 60_000, 10_001).astype(dtype)
    values.tofile(tmp_path / "t.bin")
    for chunk_bytes in (6, 4096, 1 << 20):
        assert largest_token_id(tmp_path / "t.bin", dtype, chunk_bytes=chunk_bytes) == values.max()
    (tmp_path / "empty.bin").write_bytes(b"")
    assert largest_token_id(tmp_path / "empty.bin", dtype) == -1
