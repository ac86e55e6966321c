import pytest
import torch

from fastcore_ops.training.methods import EMA, EMAOptions, TrainState


def make_state(model):
    return TrainState(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                      scaler=torch.amp.GradScaler("cpu", enabled=False), device=torch.device("cpu"),
                      num_classes=2, steps_per_epoch=4, total_steps=20)


def toy_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))


def float_tensors(model):
    tensors = list(model.parameters()) + [b for b in model.buffers() if b.is_floating_point()]
    return [t.detach().clone() for t in tensors]


def test_decay_halves_a_contribution_every_half_life():
    method = EMA(half_life_steps=10)
    assert method.decay ** 10 == pytest.approx(0.5)


def test_average_follows_the_manual_recurrence():
    model = toy_model()
    method = EMA(half_life_steps=3)
    state = make_state(model)
    method.on_fit_start(state)
    assert state.eval_model is method.averaged_model and state.eval_model is not model
    decay = 0.5 ** (1 / 3)
    manual = float_tensors(model)
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        # A known trajectory: the weights and BatchNorm statistics jump to new values each step.
        with torch.no_grad():
            for tensor in list(model.parameters()) + [b for b in model.buffers() if b.is_floating_point()]:
                tensor.copy_(torch.randn(tensor.shape, generator=generator))
        method.on_step_end(state)
        manual = [decay * m + (1 - decay) * w for m, w in zip(manual, float_tensors(model))]
    for expected, actual in zip(manual, float_tensors(method.averaged_model)):
        torch.testing.assert_close(actual, expected)


def test_checkpoint_restores_the_average_on_resume():
    model = toy_model()
    method = EMA(half_life_steps=2)
    state = make_state(model)
    method.on_fit_start(state)
    with torch.no_grad():
        model[0].weight.add_(1.0)
    method.on_step_end(state)
    checkpoint = method.state_dict()

    resumed = EMA(half_life_steps=2)
    resumed_state = make_state(model)
    resumed.on_fit_start(resumed_state)  # the trainer starts the fit before loading the checkpoint
    resumed.load_state_dict(checkpoint)
    for expected, actual in zip(float_tensors(method.averaged_model), float_tensors(resumed_state.eval_model)):
        torch.testing.assert_close(actual, expected)

    loaded_first = EMA(half_life_steps=2)
    loaded_first.load_state_dict(checkpoint)
    loaded_first.on_fit_start(make_state(model))
    for expected, actual in zip(float_tensors(method.averaged_model), float_tensors(loaded_first.averaged_model)):
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("half_life, error", [
    (0, ValueError), (-3, ValueError), ("10", TypeError), (None, TypeError), (True, TypeError), (2.5, TypeError)])
def test_bad_half_life_is_rejected_by_the_method_as_by_its_options(half_life, error):
    for make in (EMA, EMAOptions):
        with pytest.raises(error, match="half_life_steps"):
            make(half_life_steps=half_life)


def test_bad_checkpoint_is_rejected():
    with pytest.raises(ValueError, match="averaged_model"):
        EMA(half_life_steps=5).load_state_dict({"weights": {}})
