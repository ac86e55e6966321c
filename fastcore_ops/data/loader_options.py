"""``build_loader``'s option groups: the crops it cuts (``Crops``) and the part of the data a rank reads (``Shard``).

Each group's fields are checked when it is made, so a wrong value is named where it was written.

    >>> from fastcore_ops.data import Crops, Shard, build_loader
    >>> loader = build_loader("/data/cifar10/train", batch_size=64, train=True, image_size=32,
    ...                       crops=Crops(scale=(1.0, 1.0)), shard=Shard(rank=1, world_size=2))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

from fastcore_ops.checks import check_int, check_interval, check_number


@dataclass(frozen=True)
class Crops:
    """The training images' random-resized crop and the evaluation images' center crop.

    scale: the crop's share of the image's area, drawn in this range; ``(1, 1)`` keeps whole images.
    ratio: the crop's width / height, drawn log-uniformly in this range.
    eval_fraction: evaluation resizes the shorter side to ``image_size / eval_fraction``, then
        takes the center ``image_size`` square.

    >>> Crops(scale=(1, 1))
    Crops(scale=(1.0, 1.0), ratio=(0.75, 1.3333333333333333), eval_fraction=0.875)
    >>> Crops(eval_fraction=1.5)
    Traceback (most recent call last):
    ...
    ValueError: Crops.eval_fraction must be a number in (0, 1], got 1.5
    """

    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    eval_fraction: float = 0.875

    def __post_init__(self):
        object.__setattr__(self, "scale", check_interval("Crops.scale", self.scale, high=1.0))
        object.__setattr__(self, "ratio", check_interval("Crops.ratio", self.ratio))
        object.__setattr__(self, "eval_fraction",
                           check_number("Crops.eval_fraction", self.eval_fraction, low=0, high=1, low_open=True))


@dataclass(frozen=True)
class Shard:
    """This process's part of the data: rank ``rank`` of ``world_size`` processes (order.py says how it is split).

    Not a prepared shard file (shards/): each rank reads its part of whatever the source holds.

    >>> Shard(rank=1, world_size=2)
    Shard(rank=1, world_size=2)
    >>> Shard(rank=2, world_size=2)
    Traceback (most recent call last):
    ...
    ValueError: Shard.rank must be an int in [0, 1] (below world_size=2), got 2
    """

    rank: int
    world_size: int

    def __post_init__(self):
        check_int("Shard.world_size", self.world_size, low=1)
        check_int("Shard.rank", self.rank, low=0)
        if self.rank >= self.world_size:
            raise ValueError(f"Shard.rank must be an int in [0, {self.world_size - 1}] "
                             f"(below world_size={self.world_size}), got {self.rank}")
