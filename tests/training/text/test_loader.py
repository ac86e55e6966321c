"""The token loaders: deterministic shuffled windows split between ranks, resumable; evaluation covers every token once.

Most tests feed ``arange`` tokens, so every token's value is its position in the stream and a
window's first input is where it starts.
"""

import numpy as np
import pytest
import torch

from fastcore_ops.training.text.loader import TokenEvaluation, TokenWindows
from fastcore_ops.training.text.tokens import load_prepared, prepare
from tests.training.text.conftest import write_tree


def epoch_batches(loader, epoch, first_batch=0):
    loader.set_epoch(epoch, first_batch)
    return list(loader)


def starts_of(batches) -> list[int]:
    return [int(start) for inputs, _ in batches for start in inputs[:, 0]]


def test_inputs_and_targets_are_consecutive_windows_shifted_by_one():
    tokens = torch.arange(5000)
    loader = TokenWindows(tokens, sequence_length=32, batch_size=4, seed=0)
    batches = epoch_batches(loader, 0)
    assert len(batches) == len(loader) == (5000 - 31) // 33 // 4
    for inputs, targets in batches:
        assert inputs.shape == targets.shape == (4, 32) and inputs.dtype == targets.dtype == torch.int64
        assert inputs.device.type == "cpu" and inputs.is_contiguous() and targets.is_contiguous()
        assert torch.equal(targets, inputs + 1)  # each row is consecutive tokens, targets one further
        assert torch.equal(inputs - inputs[:, :1], torch.arange(32).expand(4, 32))
    starts = starts_of(batches)
    assert len(set(starts)) == len(starts)  # no window twice
    assert len({start % 33 for start in starts}) == 1  # one shift per epoch, windows do not overlap
    assert starts != sorted(starts)  # shuffled


def test_batches_are_deterministic_per_seed_epoch_and_rank():
    tokens = torch.arange(20_000)

    def loader(seed, rank=0):
        return TokenWindows(tokens, sequence_length=16, batch_size=8, seed=seed, rank=rank, world_size=2)

    first = starts_of(epoch_batches(loader(7), 3))
    assert starts_of(epoch_batches(loader(7), 3)) == first  # a new loader repeats it
    same_loader = loader(7)
    epoch_batches(same_loader, 0)
    assert starts_of(epoch_batches(same_loader, 3)) == first  # whatever ran before
    assert starts_of(epoch_batches(loader(8), 3)) != first
    assert starts_of(epoch_batches(loader(7), 4)) != first
    assert starts_of(epoch_batches(loader(7, rank=1), 3)) != first
    # Epochs move the window boundaries: over 20 epochs, several different shifts.
    shifts = {starts_of(epoch_batches(loader(7), epoch))[0] % 17 for epoch in range(20)}
    assert len(shifts) > 5


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ranks_get_disjoint_windows_and_the_same_number_of_batches(world_size):
    tokens = torch.arange(3001)
    loaders = [TokenWindows(tokens, sequence_length=10, batch_size=3, seed=5, rank=rank, world_size=world_size)
               for rank in range(world_size)]
    per_rank = [starts_of(epoch_batches(loader, 2)) for loader in loaders]
    assert len({len(loader) for loader in loaders}) == 1
    assert all(len(starts) == len(loaders[0]) * 3 for starts in per_rank)
    every = [start for starts in per_rank for start in starts]
    assert len(every) == len(set(every))  # disjoint
    shift = every[0] % 11
    assert all(start % 11 == shift and start + 11 <= 3001 for start in every)
    # Together the ranks use all windows but fewer than one batch per rank and world_size - 1 more.
    available = (3001 - shift) // 11
    assert available - len(every) < world_size * 3 + world_size


def test_resuming_mid_epoch_gives_the_remaining_batches():
    loader = TokenWindows(torch.arange(4000), sequence_length=12, batch_size=5, seed=3, rank=1, world_size=2)
    whole = epoch_batches(loader, 6)
    for first_batch in (0, 1, len(loader) - 1, len(loader)):
        resumed = epoch_batches(TokenWindows(torch.arange(4000), sequence_length=12, batch_size=5, seed=3, rank=1,
                                             world_size=2), 6, first_batch)
        assert len(resumed) == len(whole) - first_batch
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(resumed, whole[first_batch:]))
    with pytest.raises(ValueError, match=f"first_batch must be <= len\\(loader\\) = {len(loader)}"):
        loader.set_epoch(0, len(loader) + 1)


def test_a_memmap_gives_the_same_batches_as_a_tensor(tmp_path):
    values = np.random.default_rng(0).integers(0, 4096, 3000, dtype=np.uint16)
    values.tofile(tmp_path / "tokens.bin")
    mapped = np.memmap(tmp_path / "tokens.bin", dtype=np.uint16, mode="r")
    from_map = TokenWindows(mapped, sequence_length=20, batch_size=4, seed=1)
    from_tensor = TokenWindows(torch.from_numpy(values.astype(np.int64)), sequence_length=20, batch_size=4, seed=1)
    assert from_map.tokens is mapped  # kept mapped, never read whole
    for (a, b), (c, d) in zip(epoch_batches(from_map, 1), epoch_batches(from_tensor, 1), strict=True):
        assert torch.equal(a, c) and torch.equal(b, d)
    evaluation = TokenEvaluation(mapped, sequence_length=20, batch_size=4)
    assert torch.equal(torch.cat([t.flatten() for _, t in evaluation]), torch.from_numpy(values[1:].astype(np.int64)))


def test_a_corpus_too_short_for_one_batch_per_rank_is_refused():
    # 2 ranks x 3 windows of 9 tokens after a shift of up to 7: 61 tokens are just enough.
    assert len(TokenWindows(torch.arange(61), sequence_length=8, batch_size=3, seed=0, world_size=2)) == 1
    with pytest.raises(ValueError, match=r"tokens holds 60 tokens, too few for one batch per rank: 2 rank\(s\) x "
                                         r"batch_size 3 windows of sequence_length \+ 1 = 9 tokens.*need 61; use a "
                                         r"longer corpus.*smaller sequence_length or batch_size"):
        TokenWindows(torch.arange(60), sequence_length=8, batch_size=3, seed=0, world_size=2)


def test_token_arguments_are_checked():
    with pytest.raises(TypeError, match="tokens must be a 1-D integer numpy array .* got list"):
        TokenWindows([1, 2, 3], sequence_length=1, batch_size=1, seed=0)
    with pytest.raises(TypeError, match="got dtype torch.float32"):
        TokenEvaluation(torch.zeros(10), sequence_length=2, batch_size=1)
    with pytest.raises(ValueError, match="got shape \\(2, 50\\); flatten it first"):
        TokenWindows(np.zeros((2, 50), dtype=np.int64), sequence_length=2, batch_size=1, seed=0)
    with pytest.raises(ValueError, match="rank must be < world_size=2, got 2"):
        TokenEvaluation(torch.arange(10), sequence_length=2, batch_size=1, rank=2, world_size=2)
    with pytest.raises(ValueError, match="sequence_length must be an int >= 1, got 0"):
        TokenWindows(torch.arange(10), sequence_length=0, batch_size=1, seed=0)
    with pytest.raises(ValueError, match="tokens holds 1 token\\(s\\); evaluation needs at least 2"):
        TokenEvaluation(torch.arange(1), sequence_length=2, batch_size=1)


@pytest.mark.parametrize("count, world_size", [(101, 1), (100, 2), (97, 3), (9, 4), (3, 5)])
def test_evaluation_predicts_every_token_once_over_all_ranks_in_order(count, world_size):
    tokens = torch.arange(count)
    predicted = []
    for rank in range(world_size):
        loader = TokenEvaluation(tokens, sequence_length=8, batch_size=3, rank=rank, world_size=world_size)
        loader.set_epoch(4, 0)  # changes nothing
        batches = list(loader)
        assert len(batches) == len(loader)
        mine = []
        for inputs, targets in batches:
            assert inputs.shape == targets.shape and inputs.shape[0] <= 3 and inputs.shape[1] <= 8
            assert torch.equal(targets, inputs + 1)
            mine += targets.flatten().tolist()
        assert mine == sorted(mine) and len(mine) == loader.predicted_tokens
        predicted += mine
    assert sorted(predicted) == list(range(1, count))  # every token but the first, once


def test_bits_per_byte_can_count_the_validation_bytes(tmp_path):
    lines = [f"line {i}: naïve café 日本 🙂\n" for i in range(320)]
    write_tree(tmp_path / "text", {f"{i}.txt": "".join(lines[i * 40:(i + 1) * 40]).encode() for i in range(8)})
    prepared = load_prepared(prepare(tmp_path / "text", tmp_path / "tokens", tokenizer="bpe", vocab_size=300,
                                     validation_every=4, progress=False))
    lengths = torch.from_numpy(prepared.tokenizer.token_byte_lengths())
    predicted_bytes = sum(int(lengths[targets].sum()) for rank in range(2) for _, targets in
                          TokenEvaluation(prepared.validation, sequence_length=16, batch_size=4, rank=rank,
                                          world_size=2))
    first_token_bytes = int(lengths[int(prepared.validation[0])])
    assert predicted_bytes + first_token_bytes == prepared.meta["validation"]["bytes"]
