"""Batches of token windows for the trainer: shuffled windows to train on, every token once to evaluate.

Both loaders follow the trainer's loader contract (as ``fastcore_ops.data`` loaders do):
``len(loader)`` batches per epoch, ``set_epoch(epoch, first_batch=0)``, iteration yielding
``(inputs, targets)`` int64 tensors on ``device``, shaped (batch, length), where targets are
the inputs shifted by one token, and ``close()``. They take the token ids as a 1-D numpy
array (a read-only ``numpy.memmap`` from ``fastcore_ops.training.text.tokens.load_prepared``) or a 1-D
torch tensor, and read only the windows of each batch, so a corpus of many GB never has
to fit in memory.

    >>> loader = TokenWindows(torch.arange(100), sequence_length=8, batch_size=2, seed=0)
    >>> inputs, targets = next(iter(loader))
    >>> len(loader), inputs.shape, bool((targets[:, :-1] == inputs[:, 1:]).all())
    (5, torch.Size([2, 8]), True)
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fastcore_ops.checks import check_int
from fastcore_ops.data.order import check_epoch_position, mix_seed


def _check_tokens(tokens) -> int:
    """The number of tokens; TypeError/ValueError unless ``tokens`` is a 1-D integer array or tensor."""
    accepted = "a 1-D integer numpy array (a memmap from load_prepared) or torch tensor"
    if isinstance(tokens, np.ndarray):
        integer, dtype = tokens.dtype.kind in "iu", tokens.dtype
    elif isinstance(tokens, torch.Tensor):
        integer = not (tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool)
        dtype = tokens.dtype
    else:
        raise TypeError(f"tokens must be {accepted}, got {type(tokens).__name__}")
    if not integer:
        raise TypeError(f"tokens must be {accepted}, got dtype {dtype}")
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be {accepted}, got shape {tuple(tokens.shape)}; flatten it first")
    return int(tokens.shape[0])


def _check_shard(rank, world_size) -> None:
    check_int("world_size", world_size, low=1)
    check_int("rank", rank, low=0)
    if rank >= world_size:
        raise ValueError(f"rank must be < world_size={world_size}, got {rank}")


def _rows(tokens, starts, width: int) -> torch.Tensor:
    """The windows ``tokens[start:start + width]`` as one int64 (len(starts), width) tensor (on the tokens' device)."""
    # Slices, not fancy indexing: a memmap then reads just these windows' pages, nothing more.
    if isinstance(tokens, np.ndarray):
        return torch.from_numpy(np.stack([tokens[start:start + width] for start in starts]).astype(np.int64))
    return torch.stack([tokens[start:start + width] for start in starts]).to(torch.int64)


def _inputs_and_targets(rows: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # Contiguous: losses flatten targets with .view, which a strided slice would refuse.
    inputs, targets = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
    if device.type == "cuda" and rows.device.type == "cpu":  # pinned pages let the copies overlap the step
        return inputs.pin_memory().to(device, non_blocking=True), targets.pin_memory().to(device, non_blocking=True)
    return inputs.to(device), targets.to(device)


class TokenWindows:
    """Training batches: each epoch, the token stream cut into shuffled windows of ``sequence_length + 1`` tokens.

    Each epoch draws, from a generator seeded by ``(seed, epoch)`` and so the same on every
    rank, a shift in [0, sequence_length) where the windows start (epochs see different window
    boundaries) and an order of the windows. Rank r takes windows r, r + world_size, ... of that
    order; every rank gets as many (the count at the largest shift, so the same every epoch) and
    the last incomplete batch is dropped: DDP needs every rank to run the same steps. ``name`` is
    what errors call the tokens: the file they come from.

    Example:
        >>> loader = TokenWindows(np.arange(1000, dtype=np.uint16), sequence_length=16, batch_size=4, seed=1,
        ...                       rank=1, world_size=2)
        >>> loader.set_epoch(3, first_batch=5)
        >>> [inputs.shape for inputs, targets in loader]
        [torch.Size([4, 16]), torch.Size([4, 16])]
    """

    def __init__(self, tokens, *, sequence_length: int, batch_size: int, seed: int, rank: int = 0,
                 world_size: int = 1, device: torch.device | str = "cpu", name: str = "tokens"):
        count = _check_tokens(tokens)
        check_int("sequence_length", sequence_length, low=1)
        check_int("batch_size", batch_size, low=1)
        check_int("seed", seed)
        _check_shard(rank, world_size)
        self.tokens, self.sequence_length, self.batch_size, self.seed = tokens, sequence_length, batch_size, seed
        self.rank, self.world_size, self.device = rank, world_size, torch.device(device)
        self.window = sequence_length + 1
        # The shift takes up to sequence_length - 1 tokens off the front; counting the windows
        # that fit after the largest shift gives every epoch the same number.
        self.windows_per_epoch = max(count - (sequence_length - 1), 0) // self.window
        self.windows_per_rank = self.windows_per_epoch // world_size
        self._batches = self.windows_per_rank // batch_size
        if self._batches == 0:
            needed = batch_size * world_size * self.window + sequence_length - 1
            raise ValueError(
                f"{name} holds {count} tokens, too few for one batch per rank: {world_size} rank(s) x batch_size "
                f"{batch_size} windows of sequence_length + 1 = {self.window} tokens, after a random shift of up to "
                f"{sequence_length - 1}, need {needed}; use a longer corpus (or more validation_every), or a smaller "
                f"sequence_length or batch_size"
            )
        self.epoch, self.first_batch = 0, 0

    def __len__(self) -> int:
        return self._batches

    def set_epoch(self, epoch: int, first_batch: int = 0) -> None:
        """Use ``epoch``'s shift and order for the next iteration, starting at batch ``first_batch``."""
        check_epoch_position(epoch, first_batch, len(self))
        self.epoch, self.first_batch = epoch, first_batch

    def window_starts(self, epoch: int) -> torch.Tensor:
        """Where this rank's windows of ``epoch`` start in the token stream, in visiting order (whole batches only).

        Example:
            >>> loader = TokenWindows(torch.arange(100), sequence_length=8, batch_size=2, seed=0)
            >>> starts = loader.window_starts(0)
            >>> len(starts), len(set((starts % 9).tolist()))  # one shift for the whole epoch
            (10, 1)
        """
        check_int("epoch", epoch, low=0)
        # Rank left out of the seed: all ranks must draw the same shift and order to split them.
        generator = torch.Generator().manual_seed(mix_seed(self.seed, epoch))
        shift = int(torch.randint(0, self.sequence_length, (1,), generator=generator))
        order = torch.randperm(self.windows_per_epoch, generator=generator)
        mine = order[self.rank::self.world_size][: self._batches * self.batch_size]
        return shift + mine * self.window

    def __iter__(self):
        starts = self.window_starts(self.epoch)  # a tensor: a list of millions of ints would take 4x the memory
        for batch in range(self.first_batch, len(self)):
            batch_starts = starts[batch * self.batch_size:(batch + 1) * self.batch_size].tolist()
            rows = _rows(self.tokens, batch_starts, self.window)
            yield _inputs_and_targets(rows, self.device)

    def close(self) -> None:
        """Nothing to release (no workers); here for the loader contract."""


class TokenEvaluation:
    """Evaluation batches: the stream in consecutive windows, so every token after the first is predicted once.

    Windows of ``sequence_length + 1`` tokens start every ``sequence_length`` tokens; when the
    stream does not divide evenly, one last, shorter window predicts the remaining tokens and
    comes as a batch of its own (shape (1, remainder)). Rank r takes windows r, r + world_size,
    ... in order, without padding, so summed over ranks each token counts once; ranks may differ
    by a batch, which is safe as evaluation runs no collective per step. A rank left without
    windows (more ranks than windows) yields nothing.

    Example:
        >>> loader = TokenEvaluation(torch.arange(20), sequence_length=4, batch_size=2)
        >>> [tuple(targets.shape) for inputs, targets in loader], loader.predicted_tokens
        ([(2, 4), (2, 4), (1, 3)], 19)
    """

    def __init__(self, tokens, *, sequence_length: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 device: torch.device | str = "cpu"):
        count = _check_tokens(tokens)
        check_int("sequence_length", sequence_length, low=1)
        check_int("batch_size", batch_size, low=1)
        _check_shard(rank, world_size)
        if count < 2:
            raise ValueError(f"tokens holds {count} token(s); evaluation needs at least 2 (an input and its target): "
                             f"use a validation split with text in it")
        self.tokens, self.sequence_length, self.batch_size = tokens, sequence_length, batch_size
        self.rank, self.world_size, self.device = rank, world_size, torch.device(device)
        full, remainder = divmod(count - 1, sequence_length)
        # This rank's whole windows, as a range of start offsets, and its short last window if any.
        self._starts = range(rank * sequence_length, full * sequence_length, world_size * sequence_length)
        self._last = (full * sequence_length, remainder + 1) if remainder and full % world_size == rank else None

    def __len__(self) -> int:
        return math.ceil(len(self._starts) / self.batch_size) + (self._last is not None)

    @property
    def predicted_tokens(self) -> int:
        """How many targets this rank's batches hold, all batches together."""
        return len(self._starts) * self.sequence_length + (self._last[1] - 1 if self._last else 0)

    def set_epoch(self, epoch: int = 0, first_batch: int = 0) -> None:
        """Nothing changes between epochs: evaluation always covers the whole stream, in order."""
        check_int("epoch", epoch, low=0)
        check_int("first_batch", first_batch, low=0)

    def __iter__(self):
        window = self.sequence_length + 1
        for first in range(0, len(self._starts), self.batch_size):
            yield _inputs_and_targets(_rows(self.tokens, self._starts[first:first + self.batch_size], window),
                                      self.device)
        if self._last is not None:
            start, width = self._last
            yield _inputs_and_targets(_rows(self.tokens, [start], width), self.device)

    def close(self) -> None:
        """Nothing to release (no workers); here for the loader contract."""
