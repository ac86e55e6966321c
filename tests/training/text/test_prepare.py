"""Preparation: the files hold what meta.json says, a failure leaves nothing, the cache is reused, damage is caught."""

import hashlib
import json
import os

import numpy as np
import pytest

from fastcore_ops.training.text import tokens as tokens_module
from fastcore_ops.training.text.corpus import corpus_files
from fastcore_ops.training.text.prepare import main
from fastcore_ops.training.text.tokens import (FORMAT_VERSION, META_FILE, PreparedTokens, cache_key, load_prepared,
                                               prepare, prepared_tokens)
from fastcore_ops.training.text.tokenizers import BPE_FILE
from tests.training.text.conftest import write_tree

MARK = ".fastcore_ops-text_prepare"


def concatenated(folder, names) -> bytes:
    return b"".join((folder / name).read_bytes() for name in names)


def test_bytes_preparation_writes_what_meta_says(text_folder, tmp_path):
    folder = prepare(text_folder, tmp_path / "tokens", validation_every=4, progress=False)
    files = corpus_files(text_folder, validation_every=4)
    meta = json.loads((folder / META_FILE).read_text())
    assert sorted(os.listdir(folder)) == [MARK, "meta.json", "train.bin", "validation.bin"]
    assert meta["format_version"] == FORMAT_VERSION and meta["tokenizer"] == "bytes" and meta["vocab_size"] == 256
    assert meta["dtype"] == "uint16" and meta["tokenizer_fingerprint"] == "bytes" and meta["validation_every"] == 4
    assert meta["source_kind"] == "folder" and meta["source_root"] == str(text_folder.resolve())
    assert meta["source_fingerprint"] == files.fingerprint
    for split, names in (("train", files.train_files), ("validation", files.validation_files)):
        text = concatenated(text_folder, names)
        assert meta[split]["files"] == list(names)
        assert meta[split]["bytes"] == meta[split]["tokens"] == len(text)
        stored = np.fromfile(folder / f"{split}.bin", dtype=np.uint16)
        assert stored.tobytes() != text and bytes(stored.astype(np.uint8).tolist()) == text
    prepared = load_prepared(folder)
    assert isinstance(prepared, PreparedTokens) and prepared.vocab_size == 256
    assert isinstance(prepared.train, np.memmap) and not prepared.train.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        prepared.validation[0] = 1


def test_bpe_preparation_trains_on_training_files_only(text_folder, tmp_path):
    folder = prepare(text_folder, tmp_path / "tokens", tokenizer="bpe", vocab_size=320, validation_every=3,
                     progress=False)
    meta = json.loads((folder / META_FILE).read_text())
    prepared = load_prepared(folder)
    assert sorted(os.listdir(folder)) == [MARK, "meta.json", "tokenizer.json", "train.bin", "validation.bin"]
    assert meta["tokenizer"] == "bpe" and meta["vocab_size"] == 320 and meta["dtype"] == "uint16"
    assert meta["tokenizer_fingerprint"] == hashlib.sha256((folder / BPE_FILE).read_bytes()).hexdigest()
    lengths = prepared.tokenizer.token_byte_lengths()
    for split in ("train", "validation"):
        tokens = getattr(prepared, split)
        text = concatenated(text_folder, meta[split]["files"])
        assert tokens.size == meta[split]["tokens"] < meta[split]["bytes"] == len(text)
        assert prepared.tokenizer.decode(tokens) == text
        assert int(lengths[tokens].sum()) == len(text)
    # Trained on the training files alone: the same tokenizer as one trained on them directly.
    from fastcore_ops.training.text.tokenizers import train_bpe
    direct = train_bpe([(text_folder / name).read_text() for name in meta["train"]["files"]], vocab_size=320)
    assert direct.fingerprint == meta["tokenizer_fingerprint"]


def test_an_undecodable_file_stops_bpe_but_not_bytes(text_folder, tmp_path):
    write_tree(text_folder, {"src/zz_latin1.txt": "café".encode("latin-1")})  # the 13th file in path order
    # A training file stops the tokenizer's training, a validation file its encoding: both name it.
    for validation_every in (12, 13):
        with pytest.raises(ValueError, match=r"corpus/src/zz_latin1\.txt is not valid UTF-8 \(byte 3 is 0xe9.*"
                                             r"use the bytes tokenizer"):
            prepare(text_folder, tmp_path / "bpe", tokenizer="bpe", vocab_size=300,
                    validation_every=validation_every, progress=False)
        assert os.listdir(tmp_path) == ["corpus"]
    folder = prepare(text_folder, tmp_path / "bytes", validation_every=13, progress=False)
    assert load_prepared(folder).meta["validation"]["files"] == ["src/zz_latin1.txt"]


def test_a_failure_midway_leaves_no_destination_and_no_partial_folder(text_folder, tmp_path, monkeypatch):
    write_split = tokens_module._write_split
    written = []

    def fail_on_validation(files, names, tokenizer, dtype, path, progress, split):
        if split == "validation":
            assert (path.parent / "train.bin").stat().st_size > 0  # truly midway: train.bin is written
            raise RuntimeError("disk full")
        written.append(split)
        return write_split(files, names, tokenizer, dtype, path, progress, split)

    monkeypatch.setattr(tokens_module, "_write_split", fail_on_validation)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare(text_folder, tmp_path / "out" / "tokens", progress=False)
    assert written == ["train"]
    assert sorted(os.listdir(tmp_path)) == ["corpus"]  # no destination, partial folder, or the parent made for them


def test_a_killed_preparation_leaves_nothing_that_looks_complete(text_folder, tmp_path, monkeypatch):
    class Killed(BaseException):
        pass

    def killed(path, value):
        raise Killed

    # A kill cannot run the clean-up: simulate it by making the clean-up do nothing.
    monkeypatch.setattr(tokens_module.shutil, "rmtree", lambda *args, **kwargs: None)
    monkeypatch.setattr(tokens_module, "_write_json", killed)  # killed just before meta.json
    with pytest.raises(Killed):
        prepared_tokens(text_folder, tmp_path / "cache", "bytes", None, 5, progress=False)
    left = os.listdir(tmp_path / "cache")
    assert len(left) == 1 and left[0].startswith(".bytes-256-") and ".partial-" in left[0]
    monkeypatch.undo()
    # The next call prepares again, next to the leftover, and uses its own result.
    folder = prepared_tokens(text_folder, tmp_path / "cache", "bytes", None, 5, progress=False)
    assert folder.name.startswith("bytes-256-") and load_prepared(folder).meta["validation_every"] == 5


def test_the_cache_reuses_a_folder_until_its_inputs_change(text_folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = prepared_tokens(text_folder, cache, "bytes", 256, 4, progress=False)
    files = corpus_files(text_folder, validation_every=4)
    assert first == cache / f"bytes-256-{cache_key(files.fingerprint, 'bytes', 256, 4)}"
    calls = []
    monkeypatch.setattr(tokens_module, "_prepare", lambda *args, **options: calls.append(args) or cache / "new")
    assert prepared_tokens(text_folder, cache, "bytes", None, 4, progress=False) == first
    assert calls == []  # reused without preparing
    assert prepared_tokens(text_folder, cache, "bytes", None, 5, progress=False) == cache / "new"
    assert prepared_tokens(text_folder, cache, "bpe", 300, 4, progress=False) == cache / "new"
    (text_folder / files.train_files[0]).write_text("changed text")
    assert prepared_tokens(text_folder, cache, "bytes", None, 4, progress=False) == cache / "new"
    assert len(calls) == 3


def test_a_cache_folder_of_someone_else_is_refused_and_left_alone(text_folder, tmp_path):
    files = corpus_files(text_folder, validation_every=4)
    stranger = write_tree(tmp_path / "cache" / f"bytes-256-{cache_key(files.fingerprint, 'bytes', 256, 4)}",
                          {"notes.txt": b"mine"})
    with pytest.raises(ValueError, match="holds no meta.json, and files that prepare did not write .*move them away"):
        prepared_tokens(text_folder, tmp_path / "cache", "bytes", None, 4, progress=False)
    assert os.listdir(tmp_path / "cache") == [stranger.name] and os.listdir(stranger) == ["notes.txt"]
    (stranger / "notes.txt").unlink()  # an empty folder of that name is taken
    assert load_prepared(prepared_tokens(text_folder, tmp_path / "cache", "bytes", None, 4, progress=False))


def test_truncated_or_mismatched_files_are_detected(text_folder, tmp_path):
    folder = prepare(text_folder, tmp_path / "tokens", tokenizer="bpe", vocab_size=300, validation_every=4,
                     progress=False)
    meta_text = (folder / META_FILE).read_text()
    tokens = json.loads(meta_text)["train"]["tokens"]
    with open(folder / "train.bin", "r+b") as handle:
        handle.truncate(2 * tokens - 2)
    with pytest.raises(ValueError, match=rf"train\.bin' holds {2 * tokens - 2} bytes, but meta\.json says "
                                         rf"{tokens} uint16 tokens \({2 * tokens} bytes\): the file is truncated"):
        load_prepared(folder)
    with open(folder / "train.bin", "ab") as handle:
        handle.write(b"\0\0")
    assert load_prepared(folder).train.size == tokens
    (folder / "validation.bin").unlink()
    with pytest.raises(ValueError, match=r"validation\.bin' is missing"):
        load_prepared(folder)


def test_damaged_meta_or_tokenizer_is_detected(text_folder, tmp_path):
    folder = prepare(text_folder, tmp_path / "tokens", tokenizer="bpe", vocab_size=300, validation_every=4,
                     progress=False)
    meta = json.loads((folder / META_FILE).read_text())
    other = prepare(text_folder, tmp_path / "other", tokenizer="bpe", vocab_size=310, validation_every=4,
                    progress=False)
    (folder / BPE_FILE).write_bytes((other / BPE_FILE).read_bytes())
    with pytest.raises(ValueError, match="is not the one meta.json names"):
        load_prepared(folder)
    (folder / META_FILE).write_text(json.dumps({**meta, "dtype": "uint32"}))
    with pytest.raises(ValueError, match="says dtype 'uint32' for vocab_size 300"):
        load_prepared(folder)
    with pytest.raises(ValueError, match="has no meta.json: it is not a prepared folder"):
        load_prepared(tmp_path)


def test_bad_arguments_and_empty_splits_are_refused_before_writing(text_folder, tmp_path):
    write_tree(tmp_path / "taken", {"notes.txt": b"mine"})
    with pytest.raises(ValueError, match="taken holds files that python -m fastcore_ops.training.text.prepare did not write"):
        prepare(text_folder, tmp_path / "taken", progress=False)
    with pytest.raises(ValueError, match="vocab_size must be 256 or None for the bytes tokenizer"):
        prepare(text_folder, tmp_path / "a", vocab_size=4096, progress=False)
    with pytest.raises(ValueError, match="tokenizer must be one of 'bytes', 'bpe', got 'words'"):
        prepared_tokens(text_folder, tmp_path / "cache", "words", None, 10)
    write_tree(tmp_path / "empty", {"a.txt": b"text", "b.txt": b"", "c.txt": b"more", "d.txt": b""})
    with pytest.raises(ValueError, match=r"the validation files of .* \(2 file\(s\), the first 'b.txt'\) hold 0 bytes"):
        prepare(tmp_path / "empty", tmp_path / "b", validation_every=2, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["corpus", "empty", "taken"]


def test_the_command_line_prepares_reports_and_replaces_only_what_it_wrote(text_folder, tmp_path, capsys):
    assert main([str(text_folder), str(tmp_path / "cli"), "--tokenizer", "bpe", "--vocab-size", "300",
                 "--validation-every", "4", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    meta = load_prepared(tmp_path / "cli").meta
    assert "bpe tokenizer, 300 tokens (uint16)" in printed
    assert f"{meta['validation']['tokens']:,} tokens" in printed and "3 files" in printed
    # Its own folder, marked: prepared again in place, the user's file beside it kept, bpe's tokenizer.json gone.
    (tmp_path / "cli" / "notes.txt").write_text("mine")
    assert main([str(text_folder), str(tmp_path / "cli"), "--no-progress"]) == 0
    assert sorted(os.listdir(tmp_path / "cli")) == [MARK, "meta.json", "notes.txt", "train.bin", "validation.bin"]
    assert load_prepared(tmp_path / "cli").meta["tokenizer"] == "bytes"
    assert (tmp_path / "cli" / "notes.txt").read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["cli", "corpus"]
