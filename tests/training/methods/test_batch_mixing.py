"""What MixUp and CutMix share as methods: they rewrite the batch, and a resumed run draws the same mixes."""

import pytest
import torch

from fastcore_ops.training.methods import CutMix, MixUp, TrainState, cutmix_batch, mixup_batch

NUM_CLASSES = 4


def make_state(images, labels):
    model = torch.nn.Linear(1, 1)
    return TrainState(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                      scaler=torch.amp.GradScaler("cpu", enabled=False), device=torch.device("cpu"),
                      num_classes=NUM_CLASSES, steps_per_epoch=1, total_steps=10, inputs=images, targets=labels)


@pytest.mark.parametrize("method_class, mix_batch", [(MixUp, mixup_batch), (CutMix, cutmix_batch)])
def test_method_rewrites_the_batch_and_resumes_the_same_draws(method_class, mix_batch):
    images = torch.rand(6, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 1, 2, 3, 0, 1])
    method = method_class(alpha=0.7, seed=11)
    state = make_state(images, labels)
    method.on_after_dataloader(state)
    expected, expected_targets, _ = mix_batch(images, labels, NUM_CLASSES, alpha=0.7,
                                              generator=torch.Generator().manual_seed(11))
    torch.testing.assert_close(state.inputs, expected)
    torch.testing.assert_close(state.targets, expected_targets)

    checkpoint = method.state_dict()
    state = make_state(images, labels)
    method.on_after_dataloader(state)
    resumed = method_class(alpha=0.7, seed=11)
    resumed.load_state_dict(checkpoint)
    resumed_state = make_state(images, labels)
    resumed.on_after_dataloader(resumed_state)
    torch.testing.assert_close(resumed_state.inputs, state.inputs)
    torch.testing.assert_close(resumed_state.targets, state.targets)
    with pytest.raises(ValueError, match="generator"):
        resumed.load_state_dict({"rng": None})
