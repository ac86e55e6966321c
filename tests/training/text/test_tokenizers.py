"""The tokenizers: byte-level BPE trained, saved and loaded alike, deterministic, and byte counts exact."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import pre_tokenizers

from fastcore_ops.training.text.tokenizers import (BPE_FILE, BPETokenizer, ByteTokenizer, Tokenizer,
                                                   byte_level_characters, decode_utf8, load_tokenizer,
                                                   resolve_vocab_size, train_bpe)
from tests.training.text.conftest import sample_text

ROOT = Path(__file__).resolve().parents[3]
TEXTS = [sample_text(seed, 400) for seed in range(8)]
SAMPLE = "naïve café: 日本 🙂 über\n\tdef f(x):\n        return [1, 2] \r\n\x00\x7f end"


@pytest.fixture(scope="module")
def bpe():
    return train_bpe(TEXTS, vocab_size=300)


def test_the_byte_level_table_is_the_one_tokenizers_uses():
    table = byte_level_characters()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    pieces = pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(SAMPLE)
    byte_of = {character: byte for byte, character in table.items()}
    assert bytes(byte_of[character] for piece, _ in pieces for character in piece) == SAMPLE.encode()


def test_bpe_saves_loads_and_round_trips_text(bpe, tmp_path):
    assert isinstance(bpe, Tokenizer) and bpe.kind == "bpe" and bpe.vocab_size == 300
    path = bpe.save(tmp_path)
    assert path == tmp_path / BPE_FILE
    assert bpe.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded = load_tokenizer("bpe", tmp_path)
    assert loaded.fingerprint == bpe.fingerprint and loaded.vocab_size == 300
    ids = bpe.encode(SAMPLE)
    assert ids.dtype == np.uint32 and len(ids) < len(SAMPLE.encode())  # merges learnt from similar text
    assert np.array_equal(loaded.encode(SAMPLE), ids) and np.array_equal(bpe.encode(SAMPLE.encode()), ids)
    assert loaded.decode(ids) == SAMPLE.encode()
    # Tokens that split a UTF-8 character still decode to its exact bytes.
    assert b"".join(loaded.decode([token]) for token in ids) == SAMPLE.encode()
    assert [a.tolist() for a in bpe.encode_batch(["a b", "日本"])] == [bpe.encode("a b").tolist(),
                                                                        bpe.encode("日本").tolist()]


def test_bpe_training_is_deterministic_in_and_across_processes(bpe, tmp_path):
    again = train_bpe(TEXTS, vocab_size=300)
    assert again.fingerprint == bpe.fingerprint
    # Another process, on one thread: the same file byte for byte.
    script = ("import sys; from tests.training.text.test_tokenizers import TEXTS; "
              "from fastcore_ops.training.text.tokenizers import train_bpe; "
              "train_bpe(TEXTS, vocab_size=300).save(sys.argv[1])")
    environment = dict(os.environ, RAYON_NUM_THREADS="1", PYTHONHASHSEED="123")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env=environment, check=True)
    assert hashlib.sha256((tmp_path / BPE_FILE).read_bytes()).hexdigest() == bpe.fingerprint
    # And different text gives a different tokenizer: the fingerprint does tell them apart.
    assert train_bpe(TEXTS[::-1][:4], vocab_size=300).fingerprint != bpe.fingerprint


@pytest.mark.parametrize("kind", ["bytes", "bpe"])
def test_token_byte_lengths_sum_to_the_text_bytes(kind, bpe):
    tokenizer = bpe if kind == "bpe" else ByteTokenizer()
    lengths = tokenizer.token_byte_lengths()
    assert lengths.shape == (tokenizer.vocab_size,) and lengths.dtype == np.int64
    for text in (SAMPLE, TEXTS[0], "x"):
        ids = tokenizer.encode(text)
        assert int(lengths[ids].sum()) == len(text.encode())
    if kind == "bpe":  # the 256 bytes stand for one byte each, merged tokens for more
        assert sorted(lengths[:256].tolist()) == [1] * 256 and lengths[256:].min() >= 2


def test_undecodable_text_names_its_source_and_the_fixes(bpe):
    with pytest.raises(ValueError, match=r"notes\.txt is not valid UTF-8 \(byte 3 is 0xe9.*convert the file.*"
                                         r"use the bytes tokenizer"):
        decode_utf8(b"caf\xe9 au lait", "notes.txt")
    with pytest.raises(ValueError, match=r"old\.txt is not valid UTF-8"):
        bpe.encode_batch([b"fine", b"\xff\xfe"], names=["new.txt", "old.txt"])
    with pytest.raises(ValueError, match=r"text 1 is not valid UTF-8"):
        train_bpe([b"fine", b"caf\xe9"], vocab_size=260)
    assert ByteTokenizer().encode(b"caf\xe9").tolist() == [99, 97, 102, 233]  # bytes never decode


def test_vocabulary_sizes_and_tokenizer_names_are_checked():
    assert resolve_vocab_size("bytes", 256) == 256 and resolve_vocab_size("bpe", 1000) == 1000
    with pytest.raises(ValueError, match=r"vocab_size must be 256 or None for the bytes tokenizer \(one token per "
                                         r"byte\), got 4096; drop it"):
        resolve_vocab_size("bytes", 4096)
    with pytest.raises(ValueError, match="vocab_size must be an int in \\[257, 1048576\\], got 256"):
        resolve_vocab_size("bpe", 256)
    with pytest.raises(ValueError, match="vocab_size must be an int in \\[257, 1048576\\], got 1048577"):
        resolve_vocab_size("bpe", 2**20 + 1)  # a typo, not a tokenizer
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        resolve_vocab_size("bpe", 4096.0)
    with pytest.raises(ValueError, match="tokenizer must be one of 'bytes', 'bpe', got 'char'"):
        load_tokenizer("char")


def test_a_small_text_warns_that_it_cannot_fill_the_vocabulary():
    with pytest.warns(UserWarning, match="gave only 25[0-9] BPE tokens of the vocab_size=4096"):
        tokenizer = train_bpe(["ab ab ab"], vocab_size=4096)
    assert tokenizer.vocab_size < 4096 and tokenizer.decode(tokenizer.encode("ab ab")) == b"ab ab"


def test_a_tokenizer_file_that_is_not_byte_level_bpe_is_refused(bpe, tmp_path):
    (tmp_path / BPE_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        BPETokenizer.load(tmp_path)
    with pytest.raises(ValueError, match="has no tokenizer.json"):
        BPETokenizer.load(tmp_path / "empty")
    ids = ByteTokenizer().encode("hé")
    with pytest.raises(ValueError, match=r"ids must be in \[0, 255\]"):
        ByteTokenizer().decode(np.append(ids, 256))
    assert ByteTokenizer().decode(ids) == "hé".encode()
