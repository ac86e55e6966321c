import math

import pytest
import torch

from fastcore_ops.training.methods import SWA, TrainState


def make_state(model, total_steps=100, steps_per_epoch=10, lrs=(0.1, 0.2)):
    params = list(model.parameters())
    groups = [{"params": params[:1], "lr": lrs[0]}, {"params": params[1:], "lr": lrs[1]}]
    return TrainState(model=model, optimizer=torch.optim.SGD(groups), scaler=torch.amp.GradScaler("cpu", enabled=False),
                      device=torch.device("cpu"), num_classes=2, steps_per_epoch=steps_per_epoch,
                      total_steps=total_steps)


def test_average_is_the_mean_of_the_weights_captured_inside_the_window():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    method = SWA(start_fraction=0.5, end_fraction=0.8, swa_lr=0.05)
    state = make_state(model)
    method.on_fit_start(state)
    captured = []
    generator = torch.Generator().manual_seed(0)
    for epoch_end_step in range(10, 101, 10):
        with torch.no_grad():
            model.weight.copy_(torch.randn(2, 3, generator=generator))
        state.step = epoch_end_step
        method.on_epoch_end(state)
        if 50 <= epoch_end_step <= 80:
            captured.append(model.weight.detach().clone())
    assert method.averaged_count == len(captured) == 4
    torch.testing.assert_close(method.averaged_model.weight, torch.stack(captured).mean(0))


def test_fit_end_captures_once_when_no_epoch_did_and_sets_eval_model():
    model = torch.nn.Linear(3, 2)
    method = SWA(start_fraction=0.9, end_fraction=0.95, swa_lr=0.05)
    state = make_state(model)
    method.on_fit_start(state)
    with torch.no_grad():
        model.weight.fill_(3.0)
    method.on_fit_end(state)
    assert method.averaged_count == 1
    assert state.eval_model is method.averaged_model
    torch.testing.assert_close(state.eval_model.weight, torch.full((2, 3), 3.0))


def test_batch_norm_statistics_are_recomputed_on_the_training_batches():
    model = torch.nn.BatchNorm2d(3)
    generator = torch.Generator().manual_seed(0)
    batches = [(torch.randn(4, 3, 5, 5, generator=generator) * 2 + 1, torch.zeros(4, dtype=torch.long))
               for _ in range(3)]
    method = SWA(start_fraction=0.5, end_fraction=1.0, swa_lr=0.05)
    state = make_state(model)
    method.on_fit_start(state)
    state.train_loader = batches
    method.on_fit_end(state)
    # update_bn averages each batch's statistics with equal weight (momentum None); unbiased variance.
    means = torch.stack([images.mean(dim=(0, 2, 3)) for images, _ in batches])
    variances = torch.stack([images.transpose(0, 1).reshape(3, -1).var(dim=1) for images, _ in batches])
    torch.testing.assert_close(state.eval_model.running_mean, means.mean(0))
    torch.testing.assert_close(state.eval_model.running_var, variances.mean(0))


def test_missing_train_loader_with_batch_norm_is_reported():
    model = torch.nn.BatchNorm1d(2)
    method = SWA(start_fraction=0.5, end_fraction=1.0, swa_lr=0.05)
    state = make_state(model)
    method.on_fit_start(state)
    with pytest.raises(ValueError, match="train_loader"):
        method.on_fit_end(state)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_learning_rate_anneals_to_swa_lr_and_stays(strategy):
    model = torch.nn.Linear(3, 2)
    method = SWA(start_fraction=0.5, end_fraction=1.0, swa_lr=0.01, anneal_steps=10, anneal_strategy=strategy)
    state = make_state(model)
    method.on_fit_start(state)
    seen = {}
    for step in range(1, 101):
        state.step = step
        for group, lr in zip(state.optimizer.param_groups, (0.1, 0.2)):
            group["lr"] = lr * (1 - step / 200)  # the trainer's schedule, stepped before the method
        method.on_step_end(state)
        seen[step] = [group["lr"] for group in state.optimizer.param_groups]
    start = [0.1 * 0.75, 0.2 * 0.75]  # the schedule's value at step 50, where SWA begins
    assert seen[49] == pytest.approx([0.1 * (1 - 49 / 200), 0.2 * (1 - 49 / 200)])
    assert seen[50] == pytest.approx(start)
    remaining = (1 + math.cos(math.pi * 0.3)) / 2 if strategy == "cos" else 0.7
    assert seen[53] == pytest.approx([0.01 + (lr - 0.01) * remaining for lr in start])
    assert seen[60] == pytest.approx([0.01, 0.01]) and seen[100] == pytest.approx([0.01, 0.01])


def test_anneal_steps_default_to_one_epoch():
    method = SWA(start_fraction=0.0, end_fraction=1.0, swa_lr=0.01)
    state = make_state(torch.nn.Linear(3, 2), steps_per_epoch=8)
    method.on_fit_start(state)
    lrs = []
    for step in (0, 4, 8):
        state.step = step
        method.on_step_end(state)
        lrs.append(state.optimizer.param_groups[0]["lr"])
    # Cosine from 0.1 to 0.01 over 8 steps: half-way at step 4, done at step 8.
    assert lrs == pytest.approx([0.1, 0.01 + 0.09 * 0.5, 0.01])


def test_checkpoint_round_trip():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    method = SWA(start_fraction=0.0, end_fraction=1.0, swa_lr=0.01, anneal_steps=10)
    state = make_state(model)
    method.on_fit_start(state)
    state.step = 10
    method.on_step_end(state)
    method.on_epoch_end(state)
    with torch.no_grad():
        model.weight.add_(1.0)
    state.step = 20
    method.on_epoch_end(state)
    checkpoint = method.state_dict()

    resumed = SWA(start_fraction=0.0, end_fraction=1.0, swa_lr=0.01, anneal_steps=10)
    resumed.load_state_dict(checkpoint)  # before on_fit_start: applied when it runs
    resumed.on_fit_start(make_state(model))
    assert resumed.averaged_count == 2
    torch.testing.assert_close(resumed.averaged_model.weight, method.averaged_model.weight)
    assert resumed.state_dict()["anneal_start_step"] == 10


@pytest.mark.parametrize("options, name, error", [
    (dict(start_fraction=1.0, end_fraction=1.0, swa_lr=0.1), "start_fraction", ValueError),
    (dict(start_fraction=-0.1, end_fraction=1.0, swa_lr=0.1), "start_fraction", ValueError),
    (dict(start_fraction=0.5, end_fraction=0.5, swa_lr=0.1), "end_fraction", ValueError),
    (dict(start_fraction=0.5, end_fraction=1.2, swa_lr=0.1), "end_fraction", ValueError),
    (dict(start_fraction=0.5, end_fraction=1.0, swa_lr=0.0), "swa_lr", ValueError),
    (dict(start_fraction=0.5, end_fraction=1.0, swa_lr=0.1, anneal_steps=-1), "anneal_steps", ValueError),
    (dict(start_fraction=0.5, end_fraction=1.0, swa_lr=0.1, anneal_steps=2.5), "anneal_steps", TypeError),
    (dict(start_fraction=0.5, end_fraction=1.0, swa_lr=0.1, anneal_strategy="step"), "anneal_strategy", ValueError),
])
def test_bad_options_are_rejected(options, name, error):
    with pytest.raises(error, match=name):
        SWA(**options)
