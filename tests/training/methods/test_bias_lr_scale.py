import pytest
import torch
from torch import nn

from fastcore_ops.training.config import OptimizerConfig, override
from fastcore_ops.training.methods import BiasLRScaleOptions, bias_lr_groups
from fastcore_ops.training.optim import build_optimizer
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.schedule import warmup_cosine


def conv_bn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=True), nn.BatchNorm2d(4), nn.Linear(4, 2))


def groups_by_parameter(optimizer):
    return {id(p): group for group in optimizer.param_groups for p in group["params"]}


@pytest.mark.parametrize("decoupled, bias_decay", [(False, 1e-3 / 64), (True, 1e-3)])
def test_the_norm_biases_alone_get_the_scaled_lr_and_the_same_decay_per_step(decoupled, bias_decay):
    model = conv_bn()
    config = OptimizerConfig(lr=0.1, momentum=0.9, weight_decay=1e-3, decoupled_weight_decay=decoupled)
    optimizer = build_optimizer(model, config, [BiasLRScaleOptions(scale=64.0)])
    groups = groups_by_parameter(optimizer)
    assert groups[id(model[1].bias)]["lr"] == pytest.approx(6.4)
    assert groups[id(model[1].bias)]["weight_decay"] == pytest.approx(bias_decay)
    for parameter in (model[0].weight, model[0].bias, model[1].weight, model[2].weight):
        assert groups[id(parameter)]["lr"] == 0.1 and groups[id(parameter)]["weight_decay"] == 1e-3
    assert sum(len(group["params"]) for group in optimizer.param_groups) == len(list(model.parameters()))


def test_the_schedule_scales_the_bias_lr_as_every_other():
    model = conv_bn()
    optimizer = build_optimizer(model, OptimizerConfig(lr=0.1), [BiasLRScaleOptions(scale=8.0)])
    scheduler = warmup_cosine(optimizer, warmup_steps=4, total_steps=10)
    for _ in range(2):
        optimizer.step()
        scheduler.step()
    bias_lr = groups_by_parameter(optimizer)[id(model[1].bias)]["lr"]
    assert bias_lr == pytest.approx(8 * groups_by_parameter(optimizer)[id(model[0].weight)]["lr"]) and bias_lr < 0.8


def test_groups_without_decay_keep_their_own_options():
    model = conv_bn()
    groups = [{"params": [model[0].weight, model[2].weight], "weight_decay": 1e-3},
              {"params": [model[0].bias, model[1].weight, model[1].bias], "weight_decay": 0.0, "lr": 0.5}]
    shaped = bias_lr_groups(model, groups, lr=0.1, scale=2.0, decay_follows_lr=True)
    assert [([tuple(p.shape) for p in g["params"]], g.get("lr"), g["weight_decay"]) for g in shaped] == [
        ([(4, 3, 3, 3), (2, 4)], None, 1e-3), ([(4,), (4,)], 0.5, 0.0), ([(4,)], 1.0, 0.0)]
    assert shaped[2]["params"][0] is model[1].bias


def test_a_frozen_bias_stays_out_and_a_model_without_one_is_named():
    model = conv_bn()
    model[1].bias.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable normalization bias in Sequential; set methods.bias_lr_scale=None"):
        bias_lr_groups(model, [{"params": list(model.parameters())}], lr=0.1, scale=2.0, decay_follows_lr=True)


def test_the_scale_is_checked():
    with pytest.raises(ValueError, match=r"scale must be a number > 0, got -1"):
        override(get_recipe("cifar_baseline"), ["methods.bias_lr_scale={'scale': -1}"])


def test_ghost_batchnorm_s_biases_are_norm_biases_and_its_scales_skip_decay_on_request():
    """After Ghost BatchNorm's surgery the norms are GhostBatchNorm, holding the BatchNorm's own parameters: the
    record's recipes with ghost_batchnorm added found no bias to scale and refused to train."""
    from fastcore_ops.surgery.ghost_batchnorm import GhostBatchNorm

    model = conv_bn()
    model[1] = GhostBatchNorm(model[1], ghost_batch_size=2)
    config = OptimizerConfig(lr=0.1, weight_decay=1e-3, no_decay_norm_and_bias=True)
    groups = groups_by_parameter(build_optimizer(model, config, [BiasLRScaleOptions(scale=64.0)]))
    assert groups[id(model[1].bias)]["lr"] == pytest.approx(6.4)
    assert groups[id(model[1].weight)]["weight_decay"] == 0.0 and groups[id(model[0].weight)]["weight_decay"] == 1e-3
