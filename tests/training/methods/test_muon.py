import pytest
import torch
from torch import nn

from fastcore_ops.training.config import OptimizerConfig, override
from fastcore_ops.training.methods import MuonOptions, MuonSGD, muon_step_, orthogonalized
from fastcore_ops.training.optim import build_optimizer
from fastcore_ops.training.recipes import get_recipe


def conv_bn_head():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(64, 2))  # for 6 x 6 images


def test_orthogonalized_keeps_the_singular_vectors_and_moves_the_values_towards_one():
    torch.manual_seed(0)
    left, _ = torch.linalg.qr(torch.randn(8, 8))
    right, _ = torch.linalg.qr(torch.randn(24, 8))
    values = torch.tensor([5.0, 3.0, 2.0, 1.0, 0.5, 0.3, 0.2, 0.1])
    result = orthogonalized(left @ torch.diag(values) @ right.T, steps=5)
    # Its singular vectors are the input's: projected on them, the result is diagonal.
    projected = left.T @ result @ right
    assert torch.allclose(projected, torch.diag(projected.diagonal()), atol=1e-4)
    assert ((projected.diagonal() > 0.6) & (projected.diagonal() < 1.3)).all(), projected.diagonal()
    tall = orthogonalized((left @ torch.diag(values) @ right.T).T, steps=5)  # a tall matrix: the same, transposed
    assert torch.allclose(tall, result.T, atol=1e-5)


def test_a_step_rescales_the_bank_then_moves_it_along_the_orthogonalized_nesterov_momentum():
    torch.manual_seed(0)
    weight, grad, buffer = torch.randn(4, 2, 3, 3), torch.randn(4, 2, 3, 3), torch.randn(4, 2, 3, 3)
    new_buffer = 0.6 * buffer + grad
    direction = grad + 0.6 * new_buffer
    expected = weight * 2 / weight.norm() - 0.1 * orthogonalized(direction.reshape(4, -1), 3).view(4, 2, 3, 3)
    muon_step_(weight, grad, buffer, lr=0.1, momentum=0.6, nesterov=True, steps=3)
    assert torch.allclose(buffer, new_buffer) and torch.allclose(weight, expected, atol=1e-6)


def test_the_filters_step_by_muon_and_the_rest_by_sgd_in_one_optimizer():
    model = conv_bn_head()
    config = OptimizerConfig(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
    optimizer = build_optimizer(model, config, [MuonOptions(lr=0.2)])
    assert isinstance(optimizer, MuonSGD)
    [muon] = [group for group in optimizer.param_groups if group.get("muon")]
    assert muon["params"] == [model[0].weight] and muon["lr"] == 0.2 and muon["weight_decay"] == 0.0
    model_copy = conv_bn_head()  # the same model on SGD alone, for the others
    plain = build_optimizer(model_copy, config)
    images = torch.randn(4, 3, 6, 6)
    for net, opt in ((model, optimizer), (model_copy, plain)):
        net(images).square().sum().backward()
        opt.step()
    for name in ("1.weight", "1.bias", "3.weight", "3.bias"):
        assert torch.equal(model.state_dict()[name], model_copy.state_dict()[name]), name
    assert not torch.allclose(model[0].weight, model_copy[0].weight)
    assert set(optimizer.state_dict()["state"]) == set(range(len(list(model.parameters())))), "every state saved"


def test_refusals_name_the_fix():
    with pytest.raises(ValueError, match="momentum must be a number in"):
        MuonOptions(momentum=1.0)
    with pytest.raises(ValueError, match="muon found no trainable convolution filter in Linear; set methods.muon=None"):
        build_optimizer(nn.Linear(2, 2), OptimizerConfig(), [MuonOptions()])
    with pytest.raises(ValueError, match="methods.muon runs beside SGD with coupled weight decay, got optimizer.name="
                                         "'sgd', decoupled_weight_decay=True"):
        override(get_recipe("cifar_record"), ["methods.muon={}", "optimizer.decoupled_weight_decay=True"])
    with pytest.raises(ValueError, match="methods.muon runs beside SGD .* got optimizer.name='adamw'"):
        build_optimizer(conv_bn_head(), OptimizerConfig(name="adamw", nesterov=False), [MuonOptions()])


def test_a_tiny_record_run_trains_its_filters_with_muon_and_keeps_their_momentum(micro_cifar):
    from fastcore_ops.training.assemble import build_trainer

    config = override(get_recipe("cifar_record"), [
        "methods.muon={}", "data.batch_size=4", "data.num_workers=0", "precision=fp32",
        "methods.patch_whitening.images=8", f"schedule.scale_schedule_ratio={2 / 9.9!r}"])
    trainer = build_trainer(config, data=micro_cifar, out=None, device=torch.device("cpu"), subset=2, progress=False)
    optimizer = trainer.state.optimizer
    filters = [p for group in optimizer.param_groups if group.get("muon") for p in group["params"]]
    assert isinstance(optimizer, MuonSGD) and len(filters) == 6  # two convolutions in each of three blocks
    trainer.fit()
    for weight in filters:  # each bank ends near the norm Muon rescales it to before a step
        assert weight.norm().item() == pytest.approx(weight.shape[0] ** 0.5, rel=0.2)
    assert all("momentum_buffer" in optimizer.state[weight] for weight in filters)
