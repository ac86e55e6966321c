"""The pil backend: crop geometry, decoding every image mode, bad files, batches and Pillow-SIMD detection."""

import importlib.metadata
import io
import multiprocessing
import os
import random
import warnings

import numpy as np
import PIL
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from fastcore_ops.data.backends import pil as pil_backend
from fastcore_ops.data.backends.crops import CropPlan, crop_box, crop_rng
from fastcore_ops.data.backends.pil import PilBackend, UnusableImage, decode_crop
from fastcore_ops.data.sources import find_samples
from tests.data.conftest import class_of, jpeg_bytes, png_bytes


def _mean_abs_diff(a, b) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float32) - np.asarray(b, dtype=np.float32)).mean())


def test_eval_crop_matches_torchvision_resize_and_center_crop(photo_jpegs):
    for path in photo_jpegs(3):
        data = path.read_bytes()
        ours = decode_crop(data, CropPlan(96, train=False), random.Random(0))
        photo = Image.open(io.BytesIO(data)).convert("RGB")
        reference = v2.CenterCrop(96)(v2.Resize(round(96 / 0.875))(photo))
        assert ours.shape == (96, 96, 3) and ours.dtype == np.uint8
        # Draft-mode decoding and a float crop box move pixels by a fraction of a pixel only.
        assert _mean_abs_diff(ours, reference) < 8


def test_draft_decoding_matches_a_full_decode_of_the_same_box(photo_jpegs):
    plan = CropPlan(64, train=True)
    for index, path in enumerate(photo_jpegs(4)):
        data = path.read_bytes()
        ours = decode_crop(data, plan, random.Random(index))
        photo = Image.open(io.BytesIO(data)).convert("RGB")
        box = plan.box(*photo.size, random.Random(index))
        reference = photo.resize((64, 64), Image.Resampling.BILINEAR, box=box)
        assert _mean_abs_diff(ours, reference) < 4


@pytest.mark.parametrize("width, height", [(500, 375), (375, 500), (64, 64), (2000, 100)])
def test_training_boxes_stay_inside_and_respect_scale_and_ratio(width, height):
    plan = CropPlan(32, train=True, scale=(0.2, 0.9), ratio=(0.8, 1.25))
    rng = random.Random(0)
    for _ in range(200):
        left, top, right, bottom = plan.box(width, height, rng)
        assert 0 <= left < right <= width and 0 <= top < bottom <= height
        crop_w, crop_h = right - left, bottom - top
        if (width, height) != (2000, 100):  # a 20:1 strip fits no such crop: see the fallback test
            assert 0.2 - 0.02 <= crop_w * crop_h / (width * height) <= 0.9 + 0.02
            assert 0.8 - 0.05 <= crop_w / crop_h <= 1.25 + 0.05


@pytest.mark.parametrize("ratio", [(3 / 4, 4 / 3), (1.0, 1.0), (0.5, 2.0)])
def test_a_whole_square_crop_skips_the_draws_that_could_not_change_it(ratio):
    # crop_box seeds no generator for such a crop (CIFAR's recipes): every draw gives the same box.
    plan = CropPlan(32, train=True, scale=(1.0, 1.0), ratio=ratio)
    for side in range(1, 130):
        for seed in range(40):
            assert plan._drawn_box(side, side, random.Random(seed)) == plan.fixed_box(side, side) == (0, 0, side, side)
    assert crop_box(plan, 48, 48, seed=1, epoch=2, key=(3,)) == (0, 0, 48, 48)


def test_crops_whose_box_depends_on_draws_are_drawn_from_crop_rng():
    whole_but_not_square = CropPlan(32, train=True, scale=(1.0, 1.0))
    not_whole = CropPlan(32, train=True, scale=(0.5, 1.0))
    ratio_without_1 = CropPlan(32, train=True, scale=(1.0, 1.0), ratio=(1.1, 1.3))
    for plan, width, height in [(whole_but_not_square, 40, 32), (not_whole, 32, 32), (ratio_without_1, 32, 32)]:
        assert plan.fixed_box(width, height) is None
        for key in range(20):
            drawn = plan.box(width, height, crop_rng(5, 1, (key,)))
            assert crop_box(plan, width, height, seed=5, epoch=1, key=(key,)) == drawn
    boxes = {crop_box(not_whole, 32, 32, seed=5, epoch=1, key=(key,)) for key in range(20)}
    assert len(boxes) > 1


def test_fallback_box_for_an_extreme_aspect_is_the_clamped_whole_image():
    plan = CropPlan(32, train=True, scale=(0.9, 1.0), ratio=(1.0, 1.0))
    left, top, right, bottom = plan.box(2000, 100, random.Random(0))
    assert (right - left, bottom - top) == (100, 100)


def test_training_crops_repeat_with_the_same_generator_seed(photo_jpegs):
    data = photo_jpegs(1)[0].read_bytes()
    plan = CropPlan(48, train=True)
    first = decode_crop(data, plan, random.Random(7))
    assert np.array_equal(first, decode_crop(data, plan, random.Random(7)))
    assert not np.array_equal(first, decode_crop(data, plan, random.Random(8)))


def test_every_awkward_mode_decodes_to_rgb_close_to_the_original(real_jpegs):
    photo = Image.open(real_jpegs(1)[0]).convert("RGB")
    plan = CropPlan(32, train=False, eval_crop_fraction=1.0)  # the whole 32x32 image, unscaled
    expected = np.asarray(photo)
    gray = np.asarray(photo.convert("L"))[..., None].repeat(3, axis=2)
    palette = photo.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    for data, reference, tolerance in [
        (png_bytes(photo), expected, 0.01),
        (png_bytes(photo.convert("RGBA")), expected, 0.01),
        (png_bytes(palette), np.asarray(palette.convert("RGB")), 0.01),
        (jpeg_bytes(photo.convert("CMYK")), expected, 6),
        (jpeg_bytes(photo.convert("L")), gray, 3),
        (png_bytes(photo.convert("LA")), gray, 0.01),
    ]:
        decoded = decode_crop(data, plan, random.Random(0))
        assert decoded.shape == (32, 32, 3)
        assert _mean_abs_diff(decoded, reference) <= tolerance


def test_sixteen_bit_images_are_scaled_not_clipped():
    ramp = np.linspace(0, 65535, 32, dtype=np.uint16)[None, :].repeat(32, axis=0)
    decoded = decode_crop(png_bytes(Image.fromarray(ramp)), CropPlan(32, train=False, eval_crop_fraction=1.0), random.Random(0))
    expected = np.round(ramp.astype(np.float64) * 255 / 65535)
    assert np.abs(decoded[..., 0] - expected).max() <= 1
    assert np.array_equal(decoded[..., 0], decoded[..., 2])
    assert decoded.max() == 255 and decoded.min() == 0 and 120 < decoded.mean() < 135


@pytest.mark.parametrize("name, reason", [
    ("empty.jpg", "empty file"),
    ("notes.jpg", "not an image"),
    ("truncated.jpg", "truncated JPEG"),
    ("cut_scan.jpg", "truncated JPEG .*premature end of data segment"),
])
def test_unusable_bytes_raise_with_the_reason(bad_files, name, reason):
    data, decodable = bad_files()[name]
    assert not decodable
    with pytest.raises(UnusableImage, match=reason):
        decode_crop(data, CropPlan(32, train=True), random.Random(0))


def test_decoder_errors_after_the_byte_check_become_unusable_images(real_jpegs):
    data = bytearray(real_jpegs(1)[0].read_bytes())
    data[2:40] = bytes(38)  # a broken header behind an intact signature and end marker
    with pytest.raises(UnusableImage):
        decode_crop(bytes(data), CropPlan(32, train=True), random.Random(0))


def _decoded(backend, samples, epoch=0):
    batches = list(backend.batches(samples, epoch))
    images = torch.cat([b.images for b in batches])
    labels = torch.cat([b.labels for b in batches])
    return batches, images, labels


def test_batches_keep_order_labels_and_the_contract(coded_tree):
    samples, _ = find_samples(coded_tree(classes=3, per_class=5))
    random.Random(0).shuffle(samples)
    backend = PilBackend(batch_size=4, train=True, image_size=24, seed=0, num_workers=0)
    batches, images, labels = _decoded(backend, samples)
    assert [len(b.labels) for b in batches] == [4, 4, 4, 3]
    assert images.dtype == torch.uint8 and images.shape == (15, 3, 24, 24) and images.is_contiguous()
    assert labels.dtype == torch.int64
    assert labels.tolist() == [label for _, label in samples]
    assert class_of(images) == labels.tolist()
    assert all(b.skipped == [] for b in batches)


def test_bad_files_are_left_out_without_shifting_labels(coded_tree, bad_files):
    root = coded_tree(classes=2, per_class=3)
    broken = {name: data for name, (data, decodable) in bad_files().items() if not decodable}
    for name, data in broken.items():
        (root / "class1" / f"001_{name}").write_bytes(data)  # sorted between the good files
    samples, _ = find_samples(root)
    backend = PilBackend(batch_size=4, train=False, image_size=16, seed=0, num_workers=0)
    batches, images, labels = _decoded(backend, samples)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert class_of(images) == labels.tolist()
    skipped = [str(entry) for b in batches for entry in b.skipped]
    assert len(skipped) == len(broken)
    assert any("001_empty.jpg: empty file" in entry for entry in skipped)
    assert any("001_truncated.jpg: truncated JPEG" in entry for entry in skipped)


def test_a_batch_of_only_bad_files_is_empty_but_still_yielded(make_tree, bad_files):
    files = bad_files()
    root = make_tree({"a": {"empty.jpg": files["empty.jpg"][0], "notes.jpg": files["notes.jpg"][0]}})
    samples, _ = find_samples(root)
    (batch,) = PilBackend(batch_size=2, train=False, image_size=16, num_workers=0).batches(samples, 0)
    assert batch.images.shape == (0, 3, 16, 16) and batch.labels.shape == (0,)
    assert len(batch.skipped) == 2


def test_crops_do_not_depend_on_workers_or_an_abandoned_epoch_and_change_with_the_epoch(real_jpegs):
    samples = [(str(path), i % 10) for i, path in enumerate(real_jpegs(12))]
    serial = PilBackend(batch_size=5, train=True, image_size=16, seed=3, num_workers=0)
    parallel = PilBackend(batch_size=5, train=True, image_size=16, seed=3, num_workers=2)
    _, first, _ = _decoded(serial, samples, epoch=1)
    next(iter(parallel.batches(samples, epoch=0)))  # an epoch abandoned after one batch
    _, again, _ = _decoded(parallel, samples, epoch=1)  # the persistent workers start afresh
    _, later, _ = _decoded(parallel, samples, epoch=2)
    assert torch.equal(first, again)
    assert not torch.equal(first, later)


def test_missing_pillow_simd_warns_once(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pil_backend.importlib.metadata, "version", not_installed)
    pil_backend.warn_if_no_pillow_simd.cache_clear()
    try:
        with pytest.warns(pil_backend.PillowSimdMissingWarning, match="make"):
            pil_backend.warn_if_no_pillow_simd()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pil_backend.warn_if_no_pillow_simd()  # cached: no second warning
    finally:
        pil_backend.warn_if_no_pillow_simd.cache_clear()


def test_pillow_simd_is_recognized_only_when_it_is_the_imported_pil(monkeypatch):
    monkeypatch.setattr(pil_backend.importlib.metadata, "version", lambda name: PIL.__version__)
    assert pil_backend.pillow_simd_version() == PIL.__version__
    # Plain Pillow installed over Pillow-SIMD leaves the old metadata behind.
    monkeypatch.setattr(pil_backend.importlib.metadata, "version", lambda name: "9.5.0.post1")
    assert pil_backend.pillow_simd_version() is None


def test_webp_without_webp_support_is_skipped_with_the_fix(monkeypatch):
    monkeypatch.setattr(pil_backend, "_decodes_webp", lambda: False)
    webp = b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(32)
    with pytest.raises(UnusableImage, match="WebP, which this Pillow build cannot decode; install libwebp-dev"):
        decode_crop(webp, CropPlan(16, train=True), random.Random(0))


def test_a_large_png_is_cropped_where_its_crop_box_says(photo_jpegs):
    """No DCT scaling for other formats: the box stays in the full image's pixels."""
    photo = Image.open(photo_jpegs(1)[0]).convert("RGB")
    plan = CropPlan(48, train=False)  # a box of over 300 px: a JPEG would decode at 1/4
    box = plan.box(*photo.size, random.Random(0))
    expected = np.asarray(photo.resize((48, 48), Image.Resampling.BILINEAR, box=box, reducing_gap=3.0))
    assert np.array_equal(decode_crop(png_bytes(photo), plan, random.Random(0)), expected)


def _new_workers_niceness(backend, samples) -> list[int]:
    """The niceness of the decoding processes that start for ``backend``'s first batch."""
    before = {child.pid for child in multiprocessing.active_children()}
    next(iter(backend.batches(samples, epoch=0)))
    return [os.getpriority(os.PRIO_PROCESS, child.pid) for child in multiprocessing.active_children()
            if child.pid not in before]


@pytest.mark.parametrize("niceness, expected", [(None, pil_backend.CPU_WORKER_NICENESS), (0, 0), (3, 3)])
def test_decoding_workers_run_the_chosen_niceness_below_the_process(real_jpegs, niceness, expected):
    # None: batches for a CPU training step, whose cores the workers yield to it.
    samples = [(str(path), 0) for path in real_jpegs(4)]
    backend = PilBackend(batch_size=2, train=True, image_size=16, num_workers=1, device="cpu",
                         worker_niceness=niceness)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert _new_workers_niceness(backend, samples) == [min(19, own + expected)]
