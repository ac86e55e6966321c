"""python -m fastcore_ops.data.datasets cifar10: CIFAR-10's python archive as the JPEG ImageFolder the recipes read.

The real archive is 163 MB and this machine has no network: the tests build one of the same layout with a few
images, and have torchvision check it against its own checksums, as it checks the published archive's.
"""

import hashlib
import io
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image
from torchvision.datasets import CIFAR10

from fastcore_ops.data import cifar10, datasets
from fastcore_ops.owned_folder import marker

from .conftest import CIFAR_TRAIN

PER_CLASS = {"train": 2, "test": 1}


def _batch(images: np.ndarray, labels: list[int]) -> bytes:
    """One batch file as the archive holds it: a pickled dict of the (N, 3072) channel-planar pixels and labels."""
    return pickle.dumps({"data": images.transpose(0, 3, 1, 2).reshape(len(images), -1), "labels": labels})


@pytest.fixture
def archive(tmp_path, monkeypatch):
    """A cifar-10-python.tar.gz of 2 training and 1 test image a class, the training ones spread over the five
    batches in a shuffled order, with torchvision's checksums and the command's counts set to it; the images and
    labels of each split, in the archive's order."""
    rng = np.random.default_rng(0)
    made = {}
    for split, count in PER_CLASS.items():
        labels = [int(label) for label in rng.permutation(np.repeat(np.arange(10), count))]
        images = rng.integers(0, 256, (len(labels), 32, 32, 3), dtype=np.uint8)
        images[:, :16, :16] = 128  # one flat 16 x 16 block (a JPEG MCU at 4:2:0), as photographs have
        made[split] = images, labels
    files = {"batches.meta": pickle.dumps({"label_names": list(cifar10.CIFAR10_CLASSES)})}
    train_images, train_labels = made["train"]
    for number, part in enumerate(np.array_split(np.arange(len(train_labels)), 5), 1):
        files[f"data_batch_{number}"] = _batch(train_images[part], [train_labels[i] for i in part])
    files["test_batch"] = _batch(*made["test"])
    path = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    md5 = {name: hashlib.md5(data).hexdigest() for name, data in files.items()}
    monkeypatch.setattr(CIFAR10, "tgz_md5", hashlib.md5(path.read_bytes()).hexdigest())
    monkeypatch.setattr(CIFAR10, "train_list", [[f"data_batch_{n}", md5[f"data_batch_{n}"]] for n in range(1, 6)])
    monkeypatch.setattr(CIFAR10, "test_list", [["test_batch", md5["test_batch"]]])
    monkeypatch.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": md5["batches.meta"]})
    monkeypatch.setattr(cifar10, "CIFAR10_PER_CLASS", PER_CLASS)
    return path, made


def test_the_archive_becomes_the_image_folder_in_its_order_and_is_checked(archive, tmp_path, capsys):
    path, made = archive
    out = tmp_path / "cifar10-jpeg"
    assert datasets.main(["cifar10", str(out), "--archive", str(path), "--no-progress"]) == 0
    assert "CIFAR-10 as JPEGs, checked" in capsys.readouterr().out
    for split, (images, labels) in made.items():
        seen = [0] * 10
        for image, label in zip(images, labels):
            file = out / split / cifar10.CIFAR10_CLASSES[label] / f"{seen[label]:04d}.jpg"
            seen[label] += 1
            assert file.read_bytes() == cifar10.jpeg_bytes(image)  # the archive's order, numbered within its class
            with Image.open(file) as decoded:
                assert decoded.info.get("progressive") is None and decoded.size == (32, 32)
                flat = np.asarray(decoded)[:12, :12].astype(int)  # away from the noise its upsampled chroma reaches
            assert np.abs(flat - 128).max() <= 2  # quality 75 keeps a flat block flat
    assert marker(out, "datasets").is_file()
    # Again into its own folder: the same files, nothing else added.
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert datasets.main(["cifar10", str(out), "--archive", str(path), "--no-progress"]) == 0
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_an_archive_that_is_not_the_published_one_is_refused_before_anything_is_written(archive, tmp_path, capsys):
    path, _ = archive
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(path.read_bytes()[:-10])
    out = tmp_path / "out"
    assert datasets.main(["cifar10", str(out), "--archive", str(damaged), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --archive") and "not the published cifar-10-python.tar.gz" in err
    assert err.count("\n") == 1 and not out.exists()


def test_a_folder_of_someone_elses_files_is_refused_and_kept(archive, tmp_path, capsys):
    path, _ = archive
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert datasets.main(["cifar10", str(out), "--archive", str(path)]) == 2
    assert "holds files that python -m fastcore_ops.data.datasets did not write" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_the_check_names_a_missing_or_foreign_image(tmp_path):
    for split, count in PER_CLASS.items():
        for name in cifar10.CIFAR10_CLASSES:
            (tmp_path / split / name).mkdir(parents=True)
            for number in range(count):
                (tmp_path / split / name / f"{number:04d}.jpg").write_bytes(
                    cifar10.jpeg_bytes(np.zeros((32, 32, 3), np.uint8)))
    cifar10.check_cifar10(tmp_path, PER_CLASS)
    Image.new("RGB", (16, 16)).save(tmp_path / "test" / "cat" / "0000.jpg", "JPEG")
    with pytest.raises(ValueError, match=r"test/cat/0000.jpg is a JPEG RGB \(16, 16\), not a 32 x 32 RGB JPEG"):
        cifar10.check_cifar10(tmp_path, PER_CLASS)
    (tmp_path / "train" / "dog" / "0001.jpg").unlink()
    with pytest.raises(ValueError, match=r"train/dog holds 1 files, not 2 named 0000.jpg to 0001.jpg"):
        cifar10.check_cifar10(tmp_path, PER_CLASS)


def test_it_encodes_as_the_projects_copy_was_encoded():
    """Quality 75's quantization tables and 4:2:0 chroma, as in ../shared/datasets/cifar10-jpeg."""
    from PIL import JpegImagePlugin

    with Image.open(CIFAR_TRAIN / "cat" / "0000.jpg") as shared:
        made = Image.open(io.BytesIO(cifar10.jpeg_bytes(np.asarray(shared.convert("RGB")))))
        assert made.quantization == shared.quantization
        assert JpegImagePlugin.get_sampling(made) == JpegImagePlugin.get_sampling(shared) == 2  # 4:2:0
