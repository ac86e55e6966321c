"""The corpus: which files a folder holds (walked safely, in one order everywhere) and the split by file."""

import os

import pytest

from fastcore_ops.training.text.corpus import (TEXT_SUFFIXES, corpus_files, source_files, stdlib_root, text_files,
                                               walk_files)
from tests.training.text.conftest import write_tree


def test_folder_walk_keeps_text_files_sorted_and_skips_hidden_and_other_files(tmp_path):
    write_tree(tmp_path, {
        "zeta.txt": b"z", "Alpha.MD": b"a", "b/notes.rst": b"n", "b/data.json": b"{}", "b/c/code.py": b"p",
        "image.png": b"\x89PNG", "module.pyc": b"\0", "LICENSE": b"l", ".hidden.txt": b"h", ".git/HEAD.txt": b"g",
        "b/.cache/x.txt": b"c", "a-b.txt": b"d",
    })
    (tmp_path / "linked.txt").symlink_to(tmp_path / "zeta.txt")  # a link to a file counts as its file
    (tmp_path / "broken.txt").symlink_to(tmp_path / "nowhere.txt")
    assert text_files(tmp_path) == ["Alpha.MD", "a-b.txt", "b/c/code.py", "b/data.json", "b/notes.rst", "linked.txt",
                                    "zeta.txt"]
    assert text_files(tmp_path, suffixes=[".PY"]) == ["b/c/code.py"]


def test_a_symlink_loop_ends_and_each_real_directory_is_visited_once(tmp_path):
    write_tree(tmp_path, {"x.txt": b"x", "a/y.md": b"y", "a/b/z.py": b"z"})
    (tmp_path / "a" / "loop").symlink_to(tmp_path)            # back to the root
    (tmp_path / "a" / "b" / "up").symlink_to(tmp_path / "a")  # back to its parent
    (tmp_path / "zlink").symlink_to(tmp_path / "a" / "b")     # a second way into a/b, reached after it
    assert text_files(tmp_path) == ["a/b/z.py", "a/y.md", "x.txt"]
    # Reached first through a link (names sort before "a"), a/b and, through its "up" link, a
    # itself are listed under the link's path and not walked again under their own.
    (tmp_path / "0first").symlink_to(tmp_path / "a" / "b")
    assert text_files(tmp_path) == ["0first/up/y.md", "0first/z.py", "x.txt"]
    # Started inside the loop, a walk still lists every file once, under the first path reaching it.
    assert text_files(tmp_path / "a") == ["b/z.py", "loop/x.txt", "y.md"]
    assert text_files(tmp_path / "a" / "b") == ["up/loop/x.txt", "up/y.md", "z.py"]


def test_unreadable_directories_are_skipped_with_a_warning(tmp_path, monkeypatch):
    write_tree(tmp_path, {"a.txt": b"a", "locked/b.txt": b"b"})
    scandir = os.scandir

    def refuse_locked(path):  # chmod 0 would not stop root, who runs these tests in containers
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse_locked)
    with pytest.warns(UserWarning, match="skipped directory .*locked.*make it readable"):
        assert text_files(tmp_path) == ["a.txt"]


def test_validation_files_are_every_kth_file_and_never_in_training(text_folder):
    files = corpus_files(text_folder, validation_every=4)
    listed = text_files(text_folder)
    assert files.kind == "folder" and files.root == text_folder and len(listed) == 12
    assert files.validation_files == tuple(listed[3::4])
    assert files.train_files == tuple(name for index, name in enumerate(listed) if index % 4 != 3)
    assert set(files.train_files).isdisjoint(files.validation_files)
    assert files.train_bytes + files.validation_bytes == sum((text_folder / name).stat().st_size for name in listed)
    assert files.read(files.validation_files[0]) == (text_folder / files.validation_files[0]).read_bytes()


def test_the_fingerprint_follows_the_files_not_the_folder_name(text_folder, tmp_path):
    first = corpus_files(text_folder).fingerprint
    assert corpus_files(text_folder).fingerprint == first
    moved = text_folder.rename(tmp_path / "moved")
    assert corpus_files(moved).fingerprint == first
    name = moved / text_files(moved)[0]
    name.write_bytes(name.read_bytes() + b"!")
    assert corpus_files(moved).fingerprint != first
    (moved / "new.txt").write_bytes(b"new")
    assert len({first, corpus_files(moved).fingerprint}) == 2


def test_a_file_that_changes_after_listing_is_refused_when_read(text_folder):
    files = corpus_files(text_folder)
    (text_folder / files.train_files[0]).write_bytes(b"shorter")
    with pytest.raises(ValueError, match="changed while the corpus was read"):
        files.read(files.train_files[0])


def test_corpus_errors_name_the_problem_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"source must be an existing folder of text files, got '.*missing'.*"
                                         r"pass no source"):
        corpus_files(tmp_path / "missing")
    write_tree(tmp_path / "binary", {"a.png": b"x", "b.bin": b"y", ".c.txt": b"z"})
    with pytest.raises(ValueError, match=r"holds no text files .*\.txt.*put text files in it"):
        corpus_files(tmp_path / "binary")
    write_tree(tmp_path / "one", {"only.txt": b"text"})
    with pytest.raises(ValueError, match=r"source '.*one' holds 1 text file\(s\); a split with validation_every=10 "
                                         r"needs at least 10 .*add files or lower validation_every"):
        corpus_files(tmp_path / "one")
    write_tree(tmp_path / "two", {"a.txt": b"a", "b.txt": b"b"})
    with pytest.raises(ValueError, match="holds 2 text file"):
        corpus_files(tmp_path / "two", validation_every=3)
    assert corpus_files(tmp_path / "two", validation_every=2).validation_files == ("b.txt",)
    with pytest.raises(ValueError, match="validation_every must be an int >= 2, got 1"):
        corpus_files(tmp_path / "two", validation_every=1)
    with pytest.raises(TypeError, match="source must be a folder path or None"):
        corpus_files(3)
    with pytest.raises(ValueError, match="root must be an existing directory"):
        walk_files(tmp_path / "missing", lambda name: True)


def test_the_default_corpus_is_the_standard_library_source():
    files = corpus_files(None, validation_every=10)
    listed = source_files(stdlib_root())
    assert files.kind == "stdlib" and files.root == stdlib_root()
    assert files.train_files + files.validation_files != tuple(listed)  # interleaved, not concatenated
    assert sorted(files.train_files + files.validation_files) == listed
    assert files.validation_files == tuple(listed[9::10])
    assert ".py" in TEXT_SUFFIXES and ".txt" in TEXT_SUFFIXES
