"""ColOut: output sizes, the same ordered rows and columns for the whole batch, any dtype, checks."""


import pytest
import torch
import torchvision.transforms.v2.functional as TF
from PIL import Image

from fastcore_ops.data.transforms.colout import ColOutOptions, colout_batch
from tests.data.conftest import DATASETS

CIFAR = DATASETS / "cifar10-jpeg" / "train"


def _coordinates(n: int, c: int, h: int, w: int) -> torch.Tensor:
    """Images whose pixel (row, col) holds row * 1000 + col, so the kept lines can be read back."""
    grid = torch.arange(h)[:, None] * 1000 + torch.arange(w)[None, :]
    return grid.expand(n, c, h, w).contiguous()


@pytest.mark.parametrize("p_row, p_col, height, width", [
    (0.15, 0.15, 32, 32), (0.0, 0.3, 20, 17), (0.5, 0.0, 9, 40), (0.25, 0.1, 10, 10), (0.99, 0.99, 3, 5),
])
def test_output_keeps_height_minus_rounded_fraction(p_row, p_col, height, width):
    out = colout_batch(torch.zeros(2, 3, height, width), p_row=p_row, p_col=p_col,
                       generator=torch.Generator().manual_seed(0))
    expected = (max(1, height - round(p_row * height)), max(1, width - round(p_col * width)))
    assert out.shape == (2, 3, *expected)


def test_the_same_rows_and_columns_are_dropped_from_every_image_and_kept_in_order():
    out = colout_batch(_coordinates(4, 3, 30, 24), p_row=0.2, p_col=0.25, generator=torch.Generator().manual_seed(1))
    rows, cols = out[0, 0, :, 0] // 1000, out[0, 0, 0, :] % 1000
    assert len(rows) == 24 and len(cols) == 18
    assert bool((rows[1:] > rows[:-1]).all()) and bool((cols[1:] > cols[:-1]).all())
    assert torch.equal(out, (rows[:, None] * 1000 + cols[None, :]).expand_as(out))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16, torch.float32, torch.bool])
def test_works_for_any_dtype_on_real_images(dtype):
    paths = sorted((CIFAR / "cat").glob("*.jpg"))[:3]
    images = torch.stack([TF.pil_to_tensor(Image.open(p).convert("RGB")) for p in paths])
    images = images.to(dtype) if dtype != torch.bool else images > 127
    out = colout_batch(images, generator=torch.Generator().manual_seed(2))
    assert out.dtype == dtype and out.shape == (3, 3, 27, 27)
    coordinates = colout_batch(_coordinates(1, 1, 32, 32), generator=torch.Generator().manual_seed(2))[0, 0]
    assert torch.equal(out, images[..., coordinates[:, 0] // 1000, :][..., coordinates[0] % 1000])


def test_generator_makes_it_reproducible():
    images = _coordinates(2, 3, 32, 32)
    first = colout_batch(images, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first, colout_batch(images, generator=torch.Generator().manual_seed(5)))
    assert not torch.equal(first, colout_batch(images, generator=torch.Generator().manual_seed(6)))


def test_zero_fractions_keep_the_image():
    images = torch.rand(2, 3, 8, 8)
    assert torch.equal(colout_batch(images, p_row=0.0, p_col=0.0), images)


@pytest.mark.parametrize("kwargs, error", [
    (dict(p_row=1.0), ValueError), (dict(p_col=-0.1), ValueError), (dict(p_row="0.1"), TypeError), (dict(p_col=True), TypeError),
])
def test_bad_fractions_are_refused(kwargs, error):
    with pytest.raises(error, match="p_(row|col) must be a number in \\[0, 1\\)"):
        colout_batch(torch.zeros(1, 3, 8, 8), **kwargs)
    with pytest.raises(error, match="p_(row|col) must be a number in \\[0, 1\\)"):
        ColOutOptions(**kwargs)


def test_bad_images_are_refused():
    with pytest.raises(TypeError, match="torch.Tensor"):
        colout_batch([[0.0]])
    with pytest.raises(ValueError, match="at least 2 dims"):
        colout_batch(torch.zeros(5))
