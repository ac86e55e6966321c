import pytest
import torch

from fastcore_ops.training.config import override
from fastcore_ops.training.methods import Lookahead, LookaheadOptions, TrainState, lookahead_pull_
from fastcore_ops.training.recipes import get_recipe


def make_state(model, total_steps=20):
    return TrainState(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                      scaler=torch.amp.GradScaler("cpu", enabled=False), device=torch.device("cpu"),
                      num_classes=2, steps_per_epoch=4, total_steps=total_steps)


def toy_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))


def float_tensors(model):
    return [t.detach().clone() for t in model.state_dict().values() if t.is_floating_point()]


def jump(model, generator):
    """A known trajectory: every float weight and statistic moves to a new value, as a step would."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(torch.randn(tensor.shape, generator=generator))


def test_the_pull_grows_as_the_cube_of_the_progress_to_its_maximum():
    method = Lookahead(every_steps=5, max_pull=0.5, ramp_power=3.0)
    assert method.pull(0, 100) == 0.0
    assert method.pull(50, 100) == pytest.approx(0.5 * 0.125)
    assert method.pull(100, 100) == pytest.approx(0.5)


def test_at_its_interval_it_pulls_the_weights_toward_the_slow_copy_and_not_between():
    model = toy_model()
    method = Lookahead(every_steps=3, max_pull=0.9, ramp_power=1.0)
    state = make_state(model, total_steps=10)
    method.on_fit_start(state)
    slow = float_tensors(model)
    generator = torch.Generator().manual_seed(1)
    for step in range(1, 10):
        jump(model, generator)
        fast = float_tensors(model)
        state.step = step
        method.on_step_end(state)
        if step % 3:
            assert all(torch.equal(a, b) for a, b in zip(float_tensors(model), fast))
            continue
        pull = 0.9 * step / 10
        slow = [s + (1 - pull) * (f - s) for s, f in zip(slow, fast)]
        for got, expected in zip(float_tensors(model), slow):
            torch.testing.assert_close(got, expected)
    # The integer batch count is not averaged: it keeps counting.
    assert model[1].num_batches_tracked.item() == 0


def test_the_cost_pass_is_told_which_steps_end_with_a_pull():
    method = Lookahead(every_steps=3, max_pull=0.5, ramp_power=3.0)
    assert [method.cost_state(step, step / 9) for step in range(6)] == [None, None, "lookahead pull"] * 2


def test_the_run_ends_on_the_slow_copy():
    model = toy_model()
    method = Lookahead(every_steps=5, max_pull=0.5, ramp_power=3.0)
    state = make_state(model)
    method.on_fit_start(state)
    initial = float_tensors(model)
    jump(model, torch.Generator().manual_seed(2))
    method.on_fit_end(state)
    assert all(torch.equal(a, b) for a, b in zip(float_tensors(model), initial))


def test_the_functional_form_moves_both_copies_to_the_same_point():
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(4.0)
    slow = {"weight": torch.zeros(1, 2)}
    lookahead_pull_(slow, model, pull=0.25)
    assert torch.equal(slow["weight"], torch.full((1, 2), 3.0)) and torch.equal(model.weight, slow["weight"])


def test_a_checkpointed_slow_copy_is_restored_before_and_after_the_run_starts():
    model = toy_model()
    method = Lookahead(every_steps=2, max_pull=0.5, ramp_power=1.0)
    method.on_fit_start(make_state(model))
    saved = method.state_dict()
    jump(model, torch.Generator().manual_seed(3))
    before_start = Lookahead(every_steps=2, max_pull=0.5, ramp_power=1.0)
    before_start.load_state_dict(saved)
    before_start.on_fit_start(make_state(model))  # its own copy of the moved weights, then the saved one
    after_start = Lookahead(every_steps=2, max_pull=0.5, ramp_power=1.0)
    after_start.on_fit_start(make_state(model))
    after_start.load_state_dict(saved)
    for resumed in (before_start, after_start):
        resumed.on_fit_end(make_state(model))
        assert all(torch.equal(a, b) for a, b in zip(float_tensors(model), saved["slow"].values()))
    with pytest.raises(ValueError, match="must have the key 'slow'"):
        method.load_state_dict({"averaged_model": {}})


@pytest.mark.parametrize("setting, message", [
    ("{'every_steps': 0}", r"every_steps must be an int >= 1, got 0"),
    ("{'max_pull': 1.0}", r"max_pull must be a number in \[0, 1\), got 1.0"),
    ("{'ramp_power': -1}", r"ramp_power must be a number >= 0, got -1"),
])
def test_options_are_checked_with_the_field_named(setting, message):
    with pytest.raises(ValueError, match=message):
        override(get_recipe("cifar_baseline"), [f"methods.lookahead={setting}"])
    assert LookaheadOptions().attach(None).every_steps == 5
