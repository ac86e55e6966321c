import pytest

from fastcore_ops.data import Crops, Shard


def test_crops_default_to_imagenets_and_hold_floats():
    assert Crops() == Crops(scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), eval_fraction=0.875)
    assert Crops(scale=[1, 1]).scale == (1.0, 1.0)


@pytest.mark.parametrize("options, error, message", [
    (dict(scale="0.08-1"), TypeError, r"Crops.scale must be a \(low, high\) pair"),
    (dict(scale=(0.5, 0.1)), ValueError, r"Crops.scale must be a \(low, high\) pair with 0.0 < low <= high <= 1.0"),
    (dict(ratio=(0, 1)), ValueError, r"Crops.ratio must be a \(low, high\) pair"),
    (dict(eval_fraction="0.9"), TypeError, "Crops.eval_fraction must be a number in \\(0, 1\\], got str '0.9'"),
    (dict(eval_fraction=1.5), ValueError, r"Crops.eval_fraction must be a number in \(0, 1\], got 1.5"),
])
def test_bad_crops_are_named_by_their_field(options, error, message):
    with pytest.raises(error, match=message):
        Crops(**options)


@pytest.mark.parametrize("rank, world_size, error, message", [
    (2, 2, ValueError, r"Shard.rank must be an int in \[0, 1\] \(below world_size=2\), got 2"),
    (0, 0, ValueError, "Shard.world_size must be an int >= 1, got 0"),
    ("0", 2, TypeError, "Shard.rank must be an int >= 0, got str '0'"),
    (-1, 2, ValueError, "Shard.rank must be an int >= 0, got -1"),
])
def test_bad_shards_are_named_by_their_field(rank, world_size, error, message):
    with pytest.raises(error, match=message):
        Shard(rank, world_size)


def test_groups_are_frozen():
    with pytest.raises(AttributeError):
        Shard(0, 1).rank = 1
