"""``python -m fastcore_ops.training.train`` on image folders holding files it cannot use: a named pipe, broken images, nothing
but broken images."""

import json
import os
import warnings

import pytest

from fastcore_ops.data.loader import SkippedImagesWarning
from fastcore_ops.data.sources import DatasetScanWarning
from fastcore_ops.training.train import main
from tests.data.conftest import huge_png_header
from tests.training.conftest import link_cifar_subset
from tests.training.test_run_contract import TINY_IMAGES, refused, snapshot

# 20 training images and two broken ones, in batches of 2: every epoch meets both broken files.
TWO_EPOCHS = [*TINY_IMAGES, "--epochs", "2", "--set", "data.batch_size=2"]


@pytest.fixture(scope="module")
def run_among_bad_files(tmp_path_factory):
    """(data, out, warnings): two epochs on micro CIFAR-10 with a named pipe, a 0-byte JPEG and a PNG header
    claiming 60000x60000 pixels among the training images."""
    data = link_cifar_subset(tmp_path_factory.mktemp("bad-images"), train_per_class=2, test_per_class=1)
    os.mkfifo(data / "train" / "airplane" / "pipe.jpg")
    (data / "train" / "airplane" / "empty.jpg").write_bytes(b"")
    (data / "train" / "bird" / "huge.png").write_bytes(huge_png_header())
    out = data.parent / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*TWO_EPOCHS, "--data", str(data), "--out", str(out)]) == 0
    return data, out, caught


@pytest.mark.timeout(120)  # an opened named pipe waits for a writer forever: fail, do not hang
def test_a_named_pipe_among_the_training_images_is_named_never_opened(run_among_bad_files):
    _, _, caught = run_among_bad_files
    named = [str(w.message) for w in caught if issubclass(w.category, DatasetScanWarning)]
    assert named and all("train/airplane/pipe.jpg': it is a named pipe, not a regular file" in m for m in named)


@pytest.mark.timeout(120)
def test_every_skipped_file_is_named_in_each_epoch_the_last_included_and_listed_in_the_summary(run_among_bad_files):
    _, out, caught = run_among_bad_files
    messages = [str(w.message) for w in caught if issubclass(w.category, SkippedImagesWarning)]
    assert [message.split(":")[0] for message in messages] == ["epoch 0", "epoch 1"]
    for message in messages:
        assert "train/airplane/empty.jpg: empty file" in message
        assert "train/bird/huge.png: DecompressionBombError" in message
    skipped = json.loads((out / "summary.json").read_text())["skipped_files"]
    assert [entry["file"] for entry in skipped] == ["train/airplane/empty.jpg", "train/bird/huge.png"]
    assert skipped[0]["reason"] == "empty file" and skipped[1]["reason"].startswith("DecompressionBombError")


def test_a_run_whose_every_training_image_is_undecodable_is_refused_leaving_out_as_it_was(tmp_path, capsys):
    data = link_cifar_subset(tmp_path / "data", train_per_class=1, test_per_class=1)
    for image in (data / "train").glob("*/*"):
        image.unlink()
        image.write_bytes(b"")
    out = tmp_path / "runs" / "run"
    line = refused([*TINY_IMAGES, "--data", str(data), "--out", str(out)], capsys)
    assert line.startswith("error: no file of this epoch's 8 samples can be decoded")  # 10, in whole batches of 4
    assert "empty file" in line and line.rstrip().endswith("Replace them, or pass the folder that holds the images")
    assert snapshot(tmp_path / "runs") is None
