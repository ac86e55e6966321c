"""AugMix on a whole batch on its device, built from RandAugment's ops.

Each image is augmented along ``width`` chains of 1 to 3 random ops (or exactly ``depth``), the
chains are blended with per-image Dirichlet(alpha) weights, and the blend is mixed with the
original by a per-image Beta(alpha, alpha) weight (Hendrycks et al., 2020). The ops are the
paper's: those that do not overlap the corruptions of ImageNet-C (no contrast, colour, brightness
or sharpness changes). Every op runs once per chain and round on the samples that drew it
(:func:`fastcore_ops.data.transforms.randaugment.apply_ops`), never in a Python loop over samples.

    >>> images = torch.rand(8, 3, 32, 32)
    >>> augmix_batch(images, width=3, severity=3, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([8, 3, 32, 32])
"""

from __future__ import annotations

import numpy as np
import torch

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.data.transforms.randaugment import MAX_SEVERITY, MIN_MAGNITUDE, OPS, apply_ops

AUGMIX_OPS: tuple[str, ...] = ("auto_contrast", "equalize", "posterize", "solarize", "rotate", "shear_x", "shear_y",
                               "translate_x", "translate_y")
_OP_INDICES = torch.tensor([OPS.index(name) for name in AUGMIX_OPS])
_IDENTITY = OPS.index("identity")
MAX_CHAIN_DEPTH = 3  # a chain's random depth is 1..3, as in the paper


def check_augmix_args(width: object, depth: object, severity: object, alpha: object) -> None:
    """Raise unless width >= 1, depth >= 0 (0: random 1..3), severity in [0, 10] and alpha > 0.

        >>> check_augmix_args(0, 0, 3, 1.0)
        Traceback (most recent call last):
        ...
        ValueError: width must be an int >= 1, got 0
    """
    check_int("width", width, low=1)
    check_int("depth (0 = random 1..3)", depth, low=0)
    check_number("severity", severity, low=0, high=MAX_SEVERITY)
    check_number("alpha", alpha, low=0, low_open=True)


def _chain(images: torch.Tensor, depth: int, severity: float, generator: torch.Generator) -> torch.Tensor:
    """One chain: each image gets its own ops at its own magnitudes, as many as its depth."""
    count = images.shape[0]
    if depth:
        depths = torch.full((count,), depth)
    else:
        depths = torch.randint(1, MAX_CHAIN_DEPTH + 1, (count,), generator=generator)
    low = min(MIN_MAGNITUDE, float(severity))
    for round_index in range(int(depths.max())):
        ops = _OP_INDICES[torch.randint(len(AUGMIX_OPS), (count,), generator=generator)]
        ops = torch.where(depths > round_index, ops, _IDENTITY)  # a shorter chain has ended
        magnitude = low + (severity - low) * torch.rand(count, generator=generator, dtype=torch.float64)
        sign = torch.randint(2, (count,), generator=generator) * 2 - 1
        images = apply_ops(images, ops, (sign * magnitude / MAX_SEVERITY).float())
    return images


def augmix_batch(images: torch.Tensor, *, width: int = 3, depth: int = 0, severity: float = 3.0, alpha: float = 1.0,
                 generator: torch.Generator) -> torch.Tensor:
    """AugMix every image of a float batch in [0, 1] (N, 3, H, W); a new tensor on the same device.

    width: chains blended per image. depth: ops per chain, or 0 for a random 1..3 per image and
    chain. severity: the ops' largest magnitude on RandAugment's 0..10 scale. alpha: the
    Dirichlet and Beta concentration of the mixing weights. The defaults are the paper's.
    ``generator`` (a CPU generator) draws the mixing weights (through a NumPy generator seeded
    from it: torch's Dirichlet and Beta samplers take no generator), then each chain's ops.
    """
    check_augmix_args(width, depth, severity, alpha)
    count = images.shape[0]
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    draws = np.random.default_rng(seed)
    chain_weights = torch.from_numpy(draws.dirichlet([alpha] * width, size=count))
    keep_original = torch.from_numpy(draws.beta(alpha, alpha, size=count))
    chain_weights = chain_weights.to(images.device, images.dtype)
    keep_original = keep_original.to(images.device, images.dtype).view(-1, 1, 1, 1)
    mixed = torch.zeros_like(images)
    for chain in range(width):
        mixed.addcmul_(chain_weights[:, chain].view(-1, 1, 1, 1), _chain(images, depth, severity, generator))
    return torch.lerp(mixed, images, keep_original)
