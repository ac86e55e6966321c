"""MixUp: train on convex combinations of pairs of images and of their labels.

Method card
    What: each batch is blended with a shuffled copy of itself, ``x = lam * x + (1 - lam) * x[perm]``,
        and the targets become the same blend of the two one-hot labels, with one
        ``lam ~ Beta(alpha, alpha)`` per batch (Zhang et al., 2018).
    When it helps: long runs on image classification that overfit (many epochs, large models);
        it regularizes and calibrates. On short budgets it usually costs accuracy.
    Hyperparameters: ``alpha`` (> 0): 0.2 is a common choice for ImageNet; larger values mix more
        evenly. ``seed`` fixes the draws, which resume exactly (the generator is checkpointed).
    Composition: makes the targets soft (N, C) probabilities, which both losses accept and to
        which label smoothing still applies; use either MixUp or CutMix, not both. Runs after
        the dataloader's augmentations (RandAugment, ColOut) on the batch they produce.

    >>> method = MixUp(alpha=0.2, seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np
import torch

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training.methods.base import Method, SeededMethod, TrainState
from fastcore_ops.training.methods.registry import IMAGES, register_method


def check_alpha(alpha: object) -> float:
    """``alpha`` as a float, or a TypeError/ValueError: the Beta distribution needs a number alpha > 0."""
    return check_number("alpha", alpha, low=0, low_open=True)


def sample_mixing_weight(alpha: float, generator: torch.Generator) -> float:
    """One draw of ``lam ~ Beta(alpha, alpha)``, determined by ``generator``.

    Where ``alpha`` enters the mixing (MixUp's and CutMix's functional forms and methods draw
    through here), so it is checked here; a run's options check it as the configuration is read.
    torch's Beta/Gamma samplers take no generator, so a NumPy generator seeded from ``generator``
    does the draw; the caller's generator still fixes every value.

    >>> 0.0 <= sample_mixing_weight(0.2, torch.Generator().manual_seed(0)) <= 1.0
    True
    """
    alpha = check_alpha(alpha)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return float(np.random.default_rng(seed).beta(alpha, alpha))


def as_probabilities(targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Float (N, C) class probabilities from int64 class indices (N,) or probabilities (N, C).

    >>> as_probabilities(torch.tensor([2, 0]), 3)
    tensor([[0., 0., 1.],
            [1., 0., 0.]])
    """
    if targets.dtype == torch.int64 and targets.ndim == 1:
        return torch.nn.functional.one_hot(targets, num_classes).float()
    if targets.is_floating_point() and targets.ndim == 2 and targets.shape[1] == num_classes:
        return targets
    raise ValueError(
        f"targets must be int64 class indices (N,) or float probabilities (N, {num_classes}), "
        f"got {targets.dtype} of shape {tuple(targets.shape)}"
    )


def check_batch(images: torch.Tensor, targets: torch.Tensor, num_classes: int) -> None:
    """Raise ValueError unless ``images`` (N, C, H, W) and ``targets`` describe the same N samples."""
    check_int("num_classes", num_classes, low=1)
    if images.ndim != 4:
        raise ValueError(f"images must be a (N, C, H, W) batch, got shape {tuple(images.shape)}")
    if targets.shape[0] != images.shape[0]:
        raise ValueError(
            f"targets must have one row per image ({images.shape[0]}), got shape {tuple(targets.shape)}"
        )


# What a batch mixing returns: the mixed images, their soft targets and the fraction ``lam`` of each sample its own.
MixedBatch = tuple[torch.Tensor, torch.Tensor, float]


def draw_partners(images: torch.Tensor, targets: torch.Tensor, num_classes: int, alpha: float,
                  generator: torch.Generator) -> tuple[torch.Tensor, float, torch.Tensor]:
    """What MixUp and CutMix start from: the batch checked, its targets as (N, C) probabilities, then
    ``lam ~ Beta(alpha, alpha)`` and each sample's partner (a permutation, on the images' device), drawn in that order.

    >>> g = torch.Generator().manual_seed(0)
    >>> _, lam, perm = draw_partners(torch.rand(2, 3, 4, 4), torch.tensor([0, 1]), 2, 0.2, g)
    >>> 0.0 <= lam <= 1.0, sorted(perm.tolist())
    (True, [0, 1])
    """
    check_batch(images, targets, num_classes)
    probabilities = as_probabilities(targets, num_classes)
    lam = sample_mixing_weight(alpha, generator)
    return probabilities, lam, torch.randperm(images.shape[0], generator=generator).to(images.device)


def blend_with_partners(values: torch.Tensor, perm: torch.Tensor, lam: float) -> torch.Tensor:
    """``lam * values + (1 - lam) * values[perm]``, a new tensor.

    >>> blend_with_partners(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([1, 0]), 0.75)
    tensor([[0.7500, 0.2500],
            [0.2500, 0.7500]])
    """
    return values.mul(lam).add_(values[perm], alpha=1.0 - lam)


def mixup_batch(images: torch.Tensor, targets: torch.Tensor, num_classes: int, *, alpha: float,
                generator: torch.Generator) -> MixedBatch:
    """Blend the batch with a shuffled copy of itself; return (images, soft targets, lam).

    ``generator`` is a CPU generator: it draws ``lam ~ Beta(alpha, alpha)`` and then the
    permutation, so the same generator state gives the same batch on any device.

    >>> g = torch.Generator().manual_seed(0)
    >>> images, targets, lam = mixup_batch(torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 2, 1]), 3,
    ...                                    alpha=0.2, generator=g)
    >>> targets.shape
    torch.Size([4, 3])
    """
    if not images.is_floating_point():
        raise TypeError(f"images must be a floating-point tensor to be blended, got {images.dtype}")
    probabilities, lam, perm = draw_partners(images, targets, num_classes, alpha, generator)
    return blend_with_partners(images, perm, lam), blend_with_partners(probabilities, perm, lam), lam


class BatchMixing(SeededMethod):
    """Base of MixUp and CutMix: rewrites ``state.inputs`` and ``state.targets`` after the dataloader.

    Subclasses set ``mix_batch``, a function ``(images, targets, num_classes, *, alpha, generator)
    -> (images, targets, lam)``, which checks ``alpha``; the seeded generator is checkpointed so
    that resumed runs draw the same mixes.
    """

    mix_batch: Callable[..., MixedBatch]

    def __init__(self, alpha: float, seed: int = 0):
        super().__init__(seed)
        self.alpha = alpha

    def on_after_dataloader(self, state: TrainState) -> None:
        state.inputs, state.targets, _ = type(self).mix_batch(
            state.inputs, state.targets, state.num_classes, alpha=self.alpha, generator=self._generator
        )


class MixUp(BatchMixing):
    """Blends each batch with :func:`mixup_batch`.

    >>> method = MixUp(alpha=0.2, seed=1)
    """

    mix_batch = staticmethod(mixup_batch)


@dataclass(frozen=True)
class BatchMixingOptions:
    """The one setting of a batch-mixing method: the Beta distribution's ``alpha``.

        >>> MixUpOptions(alpha=0)
        Traceback (most recent call last):
        ...
        ValueError: alpha must be a number > 0, got 0
    """

    alpha: float
    method: ClassVar[type[BatchMixing]]

    def __post_init__(self) -> None:
        check_alpha(self.alpha)

    def attach(self, config) -> Method:
        return self.method(self.alpha, seed=config.seed)


@register_method("mixup", stage="step", order=130, tasks=IMAGES, mixes_batch=True, augmentation=True)
@dataclass(frozen=True)
class MixUpOptions(BatchMixingOptions):
    """``methods.mixup``."""

    alpha: float = 0.2  # a common choice for ImageNet
    method: ClassVar[type[BatchMixing]] = MixUp
