"""find_samples: ImageFolder scans and (path, label) lists, and the errors before any work."""

import multiprocessing
import os
import socket
import warnings
from pathlib import Path

import pytest

from fastcore_ops.data.sources import DatasetScanWarning, find_samples

from tests.hang_guard import HANG_GUARD_S

from .conftest import CIFAR_TRAIN


def test_image_folder_classes_are_sorted_folders_and_files_are_found_by_extension(make_tree):
    root = make_tree({
        "zebra": {"b.JPG": b"x", "a.jpeg": b"x", "notes.txt": b"x", ".hidden.jpg": b"x"},
        "ant": {"1.png": b"x", "0.Webp": b"x"},
    })
    (root / "ant" / "deeper").mkdir()
    (root / "ant" / "deeper" / "2.tif").write_bytes(b"x")
    samples, classes = find_samples(root)
    assert classes == ["ant", "zebra"]
    relative = [(str(Path(path).relative_to(root)), label) for path, label in samples]
    assert relative == [
        ("ant/0.Webp", 0), ("ant/1.png", 0), ("ant/deeper/2.tif", 0),
        ("zebra/a.jpeg", 1), ("zebra/b.JPG", 1),
    ]


def test_scanning_does_not_open_files(make_tree):
    # Broken files are found when read (by the backends), never at scan time.
    root = make_tree({"a": {"empty.jpg": b""}, "b": {"text.jpg": b"hello"}})
    samples, _ = find_samples(str(root))
    assert [label for _, label in samples] == [0, 1]


def test_real_dataset_scan_matches_its_layout():
    samples, classes = find_samples(CIFAR_TRAIN)
    assert len(classes) == 10 and classes[0] == "airplane"
    assert len(samples) == 50000
    assert samples[0] == (str(CIFAR_TRAIN / "airplane" / "0000.jpg"), 0)
    assert samples[-1][1] == 9


def test_missing_root_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_samples(tmp_path / "nowhere")


def test_root_that_is_a_file_is_rejected(tmp_path):
    (tmp_path / "file.jpg").write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        find_samples(tmp_path / "file.jpg")


def test_empty_root_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="no class sub-folders"):
        find_samples(tmp_path)


def test_loose_images_in_root_get_a_hint(tmp_path):
    (tmp_path / "0.jpg").write_bytes(b"x")
    with pytest.raises(ValueError, match="1 loose images"):
        find_samples(tmp_path)


def test_class_folder_without_images_is_named(make_tree):
    root = make_tree({"cat": {"0.jpg": b"x"}, "dog": {"readme.txt": b"x"}})
    with pytest.raises(ValueError, match="'dog'"):
        find_samples(root)


def test_no_images_at_all_is_rejected(make_tree):
    root = make_tree({"cat": {"a.txt": b"x"}, "dog": {"b.csv": b"x"}})
    with pytest.raises(ValueError, match="no images in any of its 2 class folders"):
        find_samples(root)


def test_pairs_are_kept_in_order_with_their_labels(make_tree):
    root = make_tree({"c": {"a.jpg": b"x", "b.jpg": b"x"}})
    pairs = [(root / "c" / "b.jpg", 4), (str(root / "c" / "a.jpg"), 1)]
    samples, classes = find_samples(pairs)
    assert samples == [(str(root / "c" / "b.jpg"), 4), (str(root / "c" / "a.jpg"), 1)]
    assert classes == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize("pairs, error, message", [
    ([], ValueError, "empty list"),
    ([("a.jpg",)], TypeError, r"source\[0\] must be a \(path, label\) pair"),
    ([(3, 0)], TypeError, "path must be a str, a Path or a ShardMember"),
    ([("a.jpg", "cat")], TypeError, "label must be an int >= 0, got str 'cat'"),
    ([("a.jpg", True)], TypeError, "label must be an int >= 0, got bool True"),
    ([("a.jpg", -1)], ValueError, "label must be an int >= 0, got -1"),
])
def test_bad_pairs_are_rejected(pairs, error, message):
    with pytest.raises(error, match=message):
        find_samples(pairs)


def test_pairs_with_missing_files_name_them(make_tree):
    root = make_tree({"c": {"a.jpg": b"x"}})
    with pytest.raises(FileNotFoundError, match="1 file.*gone.jpg"):
        find_samples([(root / "c" / "a.jpg", 0), (root / "c" / "gone.jpg", 0)])


def test_other_source_types_are_rejected():
    with pytest.raises(TypeError, match="ImageFolder root"):
        find_samples(42)


def _scan_warnings(root):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        samples, classes = find_samples(root)
    return samples, classes, [str(w.message) for w in caught if issubclass(w.category, DatasetScanWarning)]


def _count_in_child(root, results):
    warnings.simplefilter("ignore")
    results.put(len(find_samples(root)[0]))


def _scan_in_subprocess(root, seconds=HANG_GUARD_S):
    # A loop that is followed would never end: scan in a forked child that a timeout can stop.
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_count_in_child, args=(root, results))
    child.start()
    child.join(seconds)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"the scan of {root} did not finish in {seconds} s")
    return results.get(timeout=5)


def test_a_symlink_loop_ends_and_lists_each_image_once(make_tree):
    root = make_tree({"cls": {"0.jpg": b"x"}, "other": {"1.jpg": b"x"}})
    (root / "cls" / "a").mkdir()
    (root / "cls" / "a" / "2.jpg").write_bytes(b"x")
    # cls/a/self -> ../a is an endless path; with a second such link, followed links make 2**40 paths.
    (root / "cls" / "a" / "self").symlink_to("../a")
    (root / "cls" / "a" / "twin").symlink_to("../a")
    assert _scan_in_subprocess(root) == 3
    samples, _, messages = _scan_warnings(root)
    assert sorted(Path(path).name for path, _ in samples) == ["0.jpg", "1.jpg", "2.jpg"]
    assert len(messages) == 2 and all("already covers" in message for message in messages)
    assert "cls/a/self' -> '../a'" in messages[0] and "cls/a/twin' -> '../a'" in messages[1]


@pytest.mark.parametrize("target", [".", "..", "../../other"], ids=["own-folder", "ancestor", "other-class"])
def test_a_link_back_to_a_visited_folder_is_reported_not_followed(make_tree, target):
    root = make_tree({"cls": {"0.jpg": b"x"}, "other": {"1.jpg": b"x"}})
    (root / "cls" / "sub").mkdir()
    (root / "cls" / "sub" / "link").symlink_to(target)
    samples, _, messages = _scan_warnings(root)
    assert [(Path(path).name, label) for path, label in samples] == [("0.jpg", 0), ("1.jpg", 1)]
    assert len(messages) == 1
    assert f"cls/sub/link' -> '{target}'" in messages[0] and "not follow" in messages[0]


def test_a_linked_folder_outside_the_tree_is_followed(make_tree, tmp_path):
    root = make_tree({"cls": {"0.jpg": b"x"}})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "1.jpg").write_bytes(b"x")
    (root / "cls" / "linked").symlink_to(tmp_path / "elsewhere")
    samples, _, messages = _scan_warnings(root)
    assert [Path(path).name for path, _ in samples] == ["0.jpg", "1.jpg"] and messages == []


def _make_unlistable(folder, monkeypatch):
    """Make ``folder`` fail to list: chmod 000, or, as root (who reads it anyway), a failing os.scandir."""
    folder.chmod(0)
    if os.access(folder, os.R_OK):
        real_scandir = os.scandir

        def scandir(path="."):
            if os.fspath(path) == str(folder):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", scandir)


def test_a_subfolder_that_cannot_be_listed_is_reported_with_the_os_error(make_tree, monkeypatch):
    root = make_tree({"cls": {"0.jpg": b"x"}, "other": {"1.jpg": b"x"}})
    private = root / "cls" / "private"
    private.mkdir()
    (private / "2.jpg").write_bytes(b"x")
    _make_unlistable(private, monkeypatch)
    try:
        samples, _, messages = _scan_warnings(root)
    finally:
        private.chmod(0o755)
    assert [Path(path).name for path, _ in samples] == ["0.jpg", "1.jpg"]
    assert len(messages) == 1
    assert "could not list folder" in messages[0] and "cls/private" in messages[0] and "Permission denied" in messages[0]


def test_a_class_folder_that_cannot_be_listed_is_an_error_naming_it(make_tree, monkeypatch):
    root = make_tree({"cls": {"0.jpg": b"x"}, "other": {"1.jpg": b"x"}})
    _make_unlistable(root / "other", monkeypatch)
    try:
        with pytest.warns(DatasetScanWarning, match="could not list folder .*other"):
            with pytest.raises(ValueError, match="class folder.*'other'"):
                find_samples(root)
    finally:
        (root / "other").chmod(0o755)


def test_a_pipe_a_socket_or_a_dead_link_named_like_an_image_is_left_out_and_named(make_tree, tmp_path):
    root = make_tree({"cls": {"0.jpg": b"x"}, "other": {"1.jpg": b"x"}})
    os.mkfifo(root / "cls" / "pipe.jpg")
    (root / "cls" / "to_pipe.jpg").symlink_to(root / "cls" / "pipe.jpg")  # links are followed: to what they lead
    (root / "other" / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / "other" / "s.png"))
        samples, _, messages = _scan_warnings(root)
        with pytest.raises(FileNotFoundError, match="not regular files.*pipe.jpg"):
            find_samples([(root / "cls" / "0.jpg", 0), (root / "cls" / "pipe.jpg", 0)])
    assert [Path(path).name for path, _ in samples] == ["0.jpg", "1.jpg"]
    expected = {"cls/pipe.jpg": "a named pipe", "cls/to_pipe.jpg": "a named pipe", "other/gone.jpg": "a link to a "
                "missing file", "other/s.png": "a socket"}
    assert len(messages) == len(expected)
    for name, what in expected.items():
        assert any(f"{name}': it is {what}" in message for message in messages), (name, messages)
