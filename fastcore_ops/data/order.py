"""The order in which one rank visits the samples in one epoch.

All ranks draw the same permutation from ``(seed, epoch)`` and each keeps every
``world_size``-th entry, starting at its rank. When the sample count does not divide by
``world_size``, the rule is:

- training pads (``pad=True``): the permutation is extended by repeating its first entries (as
  torch.utils.data.DistributedSampler does), so every rank runs the same number of steps;
  DDP's per-step all-reduce would hang if one rank had a step fewer. The padding repeats at
  most ``world_size - 1`` samples per epoch, which training does not mind.
- evaluation does not pad (``pad=False``): every sample is visited by exactly one rank, so
  summed metrics count each image once; ranks may then differ by one sample (and so by one
  batch), which is safe because evaluation runs no collective per step, only one reduction of
  the sums at the end.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fastcore_ops.checks import check_int


def mix_seed(*parts: int) -> int:
    """One 63-bit seed from several integers, well mixed so that (1, 2) and (2, 1) differ.

    >>> mix_seed(0, 1) != mix_seed(1, 0)
    True
    """
    # numpy's SeedSequence hashes its entropy list; summing or xoring seeds would collide.
    state = np.random.SeedSequence([int(part) & 0xFFFFFFFFFFFFFFFF for part in parts]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def samples_per_rank(count: int, world_size: int, *, rank: int = 0, pad: bool = True) -> int:
    """How many samples ``rank`` visits per epoch: the same on every rank with ``pad``, else its own share.

    >>> samples_per_rank(5, 2, rank=1), samples_per_rank(5, 2, rank=1, pad=False)
    (3, 2)
    """
    if pad:
        return math.ceil(count / world_size)
    return len(range(rank, count, world_size))


def epoch_order(
    count: int, *, seed: int, epoch: int, shuffle: bool, rank: int = 0, world_size: int = 1, pad: bool = True
) -> list[int]:
    """Indices into the sample list that ``rank`` visits in ``epoch``, in visiting order.

    ``pad``: repeat the first entries so every rank gets as many as the first (training); without
    it each sample goes to exactly one rank (evaluation). See the module docstring.

    >>> epoch_order(5, seed=0, epoch=0, shuffle=False, rank=1, world_size=2)
    [1, 3, 0]
    >>> epoch_order(5, seed=0, epoch=0, shuffle=False, rank=1, world_size=2, pad=False)
    [1, 3]
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
    if shuffle:
        generator = torch.Generator().manual_seed(mix_seed(seed, epoch))
        order = torch.randperm(count, generator=generator).tolist()
    else:
        order = list(range(count))
    padded = samples_per_rank(count, world_size) * world_size if pad else count
    # Repeat the whole list when world_size exceeds count several times over.
    while len(order) < padded:
        order += order[: padded - len(order)]
    return order[rank::world_size]


def check_epoch_position(epoch: int, first_batch: int, batches: int) -> None:
    """Refuse a place a loader's ``set_epoch(epoch, first_batch)`` cannot start an epoch at.

        >>> check_epoch_position(2, 5, batches=4)
        Traceback (most recent call last):
        ...
        ValueError: first_batch must be <= len(loader) = 4, got 5
    """
    check_int("epoch", epoch, low=0)
    check_int("first_batch", first_batch, low=0)
    if first_batch > batches:
        raise ValueError(f"first_batch must be <= len(loader) = {batches}, got {first_batch}")


def batch_count(samples: int, batch_size: int, drop_last: bool) -> int:
    """Batches in one epoch of ``samples`` samples: a short last batch counts unless dropped."""
    return samples // batch_size if drop_last else math.ceil(samples / batch_size)


def drop_incomplete_batch(order: list[int], batch_size: int, drop_last: bool) -> list[int]:
    """``order`` cut to whole batches when ``drop_last``, else unchanged."""
    return order[: batch_count(len(order), batch_size, True) * batch_size] if drop_last else order
