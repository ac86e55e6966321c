import contextlib

import pytest
import torch

from fastcore_ops.training.methods import TTAOptions, tta_probabilities
from fastcore_ops.training.methods.tta import shifted, tta_views
from fastcore_ops.training.tasks.classification import ImageClassification


def test_a_shift_moves_the_pixels_and_fills_the_uncovered_border_with_zeros():
    image = torch.arange(1.0, 17.0).view(1, 1, 4, 4)
    down_right = shifted(image, 1, 2)
    assert torch.equal(down_right[0, 0, 1:, 2:], image[0, 0, :3, :2])
    assert down_right[0, 0, 0].abs().sum() == 0 and down_right[0, 0, :, :2].abs().sum() == 0
    up_left = shifted(image, -1, -1)
    assert torch.equal(up_left[0, 0, :3, :3], image[0, 0, 1:, 1:])
    with pytest.raises(ValueError, match="smaller translate"):
        shifted(image, 4, 0)


@pytest.mark.parametrize(("options", "count"), [(TTAOptions(), 1), (TTAOptions(flip=False, translate=2), 4),
                                                (TTAOptions(translate=2), 9)])
def test_the_views_are_each_flip_state_times_each_shift_minus_the_original(options, count):
    images = torch.rand(2, 3, 8, 8)
    views = tta_views(images, options)
    assert len(views) == count
    assert all(view.shape == images.shape for view in views)
    assert not any(torch.equal(view, images) for view in views)
    if options.flip:
        assert any(torch.equal(view, images.flip(-1)) for view in views)


def test_probabilities_are_the_mean_softmax_over_the_image_and_its_flip():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 6 * 6, 4))
    images = torch.rand(5, 3, 6, 6)
    with torch.no_grad():
        got = tta_probabilities(model, images, model(images), TTAOptions())
        expected = (model(images).softmax(1) + model(images.flip(-1)).softmax(1)) / 2
    torch.testing.assert_close(got, expected)


class LeftHalf(torch.nn.Module):
    """Scores class 0 by the left half's brightness and class 1 by the right half's: flips change its answer."""

    def forward(self, images):
        width = images.shape[-1]
        left, right = images[..., :width // 2].mean(dim=(1, 2, 3)), images[..., width // 2:].mean(dim=(1, 2, 3))
        return torch.stack([10 * left, 6 * right + 2], dim=1)


def test_evaluation_reports_tta_beside_the_plain_top1_which_it_leaves_alone():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(32, 3, 4, 4, generator=generator)
    labels = torch.randint(0, 2, (32,), generator=generator)
    batches = [(images[:16], labels[:16]), (images[16:], labels[16:])]

    def metrics(tta):
        task = ImageClassification(eval_loader=batches, num_classes=2, loss_fn=None, device=torch.device("cpu"),
                                   evaluations={} if tta is None else {"tta": tta})
        return task.metrics(task.evaluation_sums(LeftHalf(), contextlib.nullcontext))

    plain, augmented = metrics(None), metrics(TTAOptions())
    assert "top1_tta" not in plain and augmented["top1"] == plain["top1"]
    probabilities = tta_probabilities(LeftHalf(), images, LeftHalf()(images), TTAOptions())
    assert augmented["top1_tta"] == pytest.approx((probabilities.argmax(1) == labels).float().mean().item())


def test_options_that_add_no_view_are_refused():
    with pytest.raises(ValueError, match="must add a view"):
        TTAOptions(flip=False)
    with pytest.raises(ValueError, match="translate"):
        TTAOptions(translate=-1)
