"""find_samples: ImageFolder scans and (path, label) lists, and the errors before any work."""

from pathlib import Path

import pytest

from fastcore_ops.data.sources import find_samples

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
    ([(3, 0)], TypeError, "path must be a str or Path"),
    ([("a.jpg", "cat")], TypeError, "label must be a non-negative int"),
    ([("a.jpg", True)], TypeError, "label must be a non-negative int"),
    ([("a.jpg", -1)], TypeError, "label must be a non-negative int"),
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
