"""The settings of ``python -m fastcore_ops.data.prepare``, which decide a prepared dataset's content: declared here, light,
for the command to parse with and for the shard writer to write by.

    >>> PrepareSettings(max_side=64)
    PrepareSettings(max_side=64, quality=90, shard_size=1000, seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrepareSettings:
    """What decides a prepared dataset's content; a rerun into the same folder must match it."""

    max_side: int = 256
    quality: int = 90
    shard_size: int = 1000
    seed: int = 0

    def __post_init__(self):
        from fastcore_ops.checks import check_int  # torch: once settings are made, not to parse the command line

        check_int("max_side", self.max_side, low=8)
        check_int("quality", self.quality, low=1, high=100)
        check_int("shard_size", self.shard_size, low=1)
        check_int("seed", self.seed, low=0)
