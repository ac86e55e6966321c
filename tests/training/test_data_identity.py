"""A run's data fingerprint: a copy of the data (new modification times) resumes; an edit does not."""

import hashlib
import os
import shutil

import pytest

from fastcore_ops.data.sources import find_samples
from fastcore_ops.training.data_identity import image_fingerprint, same_data
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.run_folder import RunSettings, SavedRun


def _fingerprint(root):
    samples, _ = find_samples(root / "train")
    return image_fingerprint(root / "train", samples, root / "test")


def _later(root, seconds: int) -> None:
    """Every file under ``root`` written ``seconds`` after now, as a later copy's would be."""
    for path in root.rglob("*"):
        if path.is_file():
            stamp = path.stat().st_mtime + seconds
            os.utime(path, (stamp, stamp))


@pytest.fixture
def original(micro_cifar, tmp_path):
    root = tmp_path / "original"
    shutil.copytree(micro_cifar, root)
    return root


def test_a_copy_with_new_modification_times_is_the_same_data(original, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(original, copy, copy_function=shutil.copy)  # shutil.copy keeps no times
    _later(copy, 100)
    saved, now = _fingerprint(original), _fingerprint(copy)
    assert saved != now and same_data(saved, now)
    SavedRun(tmp_path / "run", TrainConfig(), RunSettings(data=saved), finished=False).check_same_inputs(
        RunSettings(data=now))


def test_an_image_edited_in_place_with_its_size_kept_is_other_data(original, tmp_path):
    saved = _fingerprint(original)
    image = sorted((original / "train").glob("*/*"))[3]
    image.write_bytes(bytes(reversed(image.read_bytes())))
    _later(image.parent, 100)  # even when its whole class folder was written again
    now = _fingerprint(original)
    assert not same_data(saved, now)
    with pytest.raises(ValueError, match="changed since it started \\(train: same size, other contents"):
        SavedRun(tmp_path / "run", TrainConfig(), RunSettings(data=saved), finished=False).check_same_inputs(
            RunSettings(data=now))


def test_a_copy_that_differs_in_an_image_it_reads_is_other_data(original, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(original, copy, copy_function=shutil.copy)
    image = sorted((copy / "test").glob("*/*"))[0]
    image.write_bytes(bytes(reversed(image.read_bytes())))
    _later(copy, 100)
    assert not same_data(_fingerprint(original), _fingerprint(copy))


def test_a_fingerprint_saved_before_contents_were_recorded_must_match_exactly(original, tmp_path):
    saved = {part: {key: value for key, value in entry.items() if key in ("files", "bytes", "sha256")}
             for part, entry in _fingerprint(original).items()}
    copy = tmp_path / "copy"
    shutil.copytree(original, copy, copy_function=shutil.copy)
    _later(copy, 100)
    assert not same_data(saved, _fingerprint(copy))


@pytest.mark.parametrize("part", [{"sha256": "a", "written": "soon"}, {"sha256": "a", "written": [1, 2.5]},
                                  {"sha256": "a", "contents": 7}, {"contents": "c"}])
def test_a_malformed_saved_fingerprint_is_refused(part):
    with pytest.raises(ValueError, match="data must map each part of the data to its fingerprint"):
        RunSettings(data={"train": part})


def test_the_fingerprint_digest_is_the_one_runs_saved_before_contents_were_recorded(original):
    """A run started before ``contents`` existed still resumes on its unchanged data: its ``sha256`` is kept."""
    samples, _ = find_samples(original / "train")
    digest = hashlib.sha256()
    for name, size, mtime in sorted((os.path.relpath(path, original / "train"), os.stat(path).st_size,
                                     os.stat(path).st_mtime_ns) for path, _ in samples):
        digest.update(f"{name}\t{size}\t{mtime}\n".encode())
    assert _fingerprint(original)["train"]["sha256"] == digest.hexdigest()
