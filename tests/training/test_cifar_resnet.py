"""The CIFAR ResNet: its architecture against He et al.'s description, surgeries on it, build_model."""

import pytest
import torch
import torchvision
from torch import nn

from fastcore_ops import apply_surgery
from fastcore_ops.surgery.blurpool import BlurConv2d
from fastcore_ops.surgery.squeeze_excite import SqueezeExciteConv2d
from fastcore_ops.surgery.stochastic_depth import StochasticDepthBlock
from fastcore_ops.training.models import build_model, cifar_resnet, cifar_resnet20, cifar_resnet56


def _expected_parameters(n: int, width: int = 16, num_classes: int = 10) -> int:
    """Parameters of a 6n+2 CIFAR ResNet with 1x1 projection shortcuts, counted by hand."""
    def conv_bn(cin, cout, k):
        return cin * cout * k * k + 2 * cout

    total = conv_bn(3, width, 3)
    cin = width
    for cout in (width, 2 * width, 4 * width):
        for _ in range(n):
            total += conv_bn(cin, cout, 3) + conv_bn(cout, cout, 3)
            if cin != cout:
                total += conv_bn(cin, cout, 1)
            cin = cout
    return total + cin * num_classes + num_classes


def test_resnet20_parameter_count_matches_the_paper():
    count = sum(p.numel() for p in cifar_resnet20().parameters())
    assert count == _expected_parameters(3) == 272_474
    assert 0.26e6 < count < 0.28e6  # He et al.: 0.27M


def test_resnet56_parameter_count():
    assert sum(p.numel() for p in cifar_resnet56().parameters()) == _expected_parameters(9)


@pytest.mark.parametrize("depth", [8, 20, 56])
def test_depth_counts_weighted_layers(depth):
    model = cifar_resnet(depth)
    three_by_three = sum(isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3) for m in model.modules())
    linears = sum(isinstance(m, nn.Linear) for m in model.modules())
    assert three_by_three + linears == depth


def test_output_and_stage_shapes():
    model = cifar_resnet20(num_classes=7)
    shapes = {}
    for name in ("layer1", "layer2", "layer3"):
        getattr(model, name).register_forward_hook(lambda m, i, o, name=name: shapes.__setitem__(name, o.shape))
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 7)
    assert shapes == {"layer1": (2, 16, 32, 32), "layer2": (2, 32, 16, 16), "layer3": (2, 64, 8, 8)}
    assert cifar_resnet56(num_classes=100)(torch.randn(1, 3, 32, 32)).shape == (1, 100)


def test_width_scales_every_stage():
    model = cifar_resnet(20, width=8)
    assert model.conv1.out_channels == 8 and model.fc.in_features == 32


def test_zero_init_makes_every_block_start_as_identity():
    torch.manual_seed(0)
    model = cifar_resnet20().eval()
    x = torch.relu(torch.randn(2, 16, 32, 32))  # blocks see post-ReLU inputs
    # The first stage has no shortcut projection, so a zero last BN leaves relu(x) = x.
    torch.testing.assert_close(model.layer1(x), x)
    assert all(block.bn2.weight.abs().sum() == 0 for stage in (model.layer2, model.layer3) for block in stage)
    plain = cifar_resnet20(zero_init_residual=False)
    assert all(block.bn2.weight.abs().sum() > 0 for block in plain.layer1)


@pytest.mark.parametrize("depth", [21, 2, 0, -4])
def test_depth_not_6n_plus_2_is_rejected(depth):
    with pytest.raises(ValueError, match=rf"depth must be 6n \+ 2.*got {depth}"):
        cifar_resnet(depth)


def test_non_integer_depth_is_rejected():
    with pytest.raises(TypeError, match="depth"):
        cifar_resnet(20.0)


def test_surgeries_apply_and_the_model_still_trains():
    torch.manual_seed(0)
    model = cifar_resnet20()
    # Squeeze-excite's default min_channels (128) is above ResNet-20's widest stage (64): a no-op here.
    with pytest.warns(UserWarning, match="squeeze_excite"):
        apply_surgery(model, ["blurpool", "squeeze_excite", ("stochastic_depth", {"drop_rate": 0.1}), "channels_last"])
    # Strided convolutions with >= 16 inputs: the first 3x3 of stages 2 and 3 and their two 1x1 shortcuts.
    assert sum(isinstance(m, BlurConv2d) for m in model.modules()) == 4
    assert sum(isinstance(m, StochasticDepthBlock) for m in model.modules()) == 9
    assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    loss = nn.functional.cross_entropy(model(x), torch.tensor([1, 2]))
    loss.backward()
    assert torch.isfinite(loss)
    assert model.conv1.weight.grad is not None and torch.isfinite(model.conv1.weight.grad).all()
    assert model.fc.weight.grad.abs().sum() > 0


def test_squeeze_excite_reaches_every_block_convolution_at_low_min_channels():
    model = cifar_resnet20()
    apply_surgery(model, [("squeeze_excite", {"min_channels": 16, "latent_channels": 0.25})])
    # All 18 block 3x3 convolutions and the 2 shortcut projections; the RGB stem has 3 inputs.
    assert sum(isinstance(m, SqueezeExciteConv2d) for m in model.modules()) == 20
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_build_model_builds_own_models():
    model = build_model("cifar_resnet56", num_classes=3)
    assert len(model.layer2) == 9
    assert model(torch.randn(1, 3, 32, 32)).shape == (1, 3)


def test_build_model_builds_torchvision_classifiers_untrained():
    model = build_model("resnet18", num_classes=5)
    assert type(model) is torchvision.models.ResNet and model.fc.out_features == 5
    reference = torchvision.models.resnet18(num_classes=5)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in reference.parameters())


@pytest.mark.parametrize("name", ["resnet51", "fasterrcnn_resnet50_fpn", ""])
def test_build_model_rejects_unknown_names(name):
    with pytest.raises(ValueError, match=r"got '.*'.*cifar_resnet20.*resnet50"):
        build_model(name, num_classes=10)


def test_build_model_rejects_bad_num_classes():
    with pytest.raises(ValueError, match="num_classes"):
        build_model("cifar_resnet20", num_classes=0)
