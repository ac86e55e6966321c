import pytest
import torch

from fastcore_ops.training.methods import StemFreezing, StemFreezingOptions, TrainState
from fastcore_ops.training.models import build_model


def whitened_vgg():
    """The record's network with its stem as patch whitening leaves it: filters frozen, bias training."""
    torch.manual_seed(0)
    model = build_model("cifar_compact_vgg", 10)
    model.stem.weight.requires_grad_(False)
    return model


def state_at(model, step, total_steps=200):
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    return TrainState(model=model, optimizer=optimizer, scaler=torch.amp.GradScaler("cpu", enabled=False),
                      device=torch.device("cpu"), num_classes=10, steps_per_epoch=25, total_steps=total_steps,
                      step=step)


def optimizer_params(optimizer):
    return {id(p) for group in optimizer.param_groups for p in group["params"]}


@pytest.mark.parametrize("epochs, run_epochs, frozen_from", [(3.0, 8.0, 0.375), (0.0, 8.0, 0.0), (3.0, 3.0, 1.0),
                                                            (3.0, 2.0, 1.0)])
def test_the_stem_freezes_after_its_epochs_of_the_scaled_run(epochs, run_epochs, frozen_from):
    assert StemFreezingOptions(epochs=epochs).attach_at(run_epochs).frozen_from == frozen_from


def test_a_run_never_shorter_than_the_stem_epochs_leaves_the_stem_training():
    method = StemFreezing(frozen_from=1.0)
    assert not method.frozen_at(1.0) and method.cost_state(199, 0.995) is None


def test_the_stem_trains_up_to_its_last_step_and_is_frozen_from_the_next():
    model = whitened_vgg()
    trained_before = {name for name, p in model.named_parameters() if p.requires_grad}
    method = StemFreezingOptions(epochs=3.0).attach_at(run_epochs=8.0)
    state = state_at(model, step=74)
    method.on_step_end(state)  # 74 of 200 steps done: step 75 still trains the stem
    assert model.stem.bias.requires_grad
    state.step = 75
    method.on_step_end(state)
    assert model.stem.bias.grad is None and id(model.stem.bias) not in optimizer_params(state.optimizer)
    assert {name for name, p in model.named_parameters() if p.requires_grad} == trained_before - {"stem.bias"}


def test_a_resumed_run_refreezes_the_stem_at_fit_start():
    model = whitened_vgg()
    state = state_at(model, step=120)
    StemFreezingOptions(epochs=3.0).attach_at(run_epochs=8.0).on_fit_start(state)
    assert not model.stem.bias.requires_grad


def test_with_the_stem_frozen_backpropagation_stops_at_the_first_block_and_the_rest_still_trains():
    model = whitened_vgg()
    state = state_at(model, step=75)
    StemFreezingOptions(epochs=3.0).attach_at(run_epochs=8.0).on_step_end(state)
    reached = []
    model.act.register_forward_hook(lambda module, inputs, output: reached.append(output.requires_grad))
    images = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    before = [p.detach().clone() for p in model.parameters()]
    model(images).square().mean().backward()
    state.optimizer.step()
    assert reached == [False]  # the stem's activation leaves the graph: no gradient is computed for it
    first_block_conv = model.blocks[0][0].weight
    assert first_block_conv.grad is not None
    for p, old in zip(model.parameters(), before):
        assert torch.equal(p.detach(), old) != p.requires_grad


def test_the_cost_pass_tells_the_frozen_steps_apart():
    method = StemFreezingOptions(epochs=3.0).attach_at(run_epochs=8.0)
    kinds = [method.cost_state(step, step / 200) for step in range(200)]
    assert kinds.count("stem frozen") == 125 and kinds[:75] == [None] * 75


def test_a_model_without_an_image_stem_is_refused_by_name():
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    state = state_at(model, step=0)
    with pytest.raises(ValueError, match="stem_freezing needs a Conv2d reading the 3 image channels.*methods.stem_freezing off"):
        StemFreezing(frozen_from=0.0).on_fit_start(state)
