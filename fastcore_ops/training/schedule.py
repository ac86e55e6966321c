"""The learning-rate schedule of a run: linear warmup, then a cosine down to a final fraction of the peak.

    >>> optimizer = torch.optim.SGD(torch.nn.Linear(4, 2).parameters(), lr=0.1)
    >>> scheduler = warmup_cosine(optimizer, warmup_steps=10, total_steps=100)
    >>> round(optimizer.param_groups[0]["lr"], 4)  # the first of 10 warmup steps
    0.01
"""

from __future__ import annotations

import math

import torch


def lr_factor(step: int, *, warmup_steps: int, total_steps: int, final_fraction: float = 0.0) -> float:
    """Multiplier of the peak lr at ``step``: linear from ~0 over warmup, then cosine down to ``final_fraction``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int,
                  final_fraction: float = 0.0) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step scheduler: call ``step()`` after every optimizer step."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(
        step, warmup_steps=warmup_steps, total_steps=total_steps, final_fraction=final_fraction))
