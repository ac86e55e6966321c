"""cifar_record: airbench94's values as our recipe states them, and a tiny run of it through the trainer."""

import pytest
import torch

from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.methods import Lookahead
from fastcore_ops.training.recipes import get_recipe


def test_its_optimizer_is_airbench94s_decoupled_one_restated_for_a_mean_loss():
    optimizer = get_recipe("cifar_record").optimizer
    kilostep_scale = 1 + 1 / (1 - 0.85)  # airbench94's step size per gradient under Nesterov momentum 0.85
    assert optimizer.lr == pytest.approx(11.5 / kilostep_scale) and optimizer.reference_batch == 1024
    # airbench94's PyTorch decay on a summed loss, per image of its 1024: 0.0153 * 1024 / kilostep / lr / 1024.
    torch_lr = 11.5 / (1024 * kilostep_scale)
    assert optimizer.weight_decay == pytest.approx(0.0153 * 1024 / (1024 * kilostep_scale) / torch_lr / 1024)


def test_a_tiny_run_trains_the_record_with_each_of_its_methods(micro_cifar):
    config = override(get_recipe("cifar_record"), [
        "data.batch_size=4", "data.num_workers=0", "precision=fp32", "methods.patch_whitening.images=8",
        f"schedule.scale_schedule_ratio={2 / 9.9!r}"])
    trainer = build_trainer(config, data=micro_cifar, out=None, device=torch.device("cpu"), subset=2, progress=False)
    model = trainer.model
    # dirac_init: the blocks' first convolutions start as the identity on their input channels.
    first = model.blocks[1][0]
    assert torch.equal(first.weight[:, :, 1, 1][: first.in_channels], torch.eye(first.in_channels))
    # patch_whitening: the stem is frozen, out of the optimizer.
    stem, whitened = model.stem, model.stem.weight.clone()
    groups = {id(p): group for group in trainer.state.optimizer.param_groups for p in group["params"]}
    assert id(stem.weight) not in groups
    # bias_lr_scale: the BatchNorm biases at 64 times the others' LR.
    norm = model.blocks[0][2]
    assert groups[id(norm.bias)]["lr"] == pytest.approx(64 * groups[id(first.weight)]["lr"])
    result = trainer.fit()
    assert trainer.state.step == 10 and torch.equal(stem.weight, whitened)
    # lookahead: the run ends on its slow copy.
    lookahead = next(method for method in trainer.methods if isinstance(method, Lookahead))
    assert all(torch.equal(tensor, model.state_dict()[name]) for name, tensor in lookahead.state_dict()["slow"].items())
    assert {"top1", "top1_tta"} <= set(result.metrics)
