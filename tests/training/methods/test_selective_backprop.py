import copy

import pytest
import torch
from torch.nn import functional as F

from fastcore_ops.training.methods import SelectiveBackprop, SelectiveBackpropOptions, TrainState
from fastcore_ops.training.methods.selective_backprop import frozen_running_statistics, hardest
from fastcore_ops.training.tasks.classification import ImageClassification
from fastcore_ops.training.trainer import Trainer


class Batches:
    """A fixed list of (images, labels) batches with the loader interface the trainer calls."""

    def __init__(self, batches):
        self.batches = batches

    def set_epoch(self, epoch, first_batch=0):
        self.first_batch = first_batch

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches[self.first_batch:])


def small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))


def image_batches(count=4, size=8):
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(size, 3, 6, 6, generator=generator), torch.randint(0, 3, (size,), generator=generator))
            for _ in range(count)]


def test_hardest_keeps_the_highest_losses_in_batch_order_and_at_least_one():
    losses = torch.tensor([0.5, 3.0, 0.1, 2.0, 1.0, 0.2])
    assert hardest(losses, 0.5).tolist() == [1, 3, 4]
    assert hardest(losses, 0.01).tolist() == [1]
    assert hardest(losses, 1.0).tolist() == list(range(6))


def test_active_between_start_and_end_and_every_interrupt_th_step_whole():
    method = SelectiveBackprop(SelectiveBackpropOptions(start=0.5, end=0.9, interrupt=3))
    state = TrainState(model=None, optimizer=None, scaler=None, device=torch.device("cpu"), num_classes=3,
                       steps_per_epoch=10, total_steps=20)
    active = []
    for step in range(20):
        state.step = step
        active.append(method.active(state))
    assert [step for step, on in enumerate(active) if on] == [10, 12, 13, 15, 16]


@pytest.mark.parametrize("precision", ["fp32", "amp_bf16"])
def test_the_trainer_steps_on_the_hardest_half_exactly_as_done_by_hand(precision):
    batches = image_batches()
    options = SelectiveBackpropOptions(keep=0.5, start=0.0, end=1.0, interrupt=0)
    model = small_cnn()
    task = ImageClassification(eval_loader=[], num_classes=3, loss_fn=F.cross_entropy, device=torch.device("cpu"))
    trainer = Trainer(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), task=task,
                      train_loader=Batches(batches), total_steps=len(batches), final_lr_fraction=1.0,  # constant LR
                      methods=[SelectiveBackprop(options)],
                      precision=precision, device=torch.device("cpu"), progress=False)
    trainer.fit()

    by_hand = small_cnn()
    optimizer = torch.optim.SGD(by_hand.parameters(), lr=0.1)
    dtype = torch.bfloat16 if precision == "amp_bf16" else None
    for images, labels in batches:
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            losses = F.cross_entropy(copy.deepcopy(by_hand)(images).float(), labels, reduction="none")
        chosen = losses.argsort(descending=True)[:4].sort().values
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            logits = by_hand(images[chosen])
        F.cross_entropy(logits.float(), labels[chosen]).backward()
        optimizer.step()
        optimizer.zero_grad()
    # bf16 rounds differently from one oneDNN call to another; fp32 must match to float precision.
    tolerance = dict(atol=2e-3, rtol=2e-2) if dtype else {}
    for got, expected in zip(model.state_dict().values(), by_hand.state_dict().values()):
        torch.testing.assert_close(got, expected, **tolerance)
    assert trainer.phase_seconds["methods"] > 0  # the scoring pass counts as the method's time


def test_scoring_leaves_batchnorm_statistics_as_they_were():
    model = small_cnn()
    before = copy.deepcopy(model.state_dict())
    with frozen_running_statistics(model):
        model(torch.randn(16, 3, 6, 6) * 4 + 2)
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_a_downscaled_scoring_pass_sees_smaller_images_and_training_the_full_ones():
    seen = []
    state = TrainState(model=torch.nn.Identity(), optimizer=None, scaler=None, device=torch.device("cpu"),
                       num_classes=3, steps_per_epoch=1, total_steps=1)
    state.inputs, state.targets = torch.randn(6, 3, 16, 16), torch.arange(6) % 3
    state.score_samples = lambda inputs, targets: seen.append(inputs.shape) or torch.arange(6.0)
    SelectiveBackprop(SelectiveBackpropOptions(keep=0.5, start=0.0, scale_factor=0.5, interrupt=0)) \
        .on_after_dataloader(state)
    assert seen == [torch.Size([6, 3, 8, 8])]
    assert state.inputs.shape == (3, 3, 16, 16) and state.targets.tolist() == [0, 1, 2]


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: SelectiveBackpropOptions(keep=0), ValueError, "keep"),
    (lambda: SelectiveBackpropOptions(start=0.6, end=0.6), ValueError, "end must be in"),
    (lambda: SelectiveBackpropOptions(interrupt=-1), ValueError, "interrupt"),
    (lambda: SelectiveBackpropOptions(scale_factor=2.0), ValueError, "scale_factor"),
    (lambda: SelectiveBackprop({"keep": 0.5}), TypeError, "SelectiveBackpropOptions"),
])
def test_bad_options_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()
