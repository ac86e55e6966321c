import pytest
import torch

from fastcore_ops.training.methods import SAM, TrainState

INPUTS = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))
TARGETS = torch.randn(8, 2, generator=torch.Generator().manual_seed(1))


def loss_at(weight, bias):
    return torch.nn.functional.mse_loss(torch.tanh(INPUTS @ weight.T + bias), TARGETS)


def make_state(scaler, step=0):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    calls = []

    def forward_backward():
        calls.append(1)
        loss = loss_at(model.weight, model.bias)
        scaler.scale(loss).backward()
        return loss

    state = TrainState(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), scaler=scaler,
                       device=torch.device("cpu"), num_classes=2, steps_per_epoch=4, total_steps=20,
                       step=step, forward_backward=forward_backward)
    return state, calls


def expected_sam_gradient(weight, bias, rho):
    """The gradient at w + rho * g / ||g||, computed with autograd on detached copies."""
    weight, bias = weight.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    grads = torch.autograd.grad(loss_at(weight, bias), (weight, bias))
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    adv_weight = (weight + rho * grads[0] / norm).detach().requires_grad_()
    adv_bias = (bias + rho * grads[1] / norm).detach().requires_grad_()
    return torch.autograd.grad(loss_at(adv_weight, adv_bias), (adv_weight, adv_bias))


@pytest.mark.parametrize("scaler", [
    pytest.param(torch.amp.GradScaler("cpu", enabled=False), id="no-scaler"),
    pytest.param(torch.amp.GradScaler("cpu", init_scale=2.0**12), id="scaler"),
])
def test_gradient_is_taken_at_the_ascent_point_and_weights_are_restored(scaler):
    state, calls = make_state(scaler)
    weight, bias = state.model.weight.detach().clone(), state.model.bias.detach().clone()
    expected = expected_sam_gradient(weight, bias, rho=0.3)
    state.forward_backward()
    SAM(rho=0.3).on_after_backward(state)
    scale = scaler.get_scale() if scaler.is_enabled() else 1.0
    torch.testing.assert_close(state.model.weight.grad / scale, expected[0])
    torch.testing.assert_close(state.model.bias.grad / scale, expected[1])
    torch.testing.assert_close(state.model.weight.detach(), weight, atol=1e-6, rtol=0)
    torch.testing.assert_close(state.model.bias.detach(), bias, atol=1e-6, rtol=0)
    assert len(calls) == 2 and state.method_seconds["sam"] > 0


def test_interval_skips_the_steps_in_between():
    method = SAM(rho=0.1, interval=3)
    applied = []
    for step in range(7):
        state, calls = make_state(torch.amp.GradScaler("cpu", enabled=False), step=step)
        state.forward_backward()
        first_gradient = state.model.weight.grad.clone()
        method.on_after_backward(state)
        applied.append(len(calls) == 2)
        if not applied[-1]:
            assert torch.equal(state.model.weight.grad, first_gradient)
    assert applied == [True, False, False, True, False, False, True]


def test_non_finite_gradient_skips_sam():
    state, calls = make_state(torch.amp.GradScaler("cpu", init_scale=2.0**12))
    state.forward_backward()
    state.model.weight.grad[0, 0] = float("inf")
    weight = state.model.weight.detach().clone()
    SAM(rho=0.1).on_after_backward(state)
    assert len(calls) == 1 and "sam" not in state.method_seconds
    assert torch.equal(state.model.weight.detach(), weight)


def test_parameters_without_gradient_are_not_perturbed():
    state, _ = make_state(torch.amp.GradScaler("cpu", enabled=False))
    state.model.bias.requires_grad_(False)
    bias = state.model.bias.detach().clone()
    seen = []
    inner = state.forward_backward

    def recording_forward_backward():
        seen.append(state.model.bias.detach().clone())
        return inner()

    state.forward_backward()
    state.forward_backward = recording_forward_backward
    SAM(rho=0.5).on_after_backward(state)
    assert torch.equal(seen[0], bias) and state.model.bias.grad is None


@pytest.mark.parametrize("options, name, error", [
    (dict(rho=0.0), "rho", ValueError), (dict(rho=-0.1), "rho", ValueError), (dict(rho="0.05"), "rho", TypeError),
    (dict(rho=0.05, interval=0), "interval", ValueError), (dict(rho=0.05, interval=1.5), "interval", TypeError),
])
def test_bad_options_are_rejected(options, name, error):
    with pytest.raises(error, match=name):
        SAM(**options)


def test_missing_forward_backward_is_reported():
    state, _ = make_state(torch.amp.GradScaler("cpu", enabled=False))
    state.forward_backward()
    state.forward_backward = None
    with pytest.raises(ValueError, match="forward_backward"):
        SAM(rho=0.1).on_after_backward(state)
