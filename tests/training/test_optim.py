"""SGD(W), the parameter groups without decay, and the warmup + cosine schedule, against their formulas."""

import math

import pytest
import torch
from torch import nn

from training.config import OptimizerConfig
from training.optim import DecoupledSGDW, build_optimizer, lr_factor, parameter_groups, warmup_cosine


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
