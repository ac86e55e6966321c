"""The JPEG region decoder: libjpeg's own pixels for the rows and columns a crop reads, and nothing lost."""

import functools
import random

import numpy as np
import pytest
import simplejpeg
from PIL import Image

from fastcore_ops.data.backends import pil as pil_backend
from fastcore_ops.data.backends.crops import CropPlan
from fastcore_ops.data.backends.pil import UnusableImage, decode_crop
from fastcore_ops.data.backends.workers import jpeg_region
from tests.data.conftest import IMAGENET_SAMPLE, cut_inside_scan, jpeg_bytes

PHOTO = sorted(IMAGENET_SAMPLE.glob("*/*"))[0]


@functools.cache
def _variants() -> dict[str, bytes]:
    photo = Image.open(PHOTO).convert("RGB")
    return {
        "420": jpeg_bytes(photo, subsampling=2),
        "422": jpeg_bytes(photo, subsampling=1),
        "444": jpeg_bytes(photo, subsampling=0),
        "gray": jpeg_bytes(photo.convert("L")),
        "progressive": jpeg_bytes(photo, progressive=True),
        "restart markers": jpeg_bytes(photo, restart_marker_rows=1),
    }


def _region(data: bytes, scale: int, left: int, top: int, width: int, height: int,
            read_to_end: bool = True) -> tuple[np.ndarray, int]:
    out = np.empty((height + 1) * (width + 64) * 4, dtype=np.uint8)
    out_left, out_width = jpeg_region._jpeg_region.decode_region(data, scale, left, top, width, height, out, read_to_end)
    return out[: height * out_width * 4].reshape(height, out_width, 4), out_left


@pytest.mark.parametrize("kind", list(_variants()))
@pytest.mark.parametrize("scale", [1, 2, 4, 8])
def test_a_region_holds_the_whole_decode_s_pixels(kind, scale):
    data = _variants()[kind]
    height, width = simplejpeg.decode_jpeg_header(data)[:2]
    scaled = (-(-width // scale), -(-height // scale))
    whole = simplejpeg.decode_jpeg(data, "RGB", min_width=scaled[0], min_height=scaled[1], min_factor=scale)
    rng = random.Random(scale)
    for _ in range(6):
        left, top = rng.randrange(scaled[0] // 2), rng.randrange(scaled[1] // 2)
        w, h = rng.randrange(1, scaled[0] - left + 1), rng.randrange(1, scaled[1] - top + 1)
        region, out_left = _region(data, scale, left, top, w, h)
        assert out_left <= left and out_left + region.shape[1] >= left + w
        expected = whole[top : top + h, out_left : out_left + region.shape[1]]
        # libjpeg upsamples the chroma of a cropped region's first and last column as if they were
        # the image's edge; decode_region's margin keeps those columns out of every resize.
        inner = slice(1 if out_left > 0 else 0, None if out_left + region.shape[1] == scaled[0] else -1)
        np.testing.assert_array_equal(region[:, inner, :3], expected[:, inner])


def test_the_crops_equal_those_of_a_whole_decode(monkeypatch):
    """Identical where the crop box has whole-pixel corners; elsewhere Pillow's filter weights may round one level apart."""
    scales = []
    real_dct_scale = pil_backend._dct_scale
    monkeypatch.setattr(pil_backend, "_dct_scale", lambda *args: scales.append(real_dct_scale(*args)) or scales[-1])
    photos = [path.read_bytes() for path in sorted(IMAGENET_SAMPLE.glob("*/*"))[:40]]
    whole_pixel_boxes = 0
    for size in (48, 176):
        for train in (True, False):
            for index, data in enumerate(photos):
                plan = CropPlan(size, train=train)
                ours = decode_crop(data, plan, random.Random(index))
                with monkeypatch.context() as patch:
                    patch.setattr(pil_backend, "decode_region", lambda *args, **kwargs: None)
                    whole = decode_crop(data, plan, random.Random(index))
                difference = np.abs(ours.astype(int) - whole).max()
                assert difference <= 1
                if train and scales[-1] == 1:  # a training box has integer corners; at full scale they stay so
                    whole_pixel_boxes += 1
                    assert difference == 0
    assert whole_pixel_boxes >= 10


def test_a_cut_below_the_crop_still_makes_the_file_unusable():
    data = cut_inside_scan(_variants()["420"])
    height, width = simplejpeg.decode_jpeg_header(data)[:2]
    with pytest.raises(ValueError, match="premature end"):
        _region(data, 1, 0, 0, width, 16)  # the top rows are whole; the rest of the scan is not
    top_rows, _ = _region(data, 1, 0, 0, width, 16, read_to_end=False)  # a caller that knows better
    np.testing.assert_array_equal(top_rows[..., :3], _region(_variants()["420"], 1, 0, 0, width, 16)[0][..., :3])
    with pytest.raises(UnusableImage, match="truncated JPEG"):
        decode_crop(data, CropPlan(32, train=False, eval_crop_fraction=0.1), random.Random(0))


def test_the_backend_skips_a_truncated_file_every_epoch_and_reads_a_whole_one_to_its_end_once(monkeypatch):
    whole, cut = _variants()["420"], cut_inside_scan(_variants()["422"])
    reads_to_end = []
    real_decode_region = jpeg_region._jpeg_region.decode_region

    def recording(*args):
        reads_to_end.append(args[-1])
        return real_decode_region(*args)

    monkeypatch.setattr(jpeg_region._jpeg_region, "decode_region", recording)
    monkeypatch.setattr(pil_backend, "read_encoded", lambda path: {"whole.jpg": whole, "cut.jpg": cut}[path])
    decoding = pil_backend._RunDecoding(CropPlan(32, train=True), seed=0, stage=None, refill=True, slots=None)
    for epoch in range(3):
        decoding.decode("whole.jpg", epoch, (0,), 32)
        with pytest.raises(UnusableImage, match="truncated JPEG"):
            decoding.decode("cut.jpg", epoch, (1,), 32)
    assert reads_to_end == [True, True, False, True, False, True]
    assert decoding.known_whole == {"whole.jpg"}


def test_other_complaints_of_libjpeg_fall_back_to_pillow():
    data = _variants()["420"]
    marker = data.index(b"\xff\xda")  # start of scan: stray bytes before it make libjpeg warn
    stray = data[:marker] + b"\x00\x00" + data[marker:]
    with pytest.raises(ValueError, match="extraneous bytes"):
        _region(stray, 1, 0, 0, 8, 8)
    plan = CropPlan(64, train=True)
    np.testing.assert_array_equal(decode_crop(stray, plan, random.Random(3)), decode_crop(data, plan, random.Random(3)))


def test_a_cmyk_jpeg_is_left_to_pillow():
    data = jpeg_bytes(Image.open(PHOTO).convert("CMYK"))
    assert jpeg_region._jpeg_region.decode_region(data, 1, 0, 0, 8, 8, np.empty(8 * 8 * 4 * 9, np.uint8), True) is None
    assert decode_crop(data, CropPlan(32, train=True), random.Random(0)).shape == (32, 32, 3)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((3, 0, 0, 8, 8), "scale must be 1, 2, 4 or 8, not 3"),
        ((1, 0, 0, 0, 8), "region 0x8 at \\(0, 0\\) outside"),
        ((1, 10_000, 0, 8, 8), "outside the"),
        ((1, 0, 0, 64, 63), "output buffer of 256 bytes too small"),
    ],
)
def test_bad_requests_raise_and_name_the_problem(arguments, message):
    with pytest.raises(ValueError, match=message):
        jpeg_region._jpeg_region.decode_region(_variants()["420"], *arguments, np.empty(256, np.uint8), True)


def test_not_a_jpeg_raises_libjpeg_s_message():
    with pytest.raises(ValueError, match="Not a JPEG file"):
        jpeg_region._jpeg_region.decode_region(b"\x89PNG\r\n\x1a\n" + bytes(64), 1, 0, 0, 8, 8, np.empty(256, np.uint8), True)


def test_without_the_extension_the_backend_warns_once_and_decodes_with_pillow(monkeypatch):
    data = _variants()["420"]
    plan = CropPlan(64, train=True)
    expected = decode_crop(data, plan, random.Random(5))
    monkeypatch.setattr(jpeg_region, "_jpeg_region", None)
    jpeg_region.warn_if_missing.cache_clear()
    with pytest.warns(jpeg_region.RegionDecoderMissingWarning, match="libjpeg62-turbo-dev"):
        jpeg_region.warn_if_missing()
    jpeg_region.warn_if_missing.cache_clear()
    assert jpeg_region.decode_region(data, 1, (500, 375), (0.0, 0.0, 100.0, 100.0), 64) is None
    np.testing.assert_array_equal(decode_crop(data, plan, random.Random(5)), expected)
