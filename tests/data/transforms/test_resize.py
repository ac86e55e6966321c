"""resize_batch (antialiased bilinear, uint8 or float, no-op at the right size) and the
ProgressiveResize schedule's sizes at chosen points of training."""


import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF
from PIL import Image

from fastcore_ops.data.transforms.resize import ProgressiveResize, resize_batch
from tests.data.conftest import DATASETS

PHOTOS = DATASETS / "imagenet-sample"


@pytest.fixture(scope="module")
def photo() -> torch.Tensor:
    path = sorted(PHOTOS.glob("*/*.JPEG"))[0]
    image = TF.pil_to_tensor(Image.open(path).convert("RGB"))
    return TF.center_crop(image, [256, 256])[None]


def test_float_resize_matches_antialiased_bilinear_interpolation(photo):
    images = photo.float() / 255
    out = resize_batch(images, 96)
    expected = F.interpolate(images, size=(96, 96), mode="bilinear", antialias=True, align_corners=False)
    assert out.shape == (1, 3, 96, 96) and out.dtype == torch.float32
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_uint8_stays_uint8_and_agrees_with_the_float_path(photo):
    out = resize_batch(photo, (80, 120))
    assert out.dtype == torch.uint8 and out.shape == (1, 3, 80, 120)
    from_float = resize_batch(photo.float(), (80, 120)).round()
    assert (out.float() - from_float).abs().max() <= 1


def test_antialias_removes_the_aliasing_of_fine_detail():
    # A one-pixel checkerboard has no content a 3x smaller image can show: its right small image is flat
    # grey. Plain bilinear samples single pixels at this scale and keeps a full-contrast pattern.
    board = ((torch.arange(48)[:, None] + torch.arange(48)[None, :]) % 2).float().expand(1, 3, 48, 48)
    smooth = resize_batch(board, 16)
    aliased = resize_batch(board, 16, antialias=False)
    assert (smooth - 0.5).abs().max() < 0.02
    assert (aliased - 0.5).abs().max() > 0.4


def test_right_size_returns_the_input(photo):
    assert resize_batch(photo, 256) is photo
    assert resize_batch(photo, (256, 256)) is photo


@pytest.mark.parametrize("size, error", [
    (0, ValueError), (-3, ValueError), ((8,), ValueError), ((8, 8, 8), ValueError), ((8, 0), ValueError),
    (2.5, TypeError), (True, TypeError), ("32", TypeError), ((8, "8"), TypeError),
])
def test_bad_sizes_are_refused(size, error):
    with pytest.raises(error, match=r"size(\[\d\] \(\w+\))? must be an int >= 1"):
        resize_batch(torch.zeros(1, 3, 8, 8), size)


def test_bad_images_are_refused():
    with pytest.raises(ValueError, match="N x C x H x W"):
        resize_batch(torch.zeros(3, 8, 8), 4)
    with pytest.raises(TypeError, match="uint8 or floating"):
        resize_batch(torch.zeros(1, 3, 8, 8, dtype=torch.int32), 4)


@pytest.mark.parametrize("progress, size", [
    (0.0, 112), (0.2, 112), (0.4, 112), (0.5, 140), (0.6, 168), (0.7, 196), (0.8, 224), (0.9, 224), (1.0, 224),
])
def test_default_schedule_holds_grows_linearly_then_finetunes_at_full_size(progress, size):
    assert ProgressiveResize().size(224, progress) == size


@pytest.mark.parametrize("schedule, final, progress, size", [
    (ProgressiveResize(initial_scale=0.6, size_increment=8), 32, 0.0, 16),  # 19.2 -> nearest multiple of 8
    (ProgressiveResize(initial_scale=0.6, size_increment=4), 32, 0.0, 20),  # 19.2 -> nearest multiple of 4
    (ProgressiveResize(initial_scale=0.01), 32, 0.1, 4),  # never below one increment
    (ProgressiveResize(delay_fraction=0.5, finetune_fraction=0.5), 176, 0.4999, 88),  # no ramp: a step
    (ProgressiveResize(delay_fraction=0.5, finetune_fraction=0.5), 176, 0.5, 176),
    (ProgressiveResize(initial_scale=1.0), 176, 0.0, 176),
])
def test_sizes_round_to_the_increment(schedule, final, progress, size):
    assert schedule.size(final, progress) == size


def test_sizes_never_shrink_and_are_multiples_of_the_increment():
    schedule = ProgressiveResize(initial_scale=0.3, delay_fraction=0.1, finetune_fraction=0.3, size_increment=16)
    sizes = [schedule.size(224, step / 100) for step in range(101)]
    assert sizes == sorted(sizes) and all(s % 16 == 0 for s in sizes)
    assert sizes[0] == 64 and sizes[-1] == 224 and len(set(sizes)) > 5


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(initial_scale=0.0), ValueError, "initial_scale"), (dict(initial_scale=1.5), ValueError, "initial_scale"),
    (dict(initial_scale="0.5"), TypeError, "initial_scale"),
    (dict(delay_fraction=-0.1), ValueError, "delay_fraction"), (dict(finetune_fraction=2), ValueError, "finetune_fraction"),
    (dict(delay_fraction=0.7, finetune_fraction=0.4), ValueError, "delay_fraction \\+ finetune_fraction must be <= 1"),
    (dict(size_increment=0), ValueError, "size_increment"), (dict(size_increment=4.0), TypeError, "size_increment"),
])
def test_bad_schedules_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        ProgressiveResize(**kwargs)


def test_bad_size_queries_are_refused():
    schedule = ProgressiveResize()
    with pytest.raises(ValueError, match="progress"):
        schedule.size(224, 1.2)
    with pytest.raises(ValueError, match="not a multiple of size_increment=4"):
        schedule.size(226, 0.5)
    with pytest.raises(ValueError, match="final_size"):
        schedule.size(0, 0.5)
