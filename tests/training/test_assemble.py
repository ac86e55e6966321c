"""build_trainer: the scale schedule stretches every schedule together, and the LR follows the global batch."""

import pytest
import torch

from fastcore_ops.surgery.blurpool import BlurConv2d
from fastcore_ops.surgery.ghost_batchnorm import GhostBatchNorm
from fastcore_ops.surgery.stochastic_depth import StochasticDepthBlock
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.methods import SWA, LayerFreezing
from fastcore_ops.training.methods.library import apply_surgery_methods
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.models import build_model
from fastcore_ops.training.recipes import get_recipe

EPOCHS = 4
# Warmup, progressive resizing, layer freezing and SWA all on, so that each one's timing is checked.
SCHEDULED = ["data.batch_size=8", f"schedule.epochs={EPOCHS}", "schedule.warmup_epochs=1",
             "methods.swa={'start': 0.75}", "methods.layer_freezing={'start': 0.5, 'level': 0.5}", "methods.ema=None"]


def _trainer(config, data):
    return build_trainer(config, data=data, out=None, device=torch.device("cpu"), subset=8, progress=False)


def _lr_factor(trainer, step):
    return trainer.scheduler.lr_lambdas[0](step)


def _resnet20_with_surgeries(config):
    model = build_model("cifar_resnet20", num_classes=10)
    apply_surgery_methods(model, plan_methods(config).surgeries)
    return model


def _size(trainer, step):
    return trainer.train_loader.image_size_at(*divmod(step, len(trainer.train_loader)))


@pytest.mark.parametrize("ratio", [0.5, 3.0])
def test_the_scale_schedule_stretches_every_schedule(ratio, tiny_cifar):
    config = override(get_recipe("cifar_mild"), SCHEDULED)
    plain = _trainer(config, tiny_cifar)
    stretched = _trainer(override(config, [f"schedule.scale_schedule_ratio={ratio}"]), tiny_cifar)
    steps_per_epoch = len(plain.train_loader)
    assert steps_per_epoch == 80 // 8 and len(stretched.train_loader) == steps_per_epoch
    total, stretched_total = plain.state.total_steps, stretched.state.total_steps
    assert (total, stretched_total) == (EPOCHS * steps_per_epoch, round(ratio * EPOCHS * steps_per_epoch))

    warmup = stretched_total // EPOCHS  # one epoch of four, stretched too
    assert _lr_factor(stretched, 0) == pytest.approx(1 / warmup)
    assert _lr_factor(stretched, warmup - 1) == pytest.approx(1.0)
    for fraction in (0.25, 0.5, 0.75, 0.9, 1.0):  # the cosine and the image size at the same points of the run
        assert _lr_factor(stretched, round(fraction * stretched_total)) == pytest.approx(
            _lr_factor(plain, round(fraction * total)))
        assert _size(stretched, round(fraction * stretched_total)) == _size(plain, round(fraction * total))
    assert _size(plain, 0) < _size(plain, total) == 32

    # Freezing and SWA act on the fraction of the run done, which the stretched run reaches at stretched steps.
    assert [type(method) for method in stretched.methods] == [LayerFreezing, SWA]
    stretched.state.step = round(0.75 * stretched_total)
    assert stretched.state.progress == pytest.approx(0.75)


@pytest.mark.parametrize("world_size", [1, 2])
def test_the_optimizer_peaks_at_the_lr_scaled_to_the_global_batch(world_size, tiny_cifar, monkeypatch):
    monkeypatch.setattr("fastcore_ops.training.assemble.joined_world_size", lambda: world_size)
    trainer = _trainer(override(get_recipe("cifar_baseline"), ["data.batch_size=8"]), tiny_cifar)
    peaks = {group["initial_lr"] for group in trainer.state.optimizer.param_groups}
    assert peaks == {0.2 * 8 * world_size / 128}  # the recipe's LR is for one process of 128 images


def test_the_model_gets_the_configured_surgeries_with_their_options():
    config = override(get_recipe("cifar_baseline"), [
        "methods.blurpool={}", "methods.stochastic_depth={'drop_rate': 0.2, 'mode': 'sample'}",
        "methods.ghost_batchnorm={'ghost_batch_size': 4}", "methods.channels_last={}"])
    model = _resnet20_with_surgeries(config)
    kinds = {type(module) for module in model.modules()}
    assert {BlurConv2d, StochasticDepthBlock, GhostBatchNorm} <= kinds
    blocks = [module for module in model.modules() if isinstance(module, StochasticDepthBlock)]
    assert blocks[-1].drop.drop_rate == pytest.approx(0.2) and blocks[-1].drop.mode == "sample"
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.dim() == 4)
    plain = _resnet20_with_surgeries(get_recipe("cifar_baseline"))
    assert not {BlurConv2d, StochasticDepthBlock, GhostBatchNorm} & {type(module) for module in plain.modules()}


@pytest.mark.parametrize("assignments, unused", [
    ([], False), (["methods.blurpool=None", "methods.channels_last=None"], False),
    (["methods.stochastic_depth={'drop_rate': 0.1}"], True), (["methods.stochastic_depth={}"], True),
])
def test_ddp_looks_for_unused_parameters_only_with_stochastic_depth(assignments, unused):
    assert plan_methods(override(get_recipe("cifar_mild"), assignments)).leaves_parameters_unused is unused
