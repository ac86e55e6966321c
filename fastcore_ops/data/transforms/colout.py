"""ColOut: drop the same random rows and columns from every image of a batch.

Dropping whole rows and columns shrinks the images (so the forward and backward passes get
cheaper) while keeping the content recognisable when the fraction is small. The same rows and
columns go for the whole batch so it stays one dense tensor.

Method card
    What: each training batch loses a random ``p_row`` of its rows and ``p_col`` of its
        columns, the same ones for every image, so the batch stays dense and gets smaller.
    When it helps: as a cheap regularizer that also saves compute; its effect is small.
    Cost: negative: the model sees about (1 - p_row)(1 - p_col) of the pixels.
    Options (``ColOutOptions``): ``p_row`` 0.15, ``p_col`` 0.15.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fastcore_ops.checks import check_number, check_tensor
from fastcore_ops.data.transforms.registry import augmentation


def check_colout_args(p_row: object, p_col: object) -> None:
    """Raise if ``p_row`` or ``p_col`` (the fractions of rows and columns to drop) is not a number in [0, 1)."""
    for name, value in (("p_row", p_row), ("p_col", p_col)):
        check_number(name, value, low=0, high=1, high_open=True)


@augmentation("colout", order=40, runs_in="batch")
@dataclass(frozen=True)
class ColOutOptions:
    """ColOut settings for the batch stage: fractions of rows and of columns dropped per batch."""

    p_row: float = 0.15
    p_col: float = 0.15

    def __post_init__(self) -> None:
        check_colout_args(self.p_row, self.p_col)

    def apply(self, images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """:func:`colout_batch` with these settings."""
        return colout_batch(images, p_row=self.p_row, p_col=self.p_col, generator=generator)


def _kept_lines(length: int, p: float, generator: torch.Generator | None) -> torch.Tensor:
    """Sorted indices of the ``length - round(p * length)`` lines kept (at least one), on the CPU."""
    keep = max(1, length - round(p * length))
    return torch.randperm(length, generator=generator)[:keep].sort().values


def colout_batch(images: torch.Tensor, *, p_row: float = 0.15, p_col: float = 0.15,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Drop ``round(p_row * H)`` random rows and ``round(p_col * W)`` random columns from the whole batch.

    ``images`` is (..., H, W) of any dtype; the kept lines stay in order and at least one row and
    one column are always kept. Indices are drawn on the CPU from ``generator`` (a CPU
    generator; None uses torch's global one), so there is no device sync.

    >>> g = torch.Generator().manual_seed(0)
    >>> colout_batch(torch.zeros(4, 3, 32, 32), p_row=0.25, p_col=0.5, generator=g).shape
    torch.Size([4, 3, 24, 16])
    """
    check_tensor("images", images, floating=False)
    if images.dim() < 2:
        raise ValueError(f"images must have at least 2 dims (..., H, W), got shape {tuple(images.shape)}")
    check_colout_args(p_row, p_col)
    height, width = images.shape[-2:]
    rows = _kept_lines(height, p_row, generator).to(images.device, non_blocking=True)
    cols = _kept_lines(width, p_col, generator).to(images.device, non_blocking=True)
    return images.index_select(-2, rows).index_select(-1, cols)
