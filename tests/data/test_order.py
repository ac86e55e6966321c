"""epoch_order: one permutation per (seed, epoch), sharded into disjoint, covering parts."""

import pytest

from fastcore_ops.data.order import batch_count, drop_incomplete_batch, epoch_order, mix_seed, samples_per_rank


def test_without_shuffle_one_rank_sees_everything_in_order():
    assert epoch_order(7, seed=3, epoch=5, shuffle=False) == list(range(7))


def test_shuffle_is_a_permutation_fixed_by_seed_and_epoch():
    first = epoch_order(100, seed=1, epoch=0, shuffle=True)
    assert sorted(first) == list(range(100)) and first != list(range(100))
    assert epoch_order(100, seed=1, epoch=0, shuffle=True) == first
    assert epoch_order(100, seed=1, epoch=1, shuffle=True) != first
    assert epoch_order(100, seed=2, epoch=0, shuffle=True) != first


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_ranks_are_disjoint_and_cover_when_divisible(world_size):
    count = 12 * world_size
    parts = [epoch_order(count, seed=0, epoch=2, shuffle=True, rank=r, world_size=world_size) for r in range(world_size)]
    assert all(len(part) == 12 for part in parts)
    assert sorted(sum(parts, [])) == list(range(count))


def test_uneven_count_is_padded_by_repeating_the_first_entries():
    count, world_size = 10, 4
    full = epoch_order(count, seed=0, epoch=0, shuffle=True)
    parts = [epoch_order(count, seed=0, epoch=0, shuffle=True, rank=r, world_size=world_size) for r in range(world_size)]
    assert [len(p) for p in parts] == [3, 3, 3, 3]
    seen = sum(parts, [])
    assert set(seen) == set(range(count))
    assert sorted(seen) == sorted(full + full[:2])


def test_more_ranks_than_samples_still_gives_every_rank_a_sample():
    parts = [epoch_order(2, seed=0, epoch=0, shuffle=False, rank=r, world_size=5) for r in range(5)]
    assert parts == [[0], [1], [0], [1], [0]]


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="count must be >= 1"):
        epoch_order(0, seed=0, epoch=0, shuffle=False)
    with pytest.raises(ValueError, match="rank must be in"):
        epoch_order(4, seed=0, epoch=0, shuffle=False, rank=2, world_size=2)


def test_batch_helpers_count_and_drop_the_short_batch():
    assert samples_per_rank(10, 4) == 3
    assert batch_count(10, 4, drop_last=False) == 3
    assert batch_count(10, 4, drop_last=True) == 2
    assert drop_incomplete_batch(list(range(10)), 4, drop_last=True) == list(range(8))
    assert drop_incomplete_batch(list(range(10)), 4, drop_last=False) == list(range(10))


def test_mixed_seeds_depend_on_order_and_every_part():
    seeds = {mix_seed(a, b) for a in range(20) for b in range(20)}
    assert len(seeds) == 400
    assert mix_seed(1, 2) != mix_seed(2, 1)
    assert mix_seed(1, 2, 3) == mix_seed(1, 2, 3)


@pytest.mark.parametrize("count, world_size", [(10, 4), (7, 3), (2, 5), (13, 13)])
def test_without_padding_every_sample_goes_to_exactly_one_rank(count, world_size):
    parts = [epoch_order(count, seed=0, epoch=1, shuffle=True, rank=r, world_size=world_size, pad=False)
             for r in range(world_size)]
    assert sorted(sum(parts, [])) == list(range(count))
    assert [len(p) for p in parts] == [samples_per_rank(count, world_size, rank=r, pad=False) for r in range(world_size)]
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
