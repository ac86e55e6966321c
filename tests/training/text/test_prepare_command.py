"""``python -m fastcore_ops.training.text.prepare`` and the token cache: a refusal is exit 2 and one ``error:`` line, and
nothing the tool did not write is ever removed or replaced (the destination, its neighbours, the cache)."""

import errno
import os
import re
from pathlib import Path

import pytest

from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.tasks.language import prepare_text_data
from fastcore_ops.training.text import tokens as tokens_module
from fastcore_ops.training.text.corpus import corpus_files
from fastcore_ops.training.text.prepare import main
from fastcore_ops.training.text.tokens import cache_key, load_prepared, prepared_tokens, token_cache
from tests.training.text.conftest import write_tree


def snapshot(root: Path) -> dict:
    """Every path under ``root`` with its bytes (None for a folder): what a refused command leaves as it was."""
    tree = {}
    for folder, folders, files in os.walk(root):
        for name in folders:
            tree[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            tree[os.path.relpath(os.path.join(folder, name), root)] = Path(folder, name).read_bytes()
    return tree


def _only_denied(place: Path):
    """An os.access that says ``place`` is not writable (the tests run as root, whom permissions do not stop)."""
    real = os.access
    return lambda path, mode: Path(path) != place and real(path, mode)


def _setup(case: str, tmp: Path, text: Path, monkeypatch) -> list[str]:
    """The command line of a refused ``case``, with its files and environment in place."""
    destination = tmp / "out" / "tokens"  # its parent is missing too: neither may be left behind
    default = [str(text), str(destination), "--no-progress"]
    if case == "missing-source":
        return [str(tmp / "nowhere"), str(destination)]
    if case == "empty-source":
        (tmp / "empty").mkdir()
        return [str(tmp / "empty"), str(destination)]
    if case == "not-utf8-with-bpe":
        write_tree(text, {"src/zz_latin1.txt": "café".encode("latin-1")})
        return [*default, "--tokenizer", "bpe", "--vocab-size", "300"]
    if case == "validation-of-one-byte":
        write_tree(tmp / "short", {"a.txt": b"some text to train on " * 20, "b.txt": b"x"})
        return [str(tmp / "short"), str(destination), "--validation-every", "2"]
    if case == "destination-is-a-file":
        write_tree(tmp / "out", {"tokens": b"mine"})
    elif case == "destination-holds-a-strangers-file":
        write_tree(destination, {"notes.txt": b"mine"})
    elif case == "destination-under-a-file":
        (tmp / "out").write_bytes(b"mine")
    elif case == "destination-unwritable":
        monkeypatch.setattr(os, "access", _only_denied(tmp))
    elif case == "cache-is-a-file":
        (tmp / "cache").write_bytes(b"mine")
        monkeypatch.setenv("FASTCORE_OPS_CACHE", str(tmp / "cache"))
    elif case == "cache-unwritable":
        monkeypatch.setenv("FASTCORE_OPS_CACHE", str(tmp / "cache"))
        monkeypatch.setattr(os, "access", _only_denied(tmp))
    elif case == "disk-full-midway":
        def full(*args):
            raise OSError(errno.ENOSPC, "No space left on device", str(destination))
        monkeypatch.setattr(tokens_module, "_write_split", full)
    return default + {
        "vocab-size-not-an-int": ["--tokenizer", "bpe", "--vocab-size", "many"],
        "vocab-size-absurd": ["--tokenizer", "bpe", "--vocab-size", str(10**12)],
        "vocab-size-with-bytes": ["--vocab-size", "300"],
        "validation-every-one": ["--validation-every", "1"],
        "unknown-tokenizer": ["--tokenizer", "words"],
        "unknown-option": ["--frobnicate"],
    }.get(case, [])


REFUSALS = {
    "missing-source": "source must be an existing folder of text files, got '.*nowhere'; check the path",
    "empty-source": "source '.*empty' holds no text files .*; put text files in it",
    "not-utf8-with-bpe": r"zz_latin1\.txt is not valid UTF-8 .* use the bytes tokenizer",
    "validation-of-one-byte": r"the validation files of '.*short' \(1 file\(s\), the first 'b.txt'\) hold 1 bytes",
    "destination-is-a-file": r"out/tokens is a file, not a folder; pass a folder",
    "destination-holds-a-strangers-file": "out/tokens holds files that python -m fastcore_ops.training.text.prepare did not write",
    "destination-under-a-file": r"destination '.*out/tokens' cannot be written: .*out is a file, so no folder",
    "destination-unwritable": r"destination '.*out/tokens' cannot be written: .* is not writable by this user",
    "cache-is-a-file": r"FASTCORE_OPS_CACHE=.*cache cannot hold the token cache .*: .*cache is a file, so no folder "
                       r"can be made in it; point FASTCORE_OPS_CACHE at a folder you can write to",
    "cache-unwritable": r"FASTCORE_OPS_CACHE=.* is not writable by this user; point FASTCORE_OPS_CACHE at",
    "disk-full-midway": r"No space left on device: .*; check that .* writable, with free space, then run again",
    "vocab-size-not-an-int": r"argument --vocab-size: invalid int value: 'many'; see python -m fastcore_ops.training.text.prepare "
                             r"--help",
    "vocab-size-absurd": r"vocab_size must be an int in \[257, 1048576\], got 1000000000000",
    "vocab-size-with-bytes": "vocab_size must be 256 or None for the bytes tokenizer",
    "validation-every-one": "validation_every must be an int >= 2, got 1",
    "unknown-tokenizer": "--tokenizer words: no such tokenizer; known: ",
    "unknown-option": "unrecognized arguments: --frobnicate",
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refusal_is_one_error_line_and_exit_2_with_nothing_changed(case, text_folder, tmp_path, monkeypatch,
                                                                     capsys):
    argv = _setup(case, tmp_path, text_folder, monkeypatch)
    before = snapshot(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: ") and err.endswith("\n"), err
    assert re.search(REFUSALS[case], err), err
    assert snapshot(tmp_path) == before  # the destination absent, a file, or a stranger's folder still; no leftovers


@pytest.mark.parametrize("crash", [RuntimeError("a bug"), KeyboardInterrupt()], ids=["bug", "interrupted"])
def test_a_crash_midway_leaves_the_destination_as_it_was(crash, text_folder, tmp_path, monkeypatch):
    write_split = tokens_module._write_split

    def crash_on_validation(*args):
        if args[-1] == "validation":
            raise crash
        return write_split(*args)

    monkeypatch.setattr(tokens_module, "_write_split", crash_on_validation)
    (tmp_path / "empty").mkdir()
    for destination in (tmp_path / "empty", tmp_path / "new" / "tokens"):
        before = snapshot(tmp_path)
        with pytest.raises(type(crash)):
            main([str(text_folder), str(destination), "--no-progress"])
        assert snapshot(tmp_path) == before


def _stranger_files(prefix: str) -> dict:
    """Another user's files where a preparation writes: a note, a folder, and one named like a partial folder."""
    return {"notes.txt": b"mine", "keep/data.bin": b"\x01\x02", f".{prefix}.partial-1-deadbeef/train.bin": b"\x00" * 8}


def test_strangers_beside_and_in_the_destination_survive(text_folder, tmp_path, monkeypatch, capsys):
    strangers = write_tree(tmp_path / "out", _stranger_files("tokens"))
    before = snapshot(strangers)
    assert main([str(text_folder), str(strangers / "tokens"), "--no-progress"]) == 0
    monkeypatch.setattr(tokens_module, "_write_json", lambda *args: 1 / 0)  # fails once the bins are written
    with pytest.raises(ZeroDivisionError):
        main([str(text_folder), str(strangers / "tokens"), "--no-progress"])
    after = snapshot(strangers)
    assert {path: after[path] for path in before} == before
    assert load_prepared(strangers / "tokens").meta["tokenizer"] == "bytes"  # the first preparation, intact
    # Inside the destination: the command's own folder takes a note of the user's and keeps it.
    (strangers / "tokens" / "notes.txt").write_bytes(b"mine too")
    monkeypatch.undo()
    assert main([str(text_folder), str(strangers / "tokens"), "--no-progress"]) == 0
    assert (strangers / "tokens" / "notes.txt").read_bytes() == b"mine too"
    assert set(snapshot(strangers)) == {*after, "tokens/notes.txt"}  # no partial folder left beside it


def test_strangers_in_the_token_cache_survive(text_folder, tmp_path, monkeypatch):
    files = corpus_files(text_folder, validation_every=4)
    name = f"bytes-256-{cache_key(files.fingerprint, 'bytes', 256, 4)}"
    cache = write_tree(tmp_path / "cache", _stranger_files(name))
    before = snapshot(cache)
    monkeypatch.setattr(tokens_module, "_write_json", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        prepared_tokens(text_folder, cache, "bytes", None, 4, progress=False)
    assert snapshot(cache) == before
    monkeypatch.undo()
    folder = prepared_tokens(text_folder, cache, "bytes", None, 4, progress=False)
    assert folder.name == name and load_prepared(folder).meta["validation_every"] == 4
    after = snapshot(cache)
    assert {path: after[path] for path in before} == before
    assert set(after) - set(before) == {name, *(f"{name}/{file}" for file in os.listdir(folder))}


def test_the_token_cache_setting_is_checked_before_anything_is_written(text_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("FASTCORE_OPS_CACHE", str(tmp_path / "settings.txt"))
    (tmp_path / "settings.txt").write_text("mine")
    config = TrainConfig(task="language_model")
    with pytest.raises(ValueError, match=r"FASTCORE_OPS_CACHE=.*settings.txt cannot hold the token cache .*: .* is "
                                         r"a file, so no folder can be made in it; point FASTCORE_OPS_CACHE at a "
                                         r"folder you can write to, or unset it"):
        prepare_text_data(config, text_folder, progress=False)
    monkeypatch.setenv("FASTCORE_OPS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "access", _only_denied(tmp_path))
    with pytest.raises(ValueError, match=r"FASTCORE_OPS_CACHE=.* is not writable by this user"):
        prepare_text_data(config, text_folder, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["corpus", "settings.txt"]
    monkeypatch.undo()
    monkeypatch.delenv("FASTCORE_OPS_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "settings.txt"))  # unset: the default, under a home that is a file
    with pytest.raises(ValueError, match=r"the token cache .*settings.txt/.cache/fastcore_ops/tokens cannot be "
                                         r"written: .*; set FASTCORE_OPS_CACHE to a folder you can write to"):
        token_cache()
