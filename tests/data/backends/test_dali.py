"""DaliBackend on the CPU: layout, labels and order, reproducible crops, the eval crop, bad files."""

import glob
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fastcore_ops.data.backends.crops import CropPlan
from fastcore_ops.data.backends.dali import DaliBackend, dali_available
from fastcore_ops.data.order import mix_seed
from tests.data.conftest import DATASETS, cut_inside_scan

pytestmark = pytest.mark.skipif(dali_available() is not None, reason=f"DALI unusable here: {dali_available()}")

CIFAR = sorted(glob.glob(str(DATASETS / "cifar10-jpeg/train/*/*.jpg")))
IMAGENET = sorted(glob.glob(str(DATASETS / "imagenet-sample/*/*.JPEG")))
COLORS = [(220, 30, 30), (30, 200, 40), (40, 50, 210), (230, 220, 40)]


def backend(**overrides):
    settings = dict(batch_size=4, train=True, image_size=24, device="cpu", seed=0, num_workers=2)
    return DaliBackend(**(settings | overrides))


def decode_all(dali, samples, epoch=0):
    return list(dali.batches(samples, epoch))


@pytest.fixture(scope="module")
def colored(tmp_path_factory):
    """Ten solid-color JPEGs of assorted sizes whose color names their label, in a mixed label order."""
    root = tmp_path_factory.mktemp("colored")
    samples = []
    for position, label in enumerate([2, 0, 3, 1, 1, 3, 0, 2, 2, 1]):
        path = root / f"{position:02d}.jpg"
        Image.new("RGB", (40 + 7 * position, 70 - 4 * position), COLORS[label]).save(path, quality=95)
        samples.append((str(path), label))
    return samples


@pytest.fixture(scope="module")
def photos():
    if len(CIFAR) < 12 or len(IMAGENET) < 3:
        pytest.fail("the shared test images under ../shared/datasets are missing")
    return [(path, position % 10) for position, path in enumerate(CIFAR[::500][:12])]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """Broken files made from a real photo, each with the words its skip reason must contain."""
    root = tmp_path_factory.mktemp("bad")
    good = root / "good.jpg"
    Image.open(IMAGENET[0]).convert("RGB").resize((48, 40)).save(good, quality=90)
    data = good.read_bytes()
    files = {
        "truncated.jpg": (data[: len(data) // 2], "truncated JPEG"),
        "empty.jpg": (b"", "empty file"),
        "text.jpg": (b"just some words, no pixels\n", "not an image"),
        "header.jpg": (b"\xff\xd8\xff\xe0" + bytes(64) + b"\xff\xd9", "unreadable image header"),
        # A frame that names quantization table 3, which the file never defines: the header
        # parses, so only the decoder can find out.
        "undecodable.jpg": (_with_undefined_quant_table(data), "DALI's decoder rejects it"),
    }
    for name, (content, _) in files.items():
        (root / name).write_bytes(content)
    files["missing.jpg"] = (None, "cannot read")
    return {str(root / name): words for name, (_, words) in files.items()}


def _with_undefined_quant_table(jpeg: bytes) -> bytes:
    start = jpeg.index(b"\xff\xc0")  # baseline frame header
    broken = bytearray(jpeg)
    broken[start + 2 + 2 + 6 + 2] = 3  # first component's quantization-table selector
    return bytes(broken)


def mean_colors(images):
    return images.float().mean(dim=(2, 3))


def test_batches_are_uint8_nchw_with_labels_in_sample_order(colored):
    batches = decode_all(backend(), colored)

    assert [len(batch.labels) for batch in batches] == [4, 4, 2]  # the last run is shorter
    for batch in batches:
        assert batch.images.dtype == torch.uint8 and batch.images.is_contiguous()
        assert batch.images.shape[1:] == (3, 24, 24) and batch.labels.dtype == torch.int64
        assert batch.skipped == []
    labels = torch.cat([batch.labels for batch in batches])
    assert labels.tolist() == [label for _, label in colored]
    colors = torch.tensor(COLORS, dtype=torch.float32)[labels]
    assert (torch.cat([mean_colors(batch.images) for batch in batches]) - colors).abs().max() < 6


def test_same_seed_and_epoch_give_the_same_crops_and_other_epochs_differ(photos):
    first = decode_all(backend(), photos, epoch=1)
    again = decode_all(backend(), photos, epoch=1)
    next_epoch = decode_all(backend(), photos, epoch=2)
    other_seed = decode_all(backend(seed=1), photos, epoch=1)

    for a, b in zip(first, again):
        assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    # Batches kept while iterating stay distinct: DALI's output buffers are not reused under them.
    assert not torch.equal(first[0].images, first[1].images)
    for other in (next_epoch, other_seed):
        pairs = [(a.images[i], b.images[i]) for a, b in zip(first, other) for i in range(len(a.labels))]
        changed = [not torch.equal(mine, theirs) for mine, theirs in pairs]
        assert sum(changed) >= len(photos) - 1


def test_training_crop_is_the_drawn_window_resized():
    """The decoded crop equals Pillow cropping the same window and resizing it (bilinear, antialiased)."""
    dali = backend(batch_size=3, image_size=48, crop_scale=(0.2, 0.6))
    samples = [(path, 0) for path in IMAGENET[:3]]
    (batch,) = decode_all(dali, samples, epoch=5)

    for position, (path, _) in enumerate(samples):
        image = Image.open(path).convert("RGB")
        box = CropPlan(48, train=True, scale=(0.2, 0.6)).box(*image.size, random.Random(mix_seed(0, 5, position)))
        expected = np.asarray(image.crop(box).resize((48, 48), Image.BILINEAR))
        decoded = batch.images[position].permute(1, 2, 0).numpy()
        assert np.abs(decoded.astype(float) - expected).mean() < 4


def test_eval_resizes_the_shorter_side_and_takes_the_center():
    dali = backend(batch_size=3, train=False, image_size=64, eval_crop_fraction=0.8)
    samples = [(path, 0) for path in IMAGENET[:3]]
    (batch,) = decode_all(dali, samples)

    for position, (path, _) in enumerate(samples):
        image = Image.open(path).convert("RGB")
        scale = 80 / min(image.size)
        resized = image.resize((round(image.width * scale), round(image.height * scale)), Image.BILINEAR)
        left, top = round((resized.width - 64) / 2), round((resized.height - 64) / 2)
        expected = np.asarray(resized.crop((left, top, left + 64, top + 64)))
        decoded = batch.images[position].permute(1, 2, 0).numpy()
        assert np.abs(decoded.astype(float) - expected).mean() < 4


def _write_variant(path, kind):
    """A real photo saved as ``kind``; returns the RGB pixels a correct decoder must produce."""
    photo = Image.open(CIFAR[7]).convert("RGB")  # 32x32
    if kind == "gray-jpeg":
        photo.convert("L").save(path, format="JPEG", quality=95)
    elif kind == "cmyk-jpeg":
        photo.convert("CMYK").save(path, format="JPEG", quality=95)
    elif kind == "rgb-png":
        photo.save(path, format="PNG")
    elif kind == "palette-png":
        photo.convert("P").save(path, format="PNG")
    elif kind == "rgba-png":
        photo.convert("RGBA").save(path, format="PNG")
    elif kind == "16bit-png":
        # Pillow's own convert("RGB") clips 16-bit values to 255, so the reference is the 8-bit source.
        gray = np.asarray(photo.convert("L")).astype(np.uint16)
        Image.fromarray(gray * 257).save(path, format="PNG")
        return np.repeat(gray[..., None].astype(np.uint8), 3, axis=2)
    return np.asarray(Image.open(path).convert("RGB"))


@pytest.mark.parametrize("kind", ["gray-jpeg", "cmyk-jpeg", "rgb-png", "palette-png", "rgba-png", "16bit-png"])
def test_other_encodings_decode_to_the_same_rgb_as_pillow(tmp_path, kind):
    path = tmp_path / f"{kind}.img"
    expected = _write_variant(path, kind)
    # Eval at the native size with no margin: resize and crop are identities, pixels compare 1:1.
    dali = backend(batch_size=2, train=False, image_size=32, eval_crop_fraction=1.0)
    (batch,) = decode_all(dali, [(str(path), 7), (CIFAR[0], 3)])

    assert batch.labels.tolist() == [7, 3] and batch.skipped == []
    decoded = batch.images[0].permute(1, 2, 0).numpy()
    assert np.abs(decoded.astype(float) - expected).mean() < 1.5


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_bad_files_are_skipped_named_and_shift_no_label(colored, bad_files, train):
    bad = list(bad_files)
    # Bad files sit among good ones, the undecodable JPEG mid-run so DALI fails inside a batch.
    samples = [colored[0], (bad[0], 9), colored[1], (bad[4], 9)]
    samples += [colored[2], (bad[1], 9), (bad[2], 9), (bad[3], 9), colored[3], colored[4]]
    batches = decode_all(backend(train=train), samples)

    assert len(batches) == 3
    expected_skips = [[bad[0], bad[4]], [bad[1], bad[2], bad[3]], []]
    for batch, paths in zip(batches, expected_skips):
        assert [entry.path for entry in batch.skipped] == paths
        for entry, path in zip(batch.skipped, paths):
            assert bad_files[path] in entry.reason
    labels = torch.cat([batch.labels for batch in batches])
    if train:
        # Stand-ins, the next decodable samples after each run (wrapping around), fill the batches.
        assert [batch.labels.tolist() for batch in batches] == [[2, 0, 3, 1], [3, 1, 1, 2], [1, 1]]
    else:
        assert labels.tolist() == [label for _, label in colored[:5]]
    colors = torch.tensor(COLORS, dtype=torch.float32)[labels]
    assert (torch.cat([mean_colors(batch.images) for batch in batches]) - colors).abs().max() < 6


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_a_jpeg_cut_inside_its_scan_is_skipped_and_named(colored, tmp_path, train):
    # DALI decodes such a file with a grey band and only prints libjpeg's warning.
    cut = tmp_path / "cut_scan.jpg"
    cut.write_bytes(cut_inside_scan(Path(IMAGENET[0]).read_bytes()))
    (batch,) = decode_all(backend(train=train), [colored[0], (str(cut), 9), colored[1]])
    assert list(map(str, batch.skipped)) == [
        f"{cut}: truncated JPEG (the decoder reports: Corrupt JPEG data: premature end of data segment)"]
    assert batch.labels.tolist() == ([2, 0, 2] if train else [2, 0])  # training: the first sample stands in


def test_skipping_a_file_leaves_the_other_crops_unchanged(photos, bad_files):
    clean = torch.cat([batch.images for batch in decode_all(backend(), photos)])
    with_hole = list(photos)
    with_hole[5] = (next(iter(bad_files)), 0)
    holed = torch.cat([batch.images for batch in decode_all(backend(), with_hole)])

    # Batch 1 is photos 4, 6, 7 and a stand-in for photo 5: photo 8 with a crop of its own.
    assert torch.equal(holed[:5], clean[:5]) and torch.equal(holed[5:7], clean[6:8]) and torch.equal(holed[8:], clean[8:])
    assert not torch.equal(holed[7], clean[8])


def test_a_run_of_only_bad_files_yields_an_empty_batch_in_its_place(colored, bad_files):
    bad = list(bad_files)
    samples = [colored[0], colored[1], (bad[0], 9), (bad[5], 9), colored[2]]
    batches = decode_all(backend(batch_size=2, train=False), samples)

    assert [batch.labels.tolist() for batch in batches] == [[2, 0], [], [3]]
    assert batches[1].images.shape == (0, 3, 24, 24) and batches[1].images.dtype == torch.uint8
    assert list(map(str, batches[1].skipped)) == [
        f"{bad[0]}: truncated JPEG (no end-of-image marker)",
        f"{bad[5]}: cannot read (No such file or directory)",
    ]


def test_without_dali_the_module_imports_and_names_the_install_command():
    code = (
        "import sys; sys.modules['nvidia.dali'] = None\n"
        "from fastcore_ops.data.backends.dali import dali_available\n"
        "print(dali_available())"
    )
    repository = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repository)
    assert "pip install nvidia-dali-cuda130" in result.stdout
