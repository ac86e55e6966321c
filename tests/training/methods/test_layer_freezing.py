import pytest
import torch

from fastcore_ops.training.methods import LayerFreezing, TrainState, freeze_layers


def small_convnet():
    torch.manual_seed(0)
    # Parameterised layers in order: conv, bn, conv, bn, linear (ReLU and Flatten have none). The convs have no
    # bias: BatchNorm removes it, so its gradient is rounding noise, which moves it on one CPU and not another.
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1, bias=False), torch.nn.BatchNorm2d(2), torch.nn.ReLU(),
        torch.nn.Conv2d(2, 2, 3, padding=1, bias=False), torch.nn.BatchNorm2d(2), torch.nn.Flatten(),
        torch.nn.Linear(2 * 4 * 4, 3),
    )


def layer_params(model):
    return [list(model[i].parameters()) for i in (0, 1, 3, 4, 6)]


def momentum_optimizer(model):
    weights = [p for p in model.parameters() if p.ndim > 1]
    others = [p for p in model.parameters() if p.ndim <= 1]
    return torch.optim.SGD([{"params": weights, "weight_decay": 1e-4}, {"params": others}], lr=0.1, momentum=0.9)


def train_step(model, optimizer):
    optimizer.zero_grad()
    inputs = torch.randn(4, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    model(inputs).square().mean().backward()
    optimizer.step()


def optimizer_param_ids(optimizer):
    return {id(p) for group in optimizer.param_groups for p in group["params"]}


def test_frozen_parameters_leave_the_optimizer_and_stop_training():
    model = small_convnet()
    optimizer = momentum_optimizer(model)
    train_step(model, optimizer)  # fills the momentum buffers
    assert freeze_layers(model, optimizer, 2) == 2
    frozen = [p for layer in layer_params(model)[:2] for p in layer]
    trained = [p for layer in layer_params(model)[2:] for p in layer]
    assert all(not p.requires_grad and p.grad is None for p in frozen)
    assert all(p.requires_grad for p in trained)
    assert not {id(p) for p in frozen} & optimizer_param_ids(optimizer)
    assert optimizer_param_ids(optimizer) == {id(p) for p in trained}
    assert not any(p in optimizer.state for p in frozen)
    assert len(optimizer.param_groups) == 2

    before = [p.detach().clone() for p in model.parameters()]
    train_step(model, optimizer)
    for p, old in zip(model.parameters(), before):
        changed = not torch.equal(p.detach(), old)
        assert changed == p.requires_grad


def test_freezing_is_idempotent_and_never_undone():
    model = small_convnet()
    optimizer = momentum_optimizer(model)
    assert freeze_layers(model, optimizer, 3) == 3
    groups = [list(map(id, g["params"])) for g in optimizer.param_groups]
    assert freeze_layers(model, optimizer, 3) == 3
    assert freeze_layers(model, optimizer, 1) == 3
    assert [list(map(id, g["params"])) for g in optimizer.param_groups] == groups
    assert freeze_layers(model, optimizer, 99) == 5
    assert all(not g["params"] for g in optimizer.param_groups)
    optimizer.step()  # empty groups still step


def make_state(model, step, total_steps=100):
    return TrainState(model=model, optimizer=momentum_optimizer(model), scaler=torch.amp.GradScaler("cpu", enabled=False),
                      device=torch.device("cpu"), num_classes=3, steps_per_epoch=10, total_steps=total_steps, step=step)


@pytest.mark.parametrize("progress_percent, expected", [(0, 0), (40, 0), (50, 0), (70, 1), (75, 2), (90, 3), (100, 4)])
def test_count_follows_progress(progress_percent, expected):
    # L = 5 layers, freeze_level 0.8 from progress 0.5: floor(5 * 0.8 * (p - 0.5) / 0.5).
    model = small_convnet()
    state = make_state(model, step=progress_percent)
    LayerFreezing(freeze_start=0.5, freeze_level=0.8).on_step_end(state)  # each 1% of 100 steps: every step
    frozen_layers = sum(all(not p.requires_grad for p in layer) for layer in layer_params(model))
    assert frozen_layers == expected
    assert all(p.requires_grad for layer in layer_params(model)[expected:] for p in layer)


def test_resume_refreezes_in_fit_start():
    model = small_convnet()
    state = make_state(model, step=100)
    LayerFreezing(freeze_start=0.0, freeze_level=0.6).on_fit_start(state)
    assert [all(not p.requires_grad for p in layer) for layer in layer_params(model)] == [True] * 3 + [False] * 2
    assert len(optimizer_param_ids(state.optimizer)) == 2 + 2  # the last bn and the linear layer


def test_shared_parameter_belongs_to_its_last_layer():
    # As a GPT's input embedding is its output layer: freezing the first layer leaves it training.
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    second.weight = first.weight
    model = torch.nn.Sequential(first, second)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert freeze_layers(model, optimizer, 1) == 1
    assert optimizer_param_ids(optimizer) == {id(second.weight), id(second.bias)}
    assert freeze_layers(model, optimizer, 2) == 2 and not optimizer_param_ids(optimizer)


def test_a_run_shorter_than_an_epoch_freezes_every_percent_of_its_steps():
    model = small_convnet()
    state = make_state(model, step=0, total_steps=1000)
    method = LayerFreezing(freeze_start=0.0, freeze_level=1.0)
    frozen = []
    for step in range(1, 1001):
        state.step = step
        method.on_step_end(state)
        frozen.append(sum(all(not p.requires_grad for p in layer) for layer in layer_params(model)))
    assert frozen[199] == 1 and frozen[198] == 0, "a fifth of 5 layers at 20% of the run, checked every 10 steps"
    assert frozen[-1] == 5


@pytest.mark.parametrize("options, name, error", [
    (dict(freeze_start=1.0, freeze_level=0.5), "freeze_start", ValueError),
    (dict(freeze_start=-0.1, freeze_level=0.5), "freeze_start", ValueError),
    (dict(freeze_start=0.5, freeze_level=1.5), "freeze_level", ValueError),
    (dict(freeze_start=0.5, freeze_level="0.5"), "freeze_level", TypeError),
])
def test_bad_options_are_rejected(options, name, error):
    with pytest.raises(error, match=name):
        LayerFreezing(**options)


@pytest.mark.parametrize("count, error", [(-1, ValueError), (1.0, TypeError), (True, TypeError)])
def test_bad_count_is_rejected(count, error):
    model = small_convnet()
    with pytest.raises(error, match="count"):
        freeze_layers(model, torch.optim.SGD(model.parameters(), lr=0.1), count)
