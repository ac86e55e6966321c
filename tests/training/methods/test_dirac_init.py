import pytest
import torch
from torch import nn

from fastcore_ops.training.methods import DiracInitOptions, dirac_convolutions_
from fastcore_ops.training.models import build_model


def test_a_widening_convolution_is_the_identity_on_its_first_channels_and_random_on_the_rest():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, 3, padding=1, bias=False)
    before = conv.weight.clone()
    assert dirac_convolutions_(conv) == 1
    image = torch.randn(2, 3, 6, 6)
    torch.testing.assert_close(conv(image)[:, :3], image)
    assert torch.equal(conv.weight[3:], before[3:])


def test_only_ungrouped_convolutions_with_as_many_outputs_as_inputs_are_set():
    torch.manual_seed(0)
    narrowing, grouped = nn.Conv2d(4, 2, 3), nn.Conv2d(4, 4, 3, groups=2)
    model = nn.Sequential(narrowing, grouped, nn.Conv2d(4, 4, 1))
    kept = [narrowing.weight.clone(), grouped.weight.clone()]
    assert dirac_convolutions_(model) == 1
    assert torch.equal(narrowing.weight, kept[0]) and torch.equal(grouped.weight, kept[1])
    assert torch.equal(model[2].weight[:, :, 0, 0], torch.eye(4))


def test_on_the_compact_vgg_every_block_passes_its_input_through_at_the_start():
    model = build_model("cifar_compact_vgg", 10)
    assert DiracInitOptions().set_up_model(model, []) >= 0
    block = model.blocks[1]
    first = block[0]
    image = torch.randn(1, first.in_channels, 8, 8)
    torch.testing.assert_close(first(image)[:, : first.in_channels], image)


def test_a_model_without_such_a_convolution_is_named():
    with pytest.raises(ValueError, match="dirac_init found no Conv2d .* in Sequential; set methods.dirac_init=None"):
        DiracInitOptions().set_up_model(nn.Sequential(nn.Conv2d(4, 2, 3)), [])
