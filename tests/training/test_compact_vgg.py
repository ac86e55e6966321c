"""The compact VGG (airbench94's network): its shape, what trains in it, and whitening its stem."""

import pytest
import torch
from torch import nn

from fastcore_ops.training.methods import PatchWhiteningOptions, whiten_stem_
from fastcore_ops.training.models import CompactVGG, build_model


def test_its_parameters_are_those_of_airbench94s_network_counted_by_hand():
    model = build_model("cifar_compact_vgg", 10)
    stem = 24 * 3 * 2 * 2 + 24
    blocks = sum(cin * cout * 9 + cout * cout * 9 + 4 * cout for cin, cout in ((24, 64), (64, 256), (256, 256)))
    assert sum(p.numel() for p in model.parameters()) == stem + blocks + 256 * 10 == 1_972_792


def test_its_batchnorms_train_their_biases_only_and_forget_fast():
    norms = [m for m in build_model("cifar_compact_vgg", 10).modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(norms) == 6
    assert all(not n.weight.requires_grad and n.bias.requires_grad and n.momentum == 0.4 for n in norms)


def test_32_px_images_end_as_one_pixel_and_scaled_logits():
    model = CompactVGG(num_classes=7, widths=(8, 16, 16), logit_scale=0.5).eval()
    images = torch.randn(3, 3, 32, 32)
    features = model.pool(model.blocks(model.act(model.stem(images))))
    assert features.shape == (3, 16, 1, 1)
    torch.testing.assert_close(model(images), 0.5 * model.fc(features.flatten(1)))


def test_the_smallest_image_it_takes_is_named_and_one_pixel_less_is_refused_with_the_fix():
    model = CompactVGG(widths=(8, 16, 16)).eval()
    assert model(torch.randn(1, 3, 26, 26)).shape == (1, 10)
    with pytest.raises(ValueError, match=r"at least 26x26 px .* got \(26, 25\); train at a larger size, or leave out"):
        model(torch.randn(1, 3, 26, 25))


def test_patch_whitening_sets_all_12_components_of_its_stem_and_their_negatives():
    model = build_model("cifar_compact_vgg", 10)
    stem = whiten_stem_(model, [torch.randn(8, 3, 32, 32)], PatchWhiteningOptions(images=8))
    assert stem is model.stem and torch.equal(stem.weight[:12], -stem.weight[12:])
    assert torch.linalg.matrix_rank(stem.weight[:12].flatten(1)) == 12


@pytest.mark.parametrize("kwargs, message", [({"widths": (8, 16)}, "widths must be the channels of 3 blocks"),
                                             ({"logit_scale": 0}, "logit_scale must be a number > 0")])
def test_bad_options_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CompactVGG(**kwargs)
