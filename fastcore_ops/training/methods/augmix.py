"""AugMix: train on blends of augmentation chains, optionally with a Jensen-Shannon consistency loss.

Method card
    What: every training image is replaced by its AugMix: ``width`` chains of random ops (those
        of RandAugment that do not overlap ImageNet-C's corruptions), blended with Dirichlet
        weights and mixed back with the original by a Beta weight (Hendrycks et al., 2020; see
        :func:`fastcore_ops.data.transforms.augmix.augmix_batch`). With ``jsd_weight`` > 0 the model sees the
        clean image and two AugMix views of it in one batch of 3N, the loss is computed on the
        clean logits, and ``jsd_weight`` times the Jensen-Shannon divergence between the three
        predictions is added: the paper's consistency loss.
    When it helps: robustness to corruptions and calibration, and accuracy on long runs; on short
        budgets it usually costs clean accuracy.
    Cost: the augmentation on the batch (about width x 2 op passes); with the consistency loss,
        three forward and backward passes per image.
    Hyperparameters: ``width`` 3, ``depth`` 0 (random 1..3), ``severity`` 3 (RandAugment's 0..10
        scale), ``alpha`` 1.0, ``jsd_weight`` 0 (the paper uses 12 with the consistency loss).
    Composition: runs first after the dataloader (on its augmented, normalized batch, un-normalized
        with the loader's mean and std); with the consistency loss it cannot be combined with
        MixUp, CutMix, SAM or selective backprop, whose batches would no longer match their labels.

    >>> method = AugMix(AugMixOptions(jsd_weight=12.0), seed=0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from fastcore_ops.checks import check_number
from fastcore_ops.data.transforms.augmix import augmix_batch, check_augmix_args
from fastcore_ops.data.transforms.device_stage import IMAGENET_MEAN, IMAGENET_STD
from fastcore_ops.training.methods.base import Method, SeededMethod, TrainState
from fastcore_ops.training.methods.registry import IMAGES, active, register_method


def _check_consistency_loss(options: AugMixOptions, config) -> None:
    """AugMix's consistency loss triples each batch's inputs, which methods that mix samples or need one
    target per input cannot take."""
    if not options.jsd_weight:
        return
    for method, _ in active(config.methods):
        if method.mixes_batch or method.one_target_per_input:
            raise ValueError(f"methods.augmix.jsd_weight > 0 (AugMix's consistency loss) cannot be combined with "
                             f"methods.{method.name}; set one of them off")


# First of the step methods: its ops want the loader's own images.
@register_method("augmix", stage="step", order=110, tasks=IMAGES, check=_check_consistency_loss,
                 augmentation=True)
@dataclass(frozen=True)
class AugMixOptions:
    """AugMix's augmentation settings (see :func:`augmix_batch`) and the consistency loss's weight.

        >>> AugMixOptions(jsd_weight=-1)
        Traceback (most recent call last):
        ...
        ValueError: jsd_weight must be a number >= 0, got -1
    """

    width: int = 3
    depth: int = 0  # 0 = a random 1..3 per image and chain
    severity: float = 3.0
    alpha: float = 1.0
    jsd_weight: float = 0.0  # 0 = no consistency loss: one AugMix view replaces each image

    def __post_init__(self) -> None:
        check_augmix_args(self.width, self.depth, self.severity, self.alpha)
        check_number("jsd_weight", self.jsd_weight, low=0)

    def attach(self, config) -> Method:
        return AugMix(self, seed=config.seed)


def jensen_shannon(*logits: torch.Tensor) -> torch.Tensor:
    """The mean over the batch of the Jensen-Shannon divergence between the softmax of each ``logits``.

        >>> same = torch.randn(4, 10)
        >>> abs(float(jensen_shannon(same, same, same))) < 1e-6
        True
    """
    probabilities = [view.float().softmax(dim=1) for view in logits]
    mixture = torch.stack(probabilities).mean(dim=0).clamp(1e-7, 1).log()
    divergences = [F.kl_div(mixture, p, reduction="batchmean") for p in probabilities]
    return sum(divergences) / len(divergences)


class AugMix(SeededMethod):
    """AugMixes each training batch after the dataloader (see the module's card).

    mean, std: the loader's normalization (the library's default is ImageNet's), to get back to
    the pixels in [0, 1] that the ops work on.

    >>> method = AugMix(AugMixOptions(width=2), seed=1)
    """

    def __init__(self, options: AugMixOptions = AugMixOptions(), *, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD, seed: int = 0):
        super().__init__(seed)
        if not isinstance(options, AugMixOptions):
            raise TypeError(f"options must be an AugMixOptions, got {type(options).__name__}")
        self.options = options
        self._mean, self._std = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)
        self._clean_count = 0
        self._views: tuple[torch.Tensor, ...] = ()

    def _augmix_view(self, pixels: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        options = self.options
        view = augmix_batch(pixels, width=options.width, depth=options.depth, severity=options.severity,
                            alpha=options.alpha, generator=self._generator)
        return (view - mean) / std

    def on_after_dataloader(self, state: TrainState) -> None:
        images = state.inputs
        mean, std = self._mean.to(images.device, images.dtype), self._std.to(images.device, images.dtype)
        pixels = (images * std + mean).clamp_(0, 1)
        if not self.options.jsd_weight:
            state.inputs = self._augmix_view(pixels, mean, std)
            return
        self._clean_count = images.shape[0]
        state.inputs = torch.cat([images, self._augmix_view(pixels, mean, std), self._augmix_view(pixels, mean, std)])

    def on_before_loss(self, state: TrainState) -> None:
        if self.options.jsd_weight:
            self._views = state.outputs.split(self._clean_count)
            state.outputs = self._views[0]  # the training loss is the clean images'

    def on_after_loss(self, state: TrainState) -> None:
        if self.options.jsd_weight:
            state.loss = state.loss + self.options.jsd_weight * jensen_shannon(*self._views)
            self._views = ()
