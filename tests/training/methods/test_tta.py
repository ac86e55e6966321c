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


def test_a_reflected_shift_mirrors_the_image_about_its_edge_padding_each_axis_by_its_own_shift():
    image = torch.arange(1.0, 9.0).view(1, 1, 2, 4)
    # 3 px right on a 2 px tall image: only the columns are padded, so reflect's padding stays below each side.
    assert shifted(image, 0, 3, fill="reflect")[0, 0].tolist() == [[4.0, 3.0, 2.0, 1.0], [8.0, 7.0, 6.0, 5.0]]


@pytest.mark.parametrize(("options", "count"), [(TTAOptions(), 2), (TTAOptions(flip=False, translate=2), 5),
                                                (TTAOptions(translate=2), 10),
                                                (TTAOptions(translate=1, shifts="diagonals"), 6)])
def test_the_views_are_each_flip_state_of_each_shift_the_image_first_their_weights_summing_to_one(options, count):
    images = torch.rand(2, 3, 8, 8)
    views = tta_views(images, options)
    assert len(views) == count and views[0][1] is images
    assert all(view.shape == images.shape for _, view in views)
    assert not any(torch.equal(view, images) for _, view in views[1:])
    assert sum(weight for weight, _ in views) == pytest.approx(1)
    if options.flip:
        assert torch.equal(views[1][1], images.flip(-1))


def test_airbench94s_views_weights_and_logit_average_are_its_tta_level_2():
    """airbench94's tta_level=2 by hand on a 3 x 4 image: the image and its flip weigh 1/4 each; the image
    reflect-padded by 1 px and cropped at its top-left and bottom-right corners, and each crop's flip, 1/8 each;
    the answer is the softmax of the weighted logits. A zero fill, other weights, a flip before the shift, or
    averaged probabilities each fail here."""
    image = torch.arange(1.0, 13.0).view(1, 1, 3, 4)
    down_right = torch.tensor([[6.0, 5, 6, 7], [2, 1, 2, 3], [6, 5, 6, 7]])  # the padded image's top-left crop
    up_left = torch.tensor([[6.0, 7, 8, 7], [10, 11, 12, 11], [6, 7, 8, 7]])  # its bottom-right crop
    expected = [(1 / 4, image[0, 0]), (1 / 4, image[0, 0].flip(-1)), (1 / 8, down_right),
                (1 / 8, down_right.flip(-1)), (1 / 8, up_left), (1 / 8, up_left.flip(-1))]
    options = TTAOptions(translate=1, shifts="diagonals", fill="reflect", shifted_weight=0.5, average="logits")
    views = tta_views(image, options)
    assert [weight for weight, _ in views] == [weight for weight, _ in expected]
    for (_, view), (_, wanted) in zip(views, expected):
        assert torch.equal(view[0, 0], wanted)

    def pixels_as_logits(images):  # each pixel a class's logit: every view's values reach the answer
        return images.flatten(1)

    mean_logits = sum(weight * wanted.flatten() for weight, wanted in expected)
    got = tta_probabilities(pixels_as_logits, image, pixels_as_logits(image), options)
    torch.testing.assert_close(got, mean_logits.softmax(dim=0)[None])


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


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"shifts": "corners", "translate": 1}, ValueError, "shifts must be one of 'axes', 'diagonals', got 'corners'"),
    ({"fill": "edge", "translate": 1}, ValueError, "fill must be one of 'zero', 'reflect', got 'edge'"),
    ({"average": "votes"}, ValueError, "average must be one of 'probabilities', 'logits', got 'votes'"),
    ({"shifted_weight": 1.0, "translate": 1}, ValueError, r"shifted_weight must be a number in \(0, 1\), got 1.0"),
    ({"shifted_weight": 0, "translate": 1}, ValueError, r"shifted_weight must be a number in \(0, 1\), got 0"),
    ({"shifted_weight": "half", "translate": 1}, TypeError, "shifted_weight must be a number in .*, got str 'half'"),
    ({"shifts": "diagonals", "fill": "reflect"}, ValueError,
     "shifts='diagonals', fill='reflect': options of the shifted views, and translate=0 asks for none"),
    ({"shifted_weight": 0.5}, ValueError, "shifted_weight=0.5: options of the shifted views"),
])
def test_bad_options_are_named(options, error, message):
    with pytest.raises(error, match=message):
        TTAOptions(**options)
