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


def test_the_muon_variant_restates_airbench94_muons_sgd_side_for_our_mean_loss_and_head():
    record, muon = get_recipe("cifar_record"), get_recipe("cifar_record_muon")
    head_scale = 256 / 9  # airbench94_muon's head weights (std 1, logits / 256) over ours (PyTorch's, logits / 9)
    head_lr = 0.67 * 2000 / head_scale ** 2
    assert muon.optimizer.lr == pytest.approx(head_lr) and muon.optimizer.reference_batch == muon.data.batch_size == 2000
    # Its biases' 0.053 per summed image is bias_lr_scale's 64 times the head's, as in the record.
    assert 0.053 * 2000 == pytest.approx(muon.methods.bias_lr_scale.scale * head_lr, rel=1e-4)
    assert muon.optimizer.lr * muon.optimizer.weight_decay == pytest.approx(2e-6 * 2000)  # its decay per step
    assert muon.methods.lookahead is None and muon.methods.muon.lr == 0.24 and muon.schedule.epochs == 8.0
    assert (muon.schedule.warmup_epochs, muon.schedule.final_lr_fraction) == (0.0, 0.0)
    assert muon.methods.tta == record.methods.tta and muon.model == record.model


def test_a_tiny_run_of_the_muon_variant_steps_its_filters_by_muon(micro_cifar):
    config = override(get_recipe("cifar_record_muon"), [
        "data.batch_size=4", "data.num_workers=0", "precision=fp32", "methods.patch_whitening.images=8",
        "schedule.scale_schedule_ratio=0.25"])
    trainer = build_trainer(config, data=micro_cifar, out=None, device=torch.device("cpu"), subset=2, progress=False)
    [muon] = [group for group in trainer.state.optimizer.param_groups if group.get("muon")]
    banks = [p for p in trainer.model.parameters() if p.dim() == 4 and p.requires_grad]
    assert muon["params"] == banks and len(banks) == 6  # two convolutions a block; the frozen stem stays out
    result = trainer.fit()
    # Muon left every bank at norm sqrt(its output channels) before its last step, which moved it by lr * ~1.
    for bank in banks:
        assert bank.norm().item() == pytest.approx(len(bank) ** 0.5, rel=0.2)
    assert {"top1", "top1_tta"} <= set(result.metrics)


def test_the_resized_variant_is_the_muon_variant_with_only_its_first_steps_smaller():
    muon, resized = get_recipe("cifar_record_muon"), get_recipe("cifar_record_muon_resize")
    schedule = resized.methods.progressive_resize
    assert muon.methods.progressive_resize is None and schedule is not None
    assert override(resized, ["methods.progressive_resize=None", "name=cifar_record_muon"]) == muon
    sizes = [schedule.size(32, step / 200) for step in range(201)]  # 200 steps, batch 2000 for 8 epochs
    assert sizes == [28] * 60 + [32] * 141  # 28 px for the first 30% of the run
