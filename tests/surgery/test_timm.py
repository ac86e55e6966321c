"""The surgeries on timm's models: its norm-act layers, its ResNet blocks, its squeeze-excite gates (small inputs, CPU)."""

import pytest
import torch
import torchvision
from torch import nn

from fastcore_ops import apply_surgery
from fastcore_ops.surgery.ghost_batchnorm import GhostBatchNormAct
from fastcore_ops.surgery.stochastic_depth import DropBranch
from tests.surgery.conftest import images
from tests.surgery.test_core import _assert_unchanged, _snapshot

timm = pytest.importorskip("timm", reason="timm is the optional 'optim' extra (make installs it)")
from timm.layers import BatchNormAct2d  # noqa: E402

pytestmark = pytest.mark.usefixtures("reference_kernels")


def build_timm(name: str, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=10, **kwargs)


def test_ghost_batchnorm_replaces_timm_norm_acts_keeping_their_activation_and_eval_outputs():
    model = build_timm("efficientnet_b0").eval()
    norms = {name: m for name, m in model.named_modules() if type(m) is BatchNormAct2d}
    keys = model.state_dict().keys()
    x = images(4)
    before = model(x)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    report = apply_surgery(model, [("ghost_batchnorm", {"ghost_batch_size": 2})], optimizers=optimizer)

    assert sorted(c.path for c in report["ghost_batchnorm"].changes) == sorted(norms) and len(norms) == 49
    operated = dict(model.named_modules())
    for name, norm in norms.items():
        assert type(operated[name]) is GhostBatchNormAct
        assert operated[name].act is norm.act and operated[name].weight is norm.weight
    assert model.state_dict().keys() == keys
    torch.testing.assert_close(model(x), before)  # eval: the running statistics, as before

    model.train()
    running_mean = model.bn1.running_mean.clone()
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), torch.arange(4)).backward()
    optimizer.step()
    assert not torch.equal(model.bn1.running_mean, running_mean)
    assert all(p.grad is not None for p in model.parameters())


def test_a_ghost_norm_act_normalizes_each_chunk_then_applies_drop_and_activation():
    torch.manual_seed(0)
    norm = BatchNormAct2d(6, act_layer=nn.SiLU)
    reference = BatchNormAct2d(6, act_layer=nn.SiLU)
    ghost = GhostBatchNormAct(norm, ghost_batch_size=2)
    x = torch.randn(6, 6, 3, 3) * 2 + 1
    # A BatchNormAct2d on each chunk alone: its own statistics, then SiLU (negative values survive it, unlike ReLU).
    expected = torch.cat([reference(chunk) for chunk in x.split(2)])
    torch.testing.assert_close(ghost(x), expected)
    assert (expected < 0).any()


def test_stochastic_depth_fills_timm_resnet_drop_path_slots_and_drops_only_in_training():
    model = build_timm("resnet18", zero_init_last=False).eval()  # branches that are not zero at the start
    x = images(2)
    before = model(x)
    report = apply_surgery(model, [("stochastic_depth", {"drop_rate": 0.4})])

    blocks = [m for m in model.modules() if isinstance(m, timm.models.resnet.BasicBlock)]
    assert [c.path for c in report["stochastic_depth"].changes][:2] == ["layer1.0.drop_path", "layer1.1.drop_path"]
    rates = [block.drop_path.drop_rate for block in blocks]
    assert len(rates) == 8 and rates == sorted(rates) and rates[-1] == pytest.approx(0.4)
    torch.testing.assert_close(model(x), before)  # eval runs every branch as it is
    assert "already applied" in apply_surgery(model, ["stochastic_depth"])["stochastic_depth"].note

    last = blocks[-1].train()  # no downsample: a dropped branch leaves relu(x)
    last.drop_path.drop_rate = 0.5
    x = torch.randn(4, 512, 2, 2, requires_grad=True)
    torch.manual_seed(0)
    dropped = []
    for _ in range(20):
        last.zero_grad(set_to_none=True)
        out = last(x)
        out.sum().backward()
        dropped.append(torch.equal(out, torch.relu(x)))
        # A branch dropped for the whole batch gives its weights no gradient, as a skipped one does.
        assert (last.conv1.weight.grad is None) == dropped[-1]
    assert set(dropped) == {True, False}


@pytest.mark.parametrize("mode", ["block", "sample"])
def test_timm_and_torchvision_resnets_with_stochastic_depth_compute_the_same_in_training(mode):
    """The same weights, the same seed: timm's drop_path slot drops as the torchvision wrapper does."""
    ours = build_timm("resnet18", zero_init_last=False)
    theirs = torchvision.models.resnet18(num_classes=10)
    theirs.load_state_dict(ours.state_dict())
    for model in (ours, theirs):
        apply_surgery(model, [("stochastic_depth", {"drop_rate": 0.5, "mode": mode})])
        model.train()
    x = images(4)
    for seed in range(3):
        outputs = []
        for model in (ours, theirs):
            torch.manual_seed(seed)
            outputs.append(model(x))
        torch.testing.assert_close(*outputs)


def test_stochastic_depth_leaves_a_timm_model_built_with_drop_path_rate_alone():
    model = build_timm("resnet18", drop_path_rate=0.1)
    before = _snapshot(model)
    with pytest.warns(UserWarning, match=r"already has stochastic depth \(timm's DropPath, from drop_path_rate > 0\), "
                                         r"at layer1.1.drop_path, .* and 4 more; leave stochastic_depth out, or build "
                                         r"the model with drop_path_rate=0"):
        report = apply_surgery(model, ["stochastic_depth"])
    record = report["stochastic_depth"]
    assert not record.changes and len(record.skipped) == 8 and "layer4.1  skipped" in str(report)
    _assert_unchanged(before, model)
    assert not any(isinstance(m, DropBranch) for m in model.modules())


@pytest.mark.parametrize("library,name,gate", [
    ("timm", "efficientnet_b0", "blocks.0.0.se"),
    ("timm", "seresnet18", "layer1.0.se"),
    ("torchvision", "mobilenet_v3_small", "features.1.block.1"),
])
def test_squeeze_excite_skips_a_model_that_already_has_gates_and_the_other_surgeries_still_run(library, name, gate):
    torch.manual_seed(0)
    model = build_timm(name) if library == "timm" else torchvision.models.get_model(name, num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    parameters = [id(p) for p in model.parameters()]
    wide = [n for n, m in model.named_modules()
            if type(m) is nn.Conv2d and min(m.in_channels, m.out_channels) >= 128]
    with pytest.warns(UserWarning, match=rf"'squeeze_excite': skipped {len(wide)} places: the model already has "
                                         rf"squeeze-excite gates, at {gate}, .*; a second gate is not added"):
        report = apply_surgery(model, ["squeeze_excite", ("ghost_batchnorm", {"ghost_batch_size": 2})], optimizer)
    assert not report["squeeze_excite"].changes and report["squeeze_excite"].skipped == wide
    assert report["ghost_batchnorm"].changes  # a skip is not a failure: the rest of the request ran
    assert [id(p) for p in model.parameters()] == parameters
    assert [id(p) for p in optimizer.param_groups[0]["params"]] == parameters


def test_a_failed_surgery_on_a_timm_model_puts_every_slot_and_norm_back(failing_surgery):
    model = build_timm("resnet18")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    before = _snapshot(model, optimizer)
    with pytest.raises(RuntimeError, match="planned failure"):
        apply_surgery(model, ["stochastic_depth", "ghost_batchnorm", failing_surgery], optimizer)
    _assert_unchanged(before, model, optimizer)
    assert all(block.drop_path is None for block in model.modules() if isinstance(block, timm.models.resnet.BasicBlock))


# What each CNN surgery does to the three timm families the issue names: ResNet (BatchNorm, BasicBlock),
# EfficientNet (BatchNormAct2d, its own squeeze-excite gates), ConvNeXt (LayerNorm, no BatchNorm, drop
# paths as Identity): it changes what it claims, or leaves the model with a warning that says why.
TIMM_OUTCOMES = {
    "resnet18": {"blurpool": "changes", "squeeze_excite": "changes", "stochastic_depth": "changes",
                 "ghost_batchnorm": "changes", "channels_last": "changes"},
    "efficientnet_b0": {"blurpool": "changes", "squeeze_excite": "the model already has squeeze-excite gates",
                        "stochastic_depth": "holds none of what it operates on: it would drop the residual branch",
                        "ghost_batchnorm": "changes", "channels_last": "changes"},
    "convnext_atto": {"blurpool": "changes", "squeeze_excite": "changes",
                      "stochastic_depth": "holds none of what it operates on: it would drop the residual branch",
                      "ghost_batchnorm": "holds none of what it operates on: it would replace BatchNorm1d/2d",
                      "channels_last": "changes"},
}


@pytest.mark.parametrize("name", sorted(TIMM_OUTCOMES))
def test_each_surgery_changes_a_timm_model_or_says_why_not(name, recwarn):
    for surgery, outcome in TIMM_OUTCOMES[name].items():
        model = build_timm(name)
        report = apply_surgery(model, [surgery])[surgery]
        if outcome == "changes":
            assert report.changes or report.steps, f"{surgery} changed nothing in {name}: {report.note}"
            model.train()
            nn.functional.cross_entropy(model(images(4)), torch.arange(4)).backward()  # the operated model trains
        else:
            assert not report.changes and outcome in report.note, (surgery, report.note)
            assert any(outcome in str(warning.message) for warning in recwarn), surgery
