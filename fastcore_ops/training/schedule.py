"""The learning-rate schedule of a run: linear warmup, then a cosine (or a line) down to a final fraction of the peak.

    >>> optimizer = torch.optim.SGD(torch.nn.Linear(4, 2).parameters(), lr=0.1)
    >>> scheduler = warmup_cosine(optimizer, warmup_steps=10, total_steps=100)
    >>> round(optimizer.param_groups[0]["lr"], 4)  # the first of 10 warmup steps
    0.01
"""

from __future__ import annotations

import math

import torch

from fastcore_ops.checks import check_choice

DECAYS = ("cosine", "linear")


def lr_factor(step: int, *, warmup_steps: int, total_steps: int, final_fraction: float = 0.0,
              warmup_start: float = 0.0, decay: str = "cosine") -> float:
    """Multiplier of the peak lr at ``step``: linear from ``warmup_start`` (~0 by default) over warmup, then
    ``decay`` ("cosine" or "linear") down to ``final_fraction``.

        >>> [round(lr_factor(step, warmup_steps=2, total_steps=4, warmup_start=0.2, decay="linear"), 2)
        ...  for step in range(5)]
        [0.6, 1.0, 1.0, 0.5, 0.0]
    """
    if step < warmup_steps:
        return warmup_start + (1 - warmup_start) * ((step + 1) / warmup_steps)
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    if decay == "linear":
        return final_fraction + (1 - final_fraction) * (1 - progress)
    return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int,
                  final_fraction: float = 0.0, warmup_start: float = 0.0,
                  decay: str = "cosine") -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step scheduler of :func:`lr_factor` (its decay a cosine unless ``decay="linear"``): call ``step()``
    after every optimizer step."""
    check_choice("decay", decay, DECAYS)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(
        step, warmup_steps=warmup_steps, total_steps=total_steps, final_fraction=final_fraction,
        warmup_start=warmup_start, decay=decay))
