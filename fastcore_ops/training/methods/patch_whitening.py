"""Patch whitening: start the first convolution as the principal components of the training images' patches.

Method card
    What: before training, the stem (the model's first ``Conv2d`` that reads the 3 image
        channels, with no groups) gets filters computed from the data rather than drawn at random:
        the covariance of its k x k x 3 input patches over ``images`` training images (evenly
        spaced through the training set, center-cropped at the training size, normalized as in
        training) gives eigenvectors v and eigenvalues l; the top ``out_channels / 2`` become the
        filters v / sqrt(l + eigenvalue_floor) and their negatives, so the stem starts as a whitening transform
        that ReLU cannot half-erase (as in Page's and Jordan's fast CIFAR-10 training). By default
        the filters stay fixed (``trainable=False``): the stem's weights leave the optimizer and its
        weight gradient is not computed.
    When it helps: short runs of small image classifiers, whose first epochs are otherwise spent
        learning edge and colour detectors the data's statistics already give; with BatchNorm after
        the stem only the filters' directions matter. Long runs learn the stem anyway: in
        ``cifar_mild_small`` on 500 images per class it adds 8.1 points at a quarter of the
        recipe's budget and 1.6 at all of it (``reports/cifar-tradeoff-whitening-20261125/``).
    Hyperparameters: ``images`` (2048; the covariance of 27 numbers, 3x3 patches of 3 channels,
        needs far fewer), ``trainable`` (False), ``eigenvalue_floor`` (0.01; airbench94 uses 5e-4,
        which leaves its faintest components larger). It needs a stem with an even number of output
        channels, at most twice its patch size (ResNet-20's 16 of 27; ResNet-50's 64 of 147).
    Cost: reading ``images`` images once before the first step and one small eigendecomposition
        (0.3-0.5 s for 2048 CIFAR images on 2 CPU cores), counted in the run's training time; the
        frozen stem's weight gradient, which it no longer computes, was a negligible part of a step.
    Composition: runs after the model's surgeries, on the images the run's loader decodes. A
        resumed run computes the filters again and then loads its checkpoint's.

    >>> options = PatchWhiteningOptions(images=512)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from fastcore_ops.checks import check_bool, check_int, check_number
from fastcore_ops.data import Shard, build_loader
from fastcore_ops.training.methods.registry import IMAGES, register_method

log = logging.getLogger(__name__)

# The default floor added to each eigenvalue before its square root: keeps the filters of the faintest components
# from growing without bound (patches of pixels normalized to unit variance have eigenvalues from
# about 0.01 to 20).
EIGENVALUE_FLOOR = 1e-2


# After the surgeries: it sets the stem of the model they leave.
@register_method("patch_whitening", stage="model", order=10, tasks=IMAGES)
@dataclass(frozen=True)
class PatchWhiteningOptions:
    """How many training images estimate the patches' covariance, whether the stem then trains, and the floor
    added to each eigenvalue.

        >>> PatchWhiteningOptions(images=0)
        Traceback (most recent call last):
        ...
        ValueError: images must be an int >= 1, got 0
    """

    images: int = 2048
    trainable: bool = False
    eigenvalue_floor: float = EIGENVALUE_FLOOR

    def __post_init__(self) -> None:
        check_int("images", self.images, low=1)
        check_bool("trainable", self.trainable)
        check_number("eigenvalue_floor", self.eigenvalue_floor, low=0, low_open=True)

    def set_up_model(self, model: nn.Module, samples: list[tuple[str, int]], **loader_settings) -> float:
        """Whiten the built model's stem from the training ``samples``: :func:`whiten_stem_from_samples`."""
        return whiten_stem_from_samples(model, samples, self, **loader_settings)


def find_stem(model: nn.Module, method: str = "patch_whitening") -> nn.Conv2d:
    """The first ``Conv2d`` of ``model`` (in module order) that reads 3 channels with no groups; ``method``: the
    method that needs it, which the error for a model without one names.

        >>> from fastcore_ops.training.models import build_model
        >>> find_stem(build_model("cifar_resnet20", 10))
        Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)
    """
    for module in model.modules():
        if isinstance(module, nn.Conv2d) and module.in_channels == 3 and module.groups == 1:
            return module
    raise ValueError(f"{method} needs a Conv2d reading the 3 image channels, found none in "
                     f"{type(model).__name__}; turn methods.{method} off for this model")


def _check_stem(stem: nn.Conv2d) -> None:
    patch = stem.in_channels * stem.kernel_size[0] * stem.kernel_size[1]
    if stem.out_channels % 2 or stem.out_channels > 2 * patch:
        raise ValueError(f"patch whitening gives a stem of C output channels C / 2 components and their "
                         f"negatives, so C must be even and at most twice the {patch} numbers of a patch; "
                         f"this stem has {stem.out_channels}; turn methods.patch_whitening off for this model")


def patch_covariance(batches: Iterable[torch.Tensor], kernel_size: tuple[int, int], limit: int) -> torch.Tensor:
    """The float64 covariance of the k x k patches (channel-major, as a Conv2d's weight) of the first ``limit`` images.

    Patches tile each image without overlap: every pixel counts once, and a batch of large
    images does not become a matrix many times its size.

        >>> flat = torch.ones(4, 3, 8, 8)
        >>> patch_covariance([flat], (3, 3), limit=4).abs().max().item()
        0.0
    """
    total, count, sums, products = 0, 0, None, None
    for batch in batches:
        batch = batch[: limit - total].double()
        patches = nn.functional.unfold(batch, kernel_size, stride=kernel_size).transpose(1, 2).flatten(0, 1)
        sums = patches.sum(0) if sums is None else sums + patches.sum(0)
        products = patches.T @ patches if products is None else products + patches.T @ patches
        total, count = total + len(batch), count + len(patches)
        if total >= limit:
            break
    if sums is None:
        raise ValueError("patch whitening got no images to estimate the patches' covariance from")
    mean = sums / count
    return products / count - torch.outer(mean, mean)


def whitening_filters(covariance: torch.Tensor, out_channels: int, kernel_shape: tuple[int, int, int],
                      eigenvalue_floor: float = EIGENVALUE_FLOOR) -> torch.Tensor:
    """The (out_channels, C, kh, kw) filters: the top ``out_channels / 2`` components, scaled to unit variance, and their negatives.

    Each component is divided by the square root of its eigenvalue plus ``eigenvalue_floor``.

        >>> filters = whitening_filters(torch.diag(torch.tensor([4.0, 1.0, 0.25, 9.0])).double(), 4, (1, 2, 2))
        >>> filters.flatten(1)[:2].abs()  # the strongest component (variance 9) first
        tensor([[0.0000, 0.0000, 0.0000, 0.3331],
                [0.4994, 0.0000, 0.0000, 0.0000]])
    """
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)  # ascending
    half = out_channels // 2
    top_values, top_vectors = eigenvalues.flip(0)[:half], eigenvectors.flip(1)[:, :half]
    filters = (top_vectors / (top_values.clamp(min=0) + eigenvalue_floor).sqrt()).T
    return torch.cat([filters, -filters]).float().reshape(out_channels, *kernel_shape)


@torch.no_grad()
def whiten_stem_(model: nn.Module, batches: Iterable[torch.Tensor], options: PatchWhiteningOptions) -> nn.Conv2d:
    """Set ``model``'s stem to the whitening filters of the images in ``batches`` (N, 3, H, W), in place.

    batches: normalized images as training sees them; the first ``options.images`` are used.
    The stem is frozen (``requires_grad=False``) unless ``options.trainable``. Returns the stem.

        >>> from fastcore_ops.training.models import build_model
        >>> model = build_model("cifar_resnet20", 10)
        >>> stem = whiten_stem_(model, [torch.randn(8, 3, 32, 32)], PatchWhiteningOptions(images=8))
        >>> stem.weight.requires_grad, torch.equal(stem.weight[:8], -stem.weight[8:])
        (False, True)
    """
    stem = find_stem(model)
    _check_stem(stem)
    covariance = patch_covariance(batches, stem.kernel_size, options.images)
    filters = whitening_filters(covariance, stem.out_channels, tuple(stem.weight.shape[1:]), options.eigenvalue_floor)
    stem.weight.copy_(filters.to(stem.weight.device))
    stem.weight.requires_grad_(options.trainable)
    return stem


def whiten_stem_from_samples(model: nn.Module, samples: list[tuple[str, int]], options: PatchWhiteningOptions,
                             **loader_settings) -> float:
    """:func:`whiten_stem_` from evenly spaced training ``samples`` (image files); the seconds it took.

    loader_settings: :func:`fastcore_ops.data.build_loader`'s keywords that read the images as
    training normalizes them, center-cropped at the training size. Every process reads the same
    images, so every rank starts with the same stem.
    """
    started = time.perf_counter()
    spaced = samples[:: max(1, len(samples) // options.images)][: options.images]  # every class, not the first few
    loader = build_loader(spaced, train=False, shard=Shard(rank=0, world_size=1), **loader_settings)
    try:
        stem = whiten_stem_(model, (images for images, _ in loader), options)
    finally:
        loader.close()
    log.info("patch whitening: %s from %d training images%s", stem, len(spaced), "" if options.trainable else ", frozen")
    return time.perf_counter() - started
