"""The device stage on real CIFAR-10 crops: normalization, resize, flip, RandAugment and ColOut in
training, none of them in evaluation, channels-last output, and argument checks."""


import pytest
import torch
import torchvision.transforms.v2.functional as TF
from PIL import Image

from fastcore_ops.data.transforms.colout import ColOutOptions
from fastcore_ops.data.transforms.device_stage import IMAGENET_MEAN, IMAGENET_STD, DeviceAugment, flip_batch
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions
from fastcore_ops.data.transforms.resize import resize_batch
from tests.data.conftest import DATASETS

CIFAR = DATASETS / "cifar10-jpeg" / "test"


@pytest.fixture(scope="module")
def batch() -> torch.Tensor:
    paths = [sorted(folder.glob("*.jpg"))[0] for folder in sorted(CIFAR.iterdir())][:8]
    assert len(paths) == 8, f"expected CIFAR-10 JPEGs under {CIFAR}"
    return torch.stack([TF.pil_to_tensor(Image.open(p).convert("RGB")) for p in paths])


def _normalized(images_uint8: torch.Tensor) -> torch.Tensor:
    return TF.normalize(images_uint8.float() / 255, list(IMAGENET_MEAN), list(IMAGENET_STD))


def _seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_eval_only_normalizes(batch):
    stage = DeviceAugment(train=False, randaugment=RandAugmentOptions(), colout=ColOutOptions())
    out = stage(batch, generator=_seeded())
    assert out.dtype == torch.float32 and out.shape == batch.shape
    torch.testing.assert_close(out, _normalized(batch))


def test_eval_resizes_the_uint8_pixels_before_normalizing(batch):
    out = DeviceAugment(train=False)(batch, size=24)
    expected = TF.normalize(resize_batch(batch, 24).float() / 255, list(IMAGENET_MEAN), list(IMAGENET_STD))
    torch.testing.assert_close(out, expected)
    # Resizing the uint8 pixels costs at most one grey level against resizing floats.
    from_floats = TF.normalize(resize_batch(batch.float() / 255, 24), list(IMAGENET_MEAN), list(IMAGENET_STD))
    torch.testing.assert_close(out, from_floats, atol=1.01 / 255 / min(IMAGENET_STD), rtol=0)


def test_custom_statistics_are_used(batch):
    out = DeviceAugment(train=False, mean=(0.5, 0.5, 0.5), std=(0.5, 0.25, 1.0))(batch)
    expected = (batch.float() / 255 - 0.5) / torch.tensor([0.5, 0.25, 1.0]).view(1, 3, 1, 1)
    torch.testing.assert_close(out, expected)


def test_training_flip_mirrors_some_images_and_keeps_the_others(batch):
    out = DeviceAugment(train=True)(batch, generator=_seeded(4))
    plain = _normalized(batch)
    kept = [torch.allclose(o, p, atol=1e-5) for o, p in zip(out, plain)]
    mirrored = [torch.allclose(o, p.flip(-1), atol=1e-5) for o, p in zip(out, plain)]
    assert all(k or m for k, m in zip(kept, mirrored))
    assert any(kept) and any(mirrored)


def test_training_with_colout_shrinks_the_images(batch):
    stage = DeviceAugment(train=True, flip=False, colout=ColOutOptions(p_row=0.25, p_col=0.125))
    assert stage(batch, generator=_seeded()).shape == (8, 3, 24, 28)
    assert stage(batch, size=16, generator=_seeded()).shape == (8, 3, 12, 14)


def test_training_randaugment_is_random_per_seed_and_reproducible(batch):
    stage = DeviceAugment(train=True, flip=False, randaugment=RandAugmentOptions(depth=1, severity=9))
    first = stage(batch, generator=_seeded(1))
    assert torch.equal(first, stage(batch, generator=_seeded(1)))
    assert not torch.equal(first, stage(batch, generator=_seeded(2)))
    changed = (first - _normalized(batch)).flatten(1).abs().amax(1) > 1e-3
    assert changed.sum() >= 5


def test_channels_last_changes_only_the_layout(batch):
    options = dict(train=True, randaugment=RandAugmentOptions(), colout=ColOutOptions())
    out = DeviceAugment(channels_last=True, **options)(batch, size=28, generator=_seeded(3))
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out, DeviceAugment(**options)(batch, size=28, generator=_seeded(3)))


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("randaugment", [None, RandAugmentOptions()])
def test_a_batch_written_into_a_given_output_is_the_same_batch(batch, channels_last, randaugment):
    stage = DeviceAugment(train=True, randaugment=randaugment, channels_last=channels_last)
    out = torch.empty((len(batch), 3, 24, 24), memory_format=stage.memory_format).share_memory_()
    shared = stage(batch, size=24, generator=_seeded(4), out=out)
    private = stage(batch, size=24, generator=_seeded(4))
    assert shared is out and shared.is_shared() and not private.is_shared()
    assert shared.stride() == private.stride()
    assert torch.equal(shared, private)
    with pytest.raises(ValueError, match=r"out must have the result's shape \(8, 3, 24, 24\)"):
        stage(batch, size=24, out=out[:2])
    with pytest.raises(TypeError, match="out must be a float32 tensor"):
        stage(batch, size=24, out=out.half())


def test_input_batch_is_left_untouched(batch):
    before = batch.clone()
    DeviceAugment(train=True, randaugment=RandAugmentOptions(depth=2), colout=ColOutOptions())(batch)
    assert torch.equal(batch, before)


def test_flip_batch_probability_extremes_and_any_dtype(batch):
    assert torch.equal(flip_batch(batch, p=0.0), batch)
    assert torch.equal(flip_batch(batch, p=1.0), batch.flip(-1))
    assert flip_batch(batch, generator=_seeded()).dtype == torch.uint8


def test_flip_batch_is_per_sample_and_reproducible(batch):
    copies = batch[:1].expand(32, -1, -1, -1)
    out = flip_batch(copies, generator=_seeded(9))
    flipped = torch.tensor([torch.equal(o, batch[0].flip(-1)) for o in out])
    assert 6 <= flipped.sum() <= 26
    assert torch.equal(out, flip_batch(copies, generator=_seeded(9)))


@pytest.mark.parametrize("p, error", [(-0.1, ValueError), (1.5, ValueError), ("0.5", TypeError), (True, TypeError)])
def test_flip_batch_refuses_bad_probabilities(p, error):
    with pytest.raises(error, match=r"p must be a number in \[0, 1\]"):
        flip_batch(torch.zeros(2, 3, 4, 4), p=p)


@pytest.mark.parametrize("images, error, match", [
    (torch.zeros(2, 3, 8, 8), TypeError, "uint8"),
    (torch.zeros(3, 8, 8, dtype=torch.uint8), ValueError, "n x 3 x S x S"),
    (torch.zeros(2, 4, 8, 8, dtype=torch.uint8), ValueError, "n x 3 x S x S"),
])
def test_bad_batches_are_refused(images, error, match):
    with pytest.raises(error, match=match):
        DeviceAugment(train=True)(images)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(train=1), TypeError, "train must be a bool"),
    (dict(train=True, randaugment=dict(depth=1)), TypeError, "RandAugmentOptions"),
    (dict(train=True, colout=0.15), TypeError, "ColOutOptions"),
    (dict(train=True, mean=(0.5, 0.5)), ValueError, "mean must be 3 numbers"),
    (dict(train=True, mean=0.5), TypeError, "mean must be 3 numbers"),
    (dict(train=True, mean=(0.5, "0.5", 0.5)), TypeError, r"mean\[1\] must be a number"),
    (dict(train=True, std=(0.2, 0.0, 0.2)), ValueError, r"std\[1\] must be a number > 0"),
])
def test_bad_settings_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        DeviceAugment(**kwargs)
