"""Sequence-length warmup: the length schedule, the batch re-cut, and the method on the trainer's state."""

import pytest
import torch

from fastcore_ops.training.methods import SequenceLengthWarmup, shorten_batch
from fastcore_ops.training.methods.base import TrainState
from fastcore_ops.training.methods.seq_length_warmup import SeqLengthWarmupOptions


def test_the_length_grows_linearly_in_multiples_of_eight_then_stays_full():
    warmup = SequenceLengthWarmup(full_length=256, start_length=8, duration=0.3)
    lengths = [warmup.length(step / 1000) for step in range(1001)]
    assert lengths[0] == 8 and lengths[-1] == 256 and lengths[300] == 256
    assert all(a <= b for a, b in zip(lengths, lengths[1:])), "never shrinks"
    assert all(length % 8 == 0 for length in lengths)
    # Linear in progress: halfway through the warmup, halfway from 8 to 256 (rounded down to 8).
    assert lengths[150] == 128
    assert len(set(lengths)) == 32  # every multiple of 8 from 8 to 256: few distinct shapes


def test_keeping_tokens_recuts_every_token_into_shorter_rows_with_its_target():
    stream = torch.arange(2 * 24 + 1)
    inputs, targets = stream[:-1].view(2, 24), stream[1:].view(2, 24)
    short_inputs, short_targets = shorten_batch(inputs, targets, 8)
    assert short_inputs.shape == short_targets.shape == (6, 8)
    assert torch.equal(short_inputs.flatten(), inputs.flatten())
    assert torch.equal(short_targets, short_inputs + 1), "each target is still its input's next token"
    # 48 tokens in rows of 16 leave none over; in rows of 20, the last 8 are dropped.
    assert shorten_batch(inputs, targets, 16)[0].shape == (3, 16)
    assert torch.equal(shorten_batch(inputs, targets, 20)[0].flatten(), inputs.flatten()[:40])
    truncated, _ = shorten_batch(inputs, targets, 8, keep_tokens=False)
    assert torch.equal(truncated, inputs[:, :8])
    assert shorten_batch(inputs, targets, 24)[0] is inputs, "the full length leaves the batch alone"


def test_mismatched_batches_and_bad_options_are_refused():
    with pytest.raises(ValueError, match="inputs and targets must be"):
        shorten_batch(torch.zeros(2, 8), torch.zeros(2, 7), 4)
    with pytest.raises(ValueError, match="start_length must be a multiple of multiple_of=8, got 12"):
        SeqLengthWarmupOptions(start_length=12)
    with pytest.raises(ValueError, match="full_length must be an int >= 64"):
        SequenceLengthWarmup(full_length=32, start_length=64)


def test_the_method_shortens_the_batch_by_the_run_s_progress():
    warmup = SequenceLengthWarmup.from_options(64, SeqLengthWarmupOptions(start_length=16, duration=0.5))
    state = TrainState(model=torch.nn.Linear(1, 1), optimizer=None, scaler=None, device=torch.device("cpu"),
                       num_classes=0, steps_per_epoch=10, total_steps=100)
    # Halfway through the warmup (step 25): 16 + (64 - 16) / 2 = 40 tokens, 6 rows of the 256.
    for step, shape in ((0, (16, 16)), (25, (6, 40)), (50, (4, 64)), (99, (4, 64))):
        state.step = step
        state.inputs = state.targets = torch.zeros(4, 64, dtype=torch.long)
        warmup.on_after_dataloader(state)
        assert state.inputs.shape == state.targets.shape == shape
