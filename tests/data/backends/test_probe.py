"""probe: byte checks, and the decoder's word on JPEGs cut inside their compressed data."""

import io
import random

import numpy as np
import pytest
from PIL import Image

from fastcore_ops.data.backends import probe
from fastcore_ops.data.backends.crops import CropPlan
from fastcore_ops.data.backends.pil import UnusableImage, decode_crop
from fastcore_ops.data.backends.probe import (
    jpeg_truncation,
    may_be_truncated_jpeg,
    unusable_reason,
)
from tests.data.conftest import DATASETS, IMAGENET_SAMPLE, cut_inside_scan, jpeg_bytes

CIFAR_TEST = DATASETS / "cifar10-jpeg" / "test"


def _photo_variants():
    """A real photo saved in every JPEG flavour whose truncation looks different when decoded."""
    photo = Image.open(sorted(IMAGENET_SAMPLE.glob("*/*"))[0]).convert("RGB")
    return {
        "baseline-444": jpeg_bytes(photo, subsampling=0),
        "baseline-420": jpeg_bytes(photo, subsampling=2),
        "gray": jpeg_bytes(photo.convert("L")),
        "cmyk": jpeg_bytes(photo.convert("CMYK")),
        "progressive": jpeg_bytes(photo, progressive=True),
    }


@pytest.mark.parametrize("kind", ["baseline-444", "baseline-420", "gray", "cmyk", "progressive"])
def test_a_jpeg_cut_inside_its_scan_and_closed_again_is_unusable(kind):
    whole = _photo_variants()[kind]
    cut = cut_inside_scan(whole)
    assert unusable_reason(cut) is None  # the byte check cannot see it: the end marker is there
    assert jpeg_truncation(whole) is None
    assert jpeg_truncation(cut) == "truncated JPEG (the decoder reports: Corrupt JPEG data: premature end of data segment)"
    for train in (True, False):  # Pillow alone decodes it with a grey band and no warning
        with pytest.raises(UnusableImage, match="truncated JPEG .*premature end of data"):
            decode_crop(cut, CropPlan(64, train=train), random.Random(0))


def test_without_simplejpeg_the_truncation_check_is_skipped_with_a_warning(monkeypatch):
    """A bare environment (the GPU machine runs the repository uninstalled) still loads images."""
    monkeypatch.setattr(probe, "simplejpeg", None)
    probe._warn_no_truncation_check.cache_clear()
    cut = cut_inside_scan(_photo_variants()["baseline-420"])
    with pytest.warns(probe.TruncationCheckMissingWarning, match="pip install simplejpeg"):
        assert jpeg_truncation(cut) is None
    probe._warn_no_truncation_check.cache_clear()


def test_every_shared_test_image_passes_the_truncation_check():
    cifar = sorted(CIFAR_TEST.glob("*/*.jpg"))
    photos = sorted(IMAGENET_SAMPLE.glob("*/*"))
    assert len(cifar) == 10000 and len(photos) == 500
    rejected = [path for path in cifar + photos if jpeg_truncation(path.read_bytes()) is not None]
    assert rejected == []
    for index, path in enumerate(photos):  # and the pil backend decodes every photo
        decode_crop(path.read_bytes(), CropPlan(32, train=True), random.Random(index))


def test_the_cheap_sign_flags_mid_grey_last_pixels_and_progressive_files():
    assert may_be_truncated_jpeg((128, 128, 128), progressive=False)
    assert may_be_truncated_jpeg(128, progressive=False)
    assert may_be_truncated_jpeg((127, 127, 127, 127), progressive=False)  # Adobe CMYK, inverted
    assert may_be_truncated_jpeg((30, 40, 50), progressive=True)
    assert not may_be_truncated_jpeg((128, 128, 129), progressive=False)


def test_a_whole_mid_grey_jpeg_is_checked_and_kept():
    grey = jpeg_bytes(Image.new("RGB", (48, 40), (128, 128, 128)))
    crop = decode_crop(grey, CropPlan(16, train=False), random.Random(0))
    assert np.abs(crop.astype(int) - 128).max() <= 1


@pytest.mark.parametrize("data, reason", [
    (b"", "empty file"),
    (b"GIF89a....", "not an image"),
    (b"\xff\xd8\xff\xe0" + bytes(100), "truncated JPEG (no end-of-image marker)"),
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "truncated PNG"),
], ids=["empty", "gif-named-jpg", "jpeg-without-end-marker", "png-without-iend"])
def test_byte_check_reasons(data, reason):
    assert reason in unusable_reason(data)


def test_non_jpeg_bytes_are_not_judged_by_the_jpeg_decoder():
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "PNG")
    assert jpeg_truncation(buffer.getvalue()) is None
