"""Padded random crops on real CIFAR-10 images: each image's own window of the padded image, zero or
mirrored borders, every shift drawn, the same draws from the same seed, through the batch stage."""

import pytest
import torch
import torchvision.transforms.v2.functional as TF
from torch.nn import functional as F

from fastcore_ops.data.transforms.device_stage import DeviceAugment
from fastcore_ops.data.transforms.padded_crop import PaddedCropOptions, padded_crop_batch, windows
from fastcore_ops.data.transforms.resize import resize_batch
from tests.data.transforms.test_device_stage import batch  # noqa: F401  (the fixture: 8 CIFAR-10 test images)


def _expected(images: torch.Tensor, padding: int, fill: str, seed: int) -> torch.Tensor:
    """torchvision's pad and crop, image by image, at the offsets the same seed draws."""
    offsets = torch.randint(0, 2 * padding + 1, (images.shape[0], 2), generator=torch.Generator().manual_seed(seed))
    mode = "constant" if fill == "zero" else "reflect"
    height, width = images.shape[-2:]
    return torch.stack([TF.crop(TF.pad(image, [padding], padding_mode=mode), top, left, height, width)
                        for image, (top, left) in zip(images, offsets.tolist())])


@pytest.mark.parametrize("fill", ["zero", "reflect"])
@pytest.mark.parametrize("padding", [1, 4])
def test_each_image_is_its_own_window_of_the_padded_image(batch, fill, padding):
    got = padded_crop_batch(batch, padding=padding, fill=fill, generator=torch.Generator().manual_seed(3))
    assert got.dtype == batch.dtype and got.shape == batch.shape
    assert torch.equal(got, _expected(batch, padding, fill, seed=3))


def test_the_one_gather_of_other_devices_cuts_the_same_windows_as_the_cpu_loop(batch):
    padding, offsets = 4, torch.randint(0, 9, (batch.shape[0], 2), generator=torch.Generator().manual_seed(1))
    padded = F.pad(batch, (padding,) * 4)
    looped = torch.stack([padded[i, :, top:top + 32, left:left + 32] for i, (top, left) in enumerate(offsets.tolist())])
    assert torch.equal(windows(padded, offsets, 32, 32), looped)


def test_every_shift_is_drawn_and_the_uncovered_strip_is_black():
    ones = torch.ones(4000, 1, 8, 8, dtype=torch.uint8)
    shifted = padded_crop_batch(ones, padding=2, generator=torch.Generator().manual_seed(0))
    rows_kept, columns_kept = shifted[:, 0].amax(dim=2).sum(dim=1), shifted[:, 0].amax(dim=1).sum(dim=1)
    assert set(rows_kept.tolist()) == set(columns_kept.tolist()) == {6, 7, 8}   # shifts 0, 1, 2 each way
    assert (shifted.sum(dim=(1, 2, 3)) == rows_kept * columns_kept).all()        # the rest is zero
    unshifted = ((rows_kept == 8) & (columns_kept == 8)).float().mean().item()
    assert unshifted == pytest.approx(1 / 25, abs=0.015)                         # 5 offsets per axis


def test_the_stage_crops_before_flipping_reproducibly_and_scales_the_padding_with_the_size(batch):
    stage = DeviceAugment(train=True, flip=False, padded_crop=PaddedCropOptions(fill="reflect"))
    plain = DeviceAugment(train=True, flip=False)
    first, again = (stage(batch, generator=torch.Generator().manual_seed(5)) for _ in range(2))
    assert torch.equal(first, again) and not torch.equal(first, plain(batch, generator=torch.Generator()))
    expected = plain(_expected(batch, 4, "reflect", seed=5), generator=torch.Generator())
    assert torch.equal(first, expected)
    small = stage(batch, size=16, generator=torch.Generator().manual_seed(5))  # progressive resizing: 2 px at 16 px
    assert torch.equal(small, plain(_expected(resize_batch(batch, 16), 2, "reflect", seed=5), generator=torch.Generator()))
    assert not DeviceAugment(train=False, padded_crop=PaddedCropOptions())(batch).equal(first)


@pytest.mark.parametrize("call, error, match", [
    (lambda b: padded_crop_batch(b.float()[0], padding=2), ValueError, "must have 4 dimensions"),
    (lambda b: padded_crop_batch(b, padding=2.5), TypeError, "padding must be an int"),
    (lambda b: padded_crop_batch(b, padding=-1), ValueError, "padding must be an int >= 0"),
    (lambda b: padded_crop_batch(b, padding=2, fill="edge"), ValueError, "fill"),
    (lambda b: padded_crop_batch(b, padding=32, fill="reflect"), ValueError, "use fill='zero' or a smaller fraction"),
    (lambda b: PaddedCropOptions(fraction=0.75), ValueError, r"fraction must be a number in \[0, 0.5\]"),
    (lambda b: PaddedCropOptions(fill=None), ValueError, "fill"),
    (lambda b: DeviceAugment(train=True, padded_crop={"fraction": 0.1}), TypeError, "PaddedCropOptions or None"),
])
def test_bad_arguments_are_named(batch, call, error, match):
    with pytest.raises(error, match=match):
        call(batch)


def test_no_padding_returns_a_copy(batch):
    out = padded_crop_batch(batch, padding=0)
    assert torch.equal(out, batch) and out.data_ptr() != batch.data_ptr()
