"""Every CNN surgery on every torchvision model the product supports (small inputs, CPU)."""

import contextlib
import copy
import io

import pytest
import torch
from torch import nn

from fastcore_ops import apply_surgery
from fastcore_ops.surgery.blurpool import BlurConv2d, BlurMaxPool2d
from fastcore_ops.surgery.ghost_batchnorm import GhostBatchNorm
from fastcore_ops.surgery.squeeze_excite import SqueezeExciteConv2d
from fastcore_ops.surgery.stochastic_depth import StochasticDepthBlock
from tests.surgery.conftest import CNN_MODELS, build, images

pytestmark = pytest.mark.usefixtures("reference_kernels")

# Ghost batches of 4 so that the 8-image training batches are cut into chunks that still have variance.
CNN_SURGERIES = ["blurpool", "squeeze_excite", "stochastic_depth", ("ghost_batchnorm", {"ghost_batch_size": 4}),
                 "channels_last"]


def _expected_counts(model: nn.Module) -> dict[str, int]:
    """What each surgery should find, counted independently of its policy code."""
    from torchvision.models.resnet import BasicBlock, Bottleneck
    from torchvision.ops.misc import SqueezeExcitation

    modules = list(model.modules())
    has_gates = any(isinstance(m, SqueezeExcitation) for m in modules)  # EfficientNet, MobileNetV3, RegNetY
    return {
        "blurpool": sum(
            (type(m) is nn.Conv2d and max(m.stride) > 1 and m.in_channels >= 16) or type(m) is nn.MaxPool2d
            for m in modules
        ),
        "squeeze_excite": 0 if has_gates else sum(
            type(m) is nn.Conv2d and m.in_channels >= 128 and m.out_channels >= 128 for m in modules
        ),
        "stochastic_depth": sum(type(m) in (BasicBlock, Bottleneck) for m in modules),
        "ghost_batchnorm": sum(type(m) in (nn.BatchNorm1d, nn.BatchNorm2d) for m in modules),
    }


def _gradient_step(model, halvings=24) -> tuple[float, float, float]:
    """(loss before, loss after, the decrease asked for) of one gradient step on one batch in training mode.

    Every forward pass runs under the same seed, so stochastic depth drops the same blocks each
    time: the comparison sees one fixed function. At initialisation its gradient is huge and the
    loss rough (EfficientNet-B0's gradient norm is 45,000 under 4-image ghost batches), so a fixed
    learning rate lowered the loss on some machines and raised it on others, by their rounding. The
    step walks a unit length down the normalized gradient and halves until the loss falls by at least
    half of what the gradient promises for that length (Armijo's condition): a true gradient gets
    there; a wrong one, or none, does not, however rough the loss is further out.
    """
    x = images(8).contiguous(memory_format=torch.channels_last)
    y = torch.arange(8)
    model.train()
    trained = [p for p in model.parameters() if p.requires_grad]

    def loss():
        torch.manual_seed(123)
        return nn.functional.cross_entropy(model(x), y)

    before = loss()
    gradients = [torch.zeros_like(p) if g is None else g
                 for p, g in zip(trained, torch.autograd.grad(before, trained, allow_unused=True))]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradients])).item()
    start = [p.detach().clone() for p in trained]
    with torch.no_grad():
        for halving in range(halvings):
            length = 0.5 ** halving
            for p, p0, g in zip(trained, start, gradients):
                p.copy_(p0 - g * (length / norm))
            after, asked = loss().item(), 0.5 * length * norm
            if after <= before.item() - asked:
                break
    return before.item(), after, asked


@pytest.fixture(scope="module")
def operated():
    """Each model with all CNN surgeries, built once for the module; with its report and optimizer."""
    cache = {}

    def get(name):
        if name not in cache:
            model = build(name)
            expected = _expected_counts(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
            report = apply_surgery(model, CNN_SURGERIES, optimizers=optimizer)
            cache[name] = model, report, expected, optimizer
        return cache[name]

    return get


@pytest.mark.parametrize("name", CNN_MODELS)
def test_report_counts_match_the_model(name, operated):
    model, report, expected, _ = operated(name)
    for surgery, count in expected.items():
        assert len(report[surgery].changes) == count, surgery
    made = {
        "blurpool": (BlurConv2d, BlurMaxPool2d),
        "squeeze_excite": (SqueezeExciteConv2d,),
        "stochastic_depth": (StochasticDepthBlock,),
        "ghost_batchnorm": (GhostBatchNorm,),
    }
    for surgery, types in made.items():
        assert sum(isinstance(m, types) for m in model.modules()) == expected[surgery], surgery
    assert report["squeeze_excite"].parameters_added == sum(
        p.numel() for m in model.modules() if isinstance(m, SqueezeExciteConv2d) for p in m.excite.parameters()
    )
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.dim() == 4)


@pytest.mark.parametrize("name", CNN_MODELS)
def test_optimizer_holds_exactly_the_trainable_parameters(name, operated):
    model, _, _, optimizer = operated(name)
    held = sorted(id(p) for group in optimizer.param_groups for p in group["params"])
    assert held == sorted(id(p) for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", CNN_MODELS)
def test_output_shape_unchanged_and_training_lowers_the_loss(name, operated):
    model, _, _, _ = operated(name)
    model = copy.deepcopy(model)
    model.eval()
    assert model(images()).shape == (4, 10)
    before, after, asked = _gradient_step(model)
    assert after <= before - asked


@pytest.mark.parametrize("name", CNN_MODELS)
def test_state_dict_round_trips_into_a_model_with_the_same_surgery(name, operated):
    model, _, _, _ = operated(name)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    fresh = build(name, seed=1)
    apply_surgery(fresh, CNN_SURGERIES)
    fresh.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))
    model.eval()
    fresh.eval()
    torch.testing.assert_close(fresh(images()), model(images()))


def _operated_module_kinds(model: nn.Module) -> frozenset[str]:
    """The kinds of module the surgeries put into ``model``, by class name."""
    return frozenset(type(m).__name__ for m in model.modules() if type(m).__module__.startswith("fastcore_ops."))


# torch.compile and torch.export meet torchvision's layers, which PyTorch tests, and the modules
# the surgeries put in, which only we do: models whose operated modules hold every other model's
# combination cover ours at a third of the cost of tracing all nine. MobileNet's blurred
# convolutions are grouped. (MobileNetV3, EfficientNet and RegNetY have squeeze-excite gates of
# their own, so the surgery adds none: MobileNetV2 is the MobileNet that holds ours.)
TRACED_MODELS = ["resnet18", "mobilenet_v2", "vgg16_bn"]


def test_the_traced_models_hold_every_combination_of_operated_modules(operated):
    traced = [_operated_module_kinds(operated(name)[0]) for name in TRACED_MODELS]
    for name in CNN_MODELS:
        assert any(_operated_module_kinds(operated(name)[0]) <= kinds for kinds in traced), name


@pytest.mark.parametrize("name", TRACED_MODELS)
def test_compile_and_export_run_on_the_operated_model(name, operated):
    model, _, _, _ = operated(name)
    model.eval()
    x = images(2).contiguous(memory_format=torch.channels_last)
    expected = model(x)
    compiled = torch.compile(model, backend="aot_eager")
    torch.testing.assert_close(compiled(x), expected)
    exported = torch.export.export(model, (x,))
    torch.testing.assert_close(exported.module()(x), expected)


@pytest.mark.parametrize("name", CNN_MODELS)
@pytest.mark.parametrize("surgery", ["channels_last", "stochastic_depth", "ghost_batchnorm"])
def test_eval_output_unchanged_by_layout_depth_and_norm_surgeries(name, surgery):
    model = build(name).eval()
    x = images()
    before = model(x)
    finds_nothing = surgery == "stochastic_depth" and not _expected_counts(model)["stochastic_depth"]
    with pytest.warns(UserWarning, match="found nothing") if finds_nothing else contextlib.nullcontext():
        apply_surgery(model, [surgery])
    torch.testing.assert_close(model(x), before, rtol=1e-4, atol=1e-5)


def test_stochastic_depth_drops_rising_with_depth_and_per_sample():
    model = build("resnet50")
    apply_surgery(model, [("stochastic_depth", {"drop_rate": 0.4, "mode": "sample"})])
    blocks = [m for m in model.modules() if isinstance(m, StochasticDepthBlock)]
    rates = [b.drop.drop_rate for b in blocks]
    assert rates == sorted(rates) and rates[-1] == pytest.approx(0.4) and rates[0] == pytest.approx(0.4 / 16)
    # Per-sample mode: in training, some samples of a batch skip the last block's branch and others don't.
    last = blocks[-1].train()
    last.drop.drop_rate = 0.5
    x = torch.randn(64, last.block.conv1.in_channels, 2, 2)
    torch.manual_seed(0)
    out = last(x)
    skipped = torch.isclose(out, torch.relu(x))  # the last block has no downsample
    per_sample = skipped.flatten(1).all(dim=1)
    assert 0 < per_sample.sum() < 64


def test_stochastic_depth_block_mode_skips_the_whole_batch():
    model = build("resnet18")
    apply_surgery(model, [("stochastic_depth", {"drop_rate": 0.5})])
    block = [m for m in model.modules() if isinstance(m, StochasticDepthBlock)][-1].train()
    x = torch.randn(8, 512, 2, 2)
    outcomes = set()
    torch.manual_seed(0)
    for _ in range(20):
        out = block(x)
        outcomes.add(bool(torch.equal(out, torch.relu(x))))
    assert outcomes == {True, False}
