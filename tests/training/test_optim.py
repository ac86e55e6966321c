"""SGD(W), the parameter groups without decay, and the warmup + cosine schedule, against their formulas."""

import math

import pytest
import torch
from torch import nn

from fastcore_ops.training.config import OptimizerConfig
from fastcore_ops.training.optim import DecoupledSGDW, build_optimizer, parameter_groups
from fastcore_ops.training.schedule import lr_factor, warmup_cosine


def test_warmup_is_linear_and_the_cosine_ends_at_the_final_fraction():
    factors = [lr_factor(step, warmup_steps=4, total_steps=14, final_fraction=0.1) for step in range(15)]
    assert factors[:4] == [0.25, 0.5, 0.75, 1.0]
    assert factors[9] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert factors[14] == pytest.approx(0.1)


def test_scheduler_sets_the_learning_rate_step_by_step():
    optimizer = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.4)
    scheduler = warmup_cosine(optimizer, warmup_steps=2, total_steps=6)
    seen = []
    for _ in range(6):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen[:2] == pytest.approx([0.2, 0.4]) and seen[4] == pytest.approx(0.4 * 0.5 * (1 + math.cos(math.pi * 0.5)))


def test_decoupled_decay_shrinks_weights_by_decay_times_lr_over_peak_then_steps_on_the_gradient():
    weight = nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = DecoupledSGDW([weight], lr=0.5, weight_decay=0.1)
    optimizer.param_groups[0]["lr"] = 0.25  # the schedule halved the lr: the decay halves too
    weight.grad = torch.tensor([0.2, 0.4])
    optimizer.step()
    expected = torch.tensor([1.0, -2.0]) * (1 - 0.1 * 0.25 / 0.5) - 0.25 * torch.tensor([0.2, 0.4])
    assert torch.allclose(weight.detach(), expected)
    assert optimizer.param_groups[0]["weight_decay"] == 0.1


def test_norm_weights_and_biases_get_no_decay_on_request():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(2))
    model(torch.zeros(1, 3, 5, 5))
    decayed, kept = parameter_groups(model, 5e-4, no_decay_norm_and_bias=True)
    assert {id(p) for p in decayed["params"]} == {id(model[0].weight), id(model[3].weight)}
    assert {id(p) for p in kept["params"]} == {id(model[0].bias), id(model[1].weight), id(model[1].bias),
                                               id(model[3].bias)}
    assert kept["weight_decay"] == 0.0 and decayed["weight_decay"] == 5e-4
    (single,) = parameter_groups(model, 5e-4, no_decay_norm_and_bias=False)
    assert len(single["params"]) == 6


def test_build_optimizer_picks_sgdw_for_decoupled_decay():
    model = nn.Linear(2, 2)
    assert type(build_optimizer(model, OptimizerConfig(decoupled_weight_decay=True))) is DecoupledSGDW
    plain = build_optimizer(model, OptimizerConfig(nesterov=True, momentum=0.875))
    assert type(plain) is torch.optim.SGD and plain.defaults["nesterov"] and plain.defaults["momentum"] == 0.875


class TiedLM(nn.Module):
    """A GPT in miniature: embeddings, a norm, a projection, and a head that shares the token embedding."""

    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(10, 4), nn.Embedding(8, 4)
        self.ln = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.wte.weight


def test_adamw_exempts_norm_weights_biases_and_embeddings_counting_a_tied_weight_once():
    model = TiedLM()
    config = OptimizerConfig(name="adamw", lr=1e-3, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1,
                             no_decay_norm_and_bias=True, no_decay_embeddings=True)
    optimizer = build_optimizer(model, config)
    assert type(optimizer) is torch.optim.AdamW
    assert optimizer.defaults["betas"] == (0.8, 0.9) and optimizer.defaults["eps"] == 1e-6
    decayed, kept = optimizer.param_groups
    assert [id(p) for p in decayed["params"]] == [id(model.proj.weight)] and decayed["weight_decay"] == 0.1
    assert {id(p) for p in kept["params"]} == {id(model.wte.weight), id(model.wpe.weight), id(model.ln.weight),
                                               id(model.ln.bias), id(model.proj.bias)}
    assert kept["weight_decay"] == 0.0
    listed = [id(p) for group in optimizer.param_groups for p in group["params"]]
    assert len(listed) == len(set(listed)) == len(list(model.parameters())) == 6  # the tied weight once


def test_embeddings_alone_can_be_exempt_and_the_tied_head_goes_with_them():
    model = TiedLM()
    decayed, kept = parameter_groups(model, 0.1, no_decay_norm_and_bias=False, no_decay_embeddings=True)
    assert {id(p) for p in kept["params"]} == {id(model.wte.weight), id(model.wpe.weight)}
    assert id(model.head.weight) in {id(p) for p in kept["params"]}
    assert {id(p) for p in decayed["params"]} == {id(model.ln.weight), id(model.ln.bias), id(model.proj.weight),
                                                  id(model.proj.bias)}


def test_adamw_decays_the_weights_by_lr_times_decay_whatever_the_gradient():
    weight = nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = build_optimizer(nn.ParameterList([weight]), OptimizerConfig(name="adamw", lr=0.5, weight_decay=0.1))
    weight.grad = torch.zeros(2)
    optimizer.step()
    assert torch.allclose(weight.detach(), torch.tensor([1.0, -2.0]) * (1 - 0.5 * 0.1))


def test_build_optimizer_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="optimizer.name must be one of 'sgd', 'adamw', 'lamb', 'lars', got 'adam'"):
        build_optimizer(nn.Linear(2, 2), OptimizerConfig(name="adam"))


class WeightAndBias(nn.Module):
    """One decayed weight and one bias without decay, with gradients set by hand."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([[0.5, -1.0], [2.0, 0.25]]))
        self.bias = nn.Parameter(torch.tensor([0.3, -0.6]))

    def step_with(self, optimizer, gradients):
        for weight_grad, bias_grad in gradients:
            self.weight.grad, self.bias.grad = weight_grad.clone(), bias_grad.clone()
            optimizer.step()


GRADIENTS = [(torch.tensor([[0.1, -0.3], [0.2, 0.05]]), torch.tensor([0.4, -0.1])),
             (torch.tensor([[-0.2, 0.1], [0.3, -0.15]]), torch.tensor([0.2, 0.3]))]


def lamb_by_the_paper(weight, gradients, *, lr, betas, eps, weight_decay):
    """You et al. 2020, Algorithm 2 (with Adam's bias correction): the Adam direction plus the decay,
    scaled by the layer's trust ratio |w| / |update|; without decay, the plain Adam direction."""
    first, second = torch.zeros_like(weight), torch.zeros_like(weight)
    for step, gradient in enumerate(gradients, start=1):
        first = betas[0] * first + (1 - betas[0]) * gradient
        second = betas[1] * second + (1 - betas[1]) * gradient**2
        direction = (first / (1 - betas[0]**step)) / ((second / (1 - betas[1]**step)).sqrt() + eps)
        if weight_decay:
            direction = direction + weight_decay * weight
            direction = direction * (weight.norm() / direction.norm())
        weight = weight - lr * direction
    return weight


def lars_by_the_paper(weight, gradients, *, lr, momentum, weight_decay, trust):
    """You et al. 2017, Algorithm 1: local LR trust x |w| / (|g| + decay x |w|), momentum on the
    scaled, decayed gradient; without decay, plain SGD with momentum."""
    velocity = None
    for gradient in gradients:
        if weight_decay:
            local = trust * weight.norm() / (gradient.norm() + weight_decay * weight.norm())
            gradient = local * (gradient + weight_decay * weight)
        velocity = gradient if velocity is None else momentum * velocity + gradient
        weight = weight - lr * velocity
    return weight


def test_lamb_follows_its_papers_update_rule_and_leaves_undecayed_parameters_unadapted():
    model = WeightAndBias()
    config = OptimizerConfig(name="lamb", lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.05,
                             no_decay_norm_and_bias=True)
    start_weight, start_bias = model.weight.detach().clone(), model.bias.detach().clone()
    model.step_with(build_optimizer(model, config), GRADIENTS)
    settings = dict(lr=0.01, betas=(0.9, 0.99), eps=1e-6)
    torch.testing.assert_close(model.weight.detach(), lamb_by_the_paper(
        start_weight, [g for g, _ in GRADIENTS], weight_decay=0.05, **settings))
    torch.testing.assert_close(model.bias.detach(), lamb_by_the_paper(
        start_bias, [g for _, g in GRADIENTS], weight_decay=0.0, **settings))


def test_lars_follows_its_papers_update_rule_and_leaves_undecayed_parameters_unadapted():
    model = WeightAndBias()
    config = OptimizerConfig(name="lars", lr=2.0, momentum=0.9, weight_decay=1e-4, trust_coefficient=0.02,
                             no_decay_norm_and_bias=True)
    start_weight, start_bias = model.weight.detach().clone(), model.bias.detach().clone()
    model.step_with(build_optimizer(model, config), GRADIENTS)
    settings = dict(lr=2.0, momentum=0.9, trust=0.02)
    torch.testing.assert_close(model.weight.detach(), lars_by_the_paper(
        start_weight, [g for g, _ in GRADIENTS], weight_decay=1e-4, **settings))
    torch.testing.assert_close(model.bias.detach(), lars_by_the_paper(
        start_bias, [g for _, g in GRADIENTS], weight_decay=0.0, **settings))


@pytest.mark.parametrize("name", ["lamb", "lars"])
def test_lamb_and_lars_refuse_decoupled_decay(name):
    from fastcore_ops.training.config import TrainConfig, validate

    with pytest.raises(ValueError, match="decoupled_weight_decay must be False"):
        validate(TrainConfig(optimizer=OptimizerConfig(name=name, decoupled_weight_decay=True)))


def test_a_triangle_rises_from_its_start_and_falls_in_a_line_to_the_final_fraction():
    factors = [lr_factor(step, warmup_steps=4, total_steps=14, final_fraction=0.1, warmup_start=0.2, decay="linear")
               for step in range(15)]
    assert factors[:4] == pytest.approx([0.4, 0.6, 0.8, 1.0])
    assert factors[9] == pytest.approx(0.1 + 0.9 * 0.5) and factors[14] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="decay must be one of"):
        warmup_cosine(torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.4), warmup_steps=2, total_steps=6,
                      decay="step")
