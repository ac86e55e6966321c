import pytest
import torch

from fastcore_ops.training.methods import Cutout, CutoutOptions, cutout_batch


def cutout_by_definition(images, options, generator):
    """DeVries & Taylor's Cutout, one image and one square at a time: a side x side square around a
    random centre pixel, clipped at the border, set to 0. Draws the centres as cutout_batch does."""
    count, height, width = images.shape[0], images.shape[-2], images.shape[-1]
    side = max(1, round(options.side_fraction * min(height, width)))
    centre_rows = torch.randint(0, height, (count, options.holes), generator=generator)
    centre_cols = torch.randint(0, width, (count, options.holes), generator=generator)
    out = images.clone()
    for i in range(count):
        for hole in range(options.holes):
            top, left = int(centre_rows[i, hole]) - side // 2, int(centre_cols[i, hole]) - side // 2
            out[i, :, max(top, 0):max(top + side, 0), max(left, 0):max(left + side, 0)] = 0
    return out


@pytest.mark.parametrize("options", [CutoutOptions(), CutoutOptions(holes=3, side_fraction=0.2),
                                     CutoutOptions(holes=2, side_fraction=1.0)])
@pytest.mark.parametrize("shape", [(6, 3, 32, 32), (4, 1, 9, 14)])
def test_matches_the_definition_square_by_square(options, shape):
    images = torch.rand(shape) + 0.5  # no pixel is 0 before Cutout
    got = cutout_batch(images, options, torch.Generator().manual_seed(3))
    expected = cutout_by_definition(images, options, torch.Generator().manual_seed(3))
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_each_image_loses_its_own_square_and_nothing_else_changes():
    images = torch.rand(64, 3, 32, 32) + 0.5
    before = images.clone()
    out = cutout_batch(images, CutoutOptions(side_fraction=0.25), torch.Generator().manual_seed(0))
    assert torch.equal(images, before)
    masked = out[:, 0] == 0
    assert torch.equal(masked, (out == 0).all(dim=1))  # all channels of a pixel together
    assert torch.equal(out[~masked.unsqueeze(1).expand_as(out)], images[~masked.unsqueeze(1).expand_as(out)])
    areas = masked.sum(dim=(1, 2))
    assert areas.max() == 8 * 8 and areas.min() > 0  # whole squares inside, clipped ones at the border
    positions = {tuple(m.nonzero()[0].tolist()) for m in masked}
    assert len(positions) > 32  # per-sample positions, not one box for the batch


def test_the_square_follows_the_current_image_size():
    generator = torch.Generator().manual_seed(1)
    for size in (16, 24, 32):
        out = cutout_batch(torch.ones(200, 3, size, size), CutoutOptions(), generator)
        assert int((out[:, 0] == 0).sum(dim=(1, 2)).max()) == (size // 2) ** 2


def test_the_method_resumes_with_the_same_draws():
    def batch_after(method, state):
        state.inputs = torch.ones(8, 3, 16, 16)
        method.on_after_dataloader(state)
        return state.inputs

    class State:
        inputs = None

    first = Cutout(seed=5)
    batch_after(first, State())
    saved = first.state_dict()
    expected = batch_after(first, State())
    resumed = Cutout(seed=5)
    resumed.load_state_dict(saved)
    assert torch.equal(batch_after(resumed, State()), expected)


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: CutoutOptions(holes=0), ValueError, "holes"),
    (lambda: CutoutOptions(side_fraction=0), ValueError, "side_fraction"),
    (lambda: Cutout({"holes": 1}), TypeError, "CutoutOptions"),
    (lambda: cutout_batch(torch.ones(3, 8, 8), CutoutOptions(), torch.Generator()), ValueError, "N, C, H, W"),
    (lambda: cutout_batch(torch.ones(1, 3, 8, 8, dtype=torch.uint8), CutoutOptions(), torch.Generator()),
     TypeError, "floating-point"),
])
def test_bad_options_and_batches_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()
