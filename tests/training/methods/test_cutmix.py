import math

import pytest
import torch

from fastcore_ops.training.methods import CutMix, CutMixOptions, cutmix_batch
from fastcore_ops.training.methods.cutmix import cutmix_box

NUM_CLASSES = 4


def labelled_batch(n=5, height=7, width=10):
    # Sample i is the constant image i + 1, so every pixel tells which sample it came from.
    images = (torch.arange(n, dtype=torch.float32) + 1).view(n, 1, 1, 1).expand(n, 3, height, width).contiguous()
    return images, torch.tensor([i % NUM_CLASSES for i in range(n)])


def pasted_region(images, mixed):
    """The (N, H, W) mask of pixels that are not the sample's own, and each sample's partner."""
    source = mixed[:, 0].long() - 1
    own = torch.arange(images.shape[0]).view(-1, 1, 1)
    return source != own, source


@pytest.mark.parametrize("seed", range(8))
def test_one_box_from_the_partner_and_targets_mixed_by_its_area(seed):
    images, labels = labelled_batch()
    mixed, targets, lam = cutmix_batch(images, labels, NUM_CLASSES, alpha=1.0,
                                       generator=torch.Generator().manual_seed(seed))
    height, width = images.shape[-2:]
    pasted, source = pasted_region(images, mixed)
    partners = []
    for i in range(images.shape[0]):
        values = source[i].unique().tolist()
        assert len(values) <= 2  # own pixels and one partner at most
        partners.append(next((v for v in values if v != i), i))
    assert sorted(partners) == list(range(images.shape[0]))
    # Every sample whose partner is another one shows the same rectangle.
    box_masks = [pasted[i] for i in range(images.shape[0]) if partners[i] != i]
    if box_masks and (1 - lam) > 0:
        mask = box_masks[0]
        for other in box_masks[1:]:
            assert torch.equal(other, mask)
        rows, cols = mask.any(1).nonzero().flatten(), mask.any(0).nonzero().flatten()
        assert mask.sum() == len(rows) * len(cols)
        assert rows.max() - rows.min() + 1 == len(rows) and cols.max() - cols.min() + 1 == len(cols)
        assert lam == pytest.approx(1 - mask.sum().item() / (height * width))
    one_hot = torch.eye(NUM_CLASSES)
    expected = lam * one_hot[labels] + (1 - lam) * one_hot[labels[partners]]
    torch.testing.assert_close(targets, expected)


def test_box_has_area_one_minus_lam_unless_clipped():
    generator = torch.Generator().manual_seed(0)
    height, width, lam = 20, 30, 0.64  # side fraction 0.6: a 12 x 18 box
    unclipped = clipped = 0
    tops, lefts = set(), set()
    for _ in range(300):
        top, bottom, left, right = cutmix_box(height, width, lam, generator)
        assert 0 <= top <= bottom <= height and 0 <= left <= right <= width
        if 0 < top and bottom < height and 0 < left and right < width:
            unclipped += 1
            assert (bottom - top, right - left) == (12, 18)
        else:
            clipped += 1
            assert bottom - top <= 12 and right - left <= 18
        tops.add(top)
        lefts.add(left)
    assert unclipped and clipped
    # Centres uniform over the image: box edges reach both borders.
    assert 0 in tops and 0 in lefts and max(tops) >= height - 12 // 2 - 1


def test_exact_area_fraction_when_the_box_fits():
    # A box of 25% of the area centred in a 16 x 16 image with lam 0.75: side 8, area 64.
    generator = torch.Generator().manual_seed(0)
    areas = {(b - t) * (r - l) for t, b, l, r in (cutmix_box(16, 16, 0.75, generator) for _ in range(200))}
    assert max(areas) == round(16 * math.sqrt(0.25)) ** 2


def test_bad_options_are_rejected():
    for alpha, error in ((0, ValueError), (-1.0, ValueError), ("0.5", TypeError), (None, TypeError)):
        with pytest.raises(error, match="alpha"):
            CutMixOptions(alpha=alpha)
    with pytest.raises(TypeError, match="seed"):
        CutMix(alpha=1.0, seed=1.5)
    images, labels = labelled_batch()
    with pytest.raises(ValueError, match="images"):
        cutmix_batch(images[0], labels[:1], NUM_CLASSES, alpha=1.0, generator=torch.Generator())
    with pytest.raises(ValueError, match="num_classes"):
        cutmix_batch(images, labels, 0, alpha=1.0, generator=torch.Generator())
