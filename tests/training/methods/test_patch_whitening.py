import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override, validate
from fastcore_ops.training.methods import PatchWhiteningOptions, whiten_stem_
from fastcore_ops.training.methods.patch_whitening import (EIGENVALUE_FLOOR, find_stem, patch_covariance,
                                                           whitening_filters)
from fastcore_ops.training.models import build_model
from fastcore_ops.training.recipes import get_recipe


def covariance_by_definition(images: np.ndarray, size: int) -> np.ndarray:
    """Every non-overlapping size x size patch of every image, one at a time, as a channel-major vector."""
    vectors = []
    for image in images:
        channels, height, width = image.shape
        for top in range(0, height - size + 1, size):
            for left in range(0, width - size + 1, size):
                vectors.append(image[:, top:top + size, left:left + size].reshape(-1))
    vectors = np.array(vectors, dtype=np.float64)
    return np.cov(vectors, rowvar=False, bias=True)


def correlated_images(count: int, size: int = 12, seed: int = 0) -> torch.Tensor:
    # Smooth images with correlated channels: patches whose components differ in variance.
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(count, 1, size + 2, size + 2, generator=generator)
    smooth = nn.functional.avg_pool2d(noise, 3, stride=1)
    return torch.cat([smooth, 0.5 * smooth + 0.1 * torch.randn(count, 1, size, size, generator=generator),
                      torch.randn(count, 1, size, size, generator=generator)], dim=1)


def test_the_covariance_is_that_of_every_tiled_patch():
    images = correlated_images(7, size=11)  # 11 px: the last row and column of 3 x 3 tiles fall off
    got = patch_covariance([images[:4], images[4:]], (3, 3), limit=7)
    torch.testing.assert_close(got, torch.from_numpy(covariance_by_definition(images.numpy(), 3)))


def test_only_the_first_images_up_to_the_limit_count():
    images = correlated_images(8)

    def batches():
        yield images[:4]
        yield images[4:]
        raise AssertionError("a batch past the limit was read")

    torch.testing.assert_close(patch_covariance(batches(), (3, 3), limit=6),
                               patch_covariance([images[:6]], (3, 3), limit=6))


def test_the_filters_whiten_the_patches_along_their_top_components():
    covariance = patch_covariance([correlated_images(32)], (3, 3), limit=32)
    filters = whitening_filters(covariance, 16, (3, 3, 3)).double().flatten(1)
    eigenvalues = torch.linalg.eigvalsh(covariance).flip(0)[:8]
    # Each of the first 8 filters sees its own component, at variance l / (l + floor), uncorrelated with the others.
    torch.testing.assert_close(filters[:8] @ covariance @ filters[:8].T,
                               torch.diag(eigenvalues / (eigenvalues + EIGENVALUE_FLOOR)), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(filters[8:], -filters[:8], rtol=0, atol=0)


def test_a_lower_eigenvalue_floor_leaves_the_faint_components_larger():
    covariance = patch_covariance([correlated_images(32)], (3, 3), limit=32)
    filters = {floor: whitening_filters(covariance, 16, (3, 3, 3), floor).double().flatten(1) for floor in (5e-4, 1e-2)}
    eigenvalues = torch.linalg.eigvalsh(covariance).flip(0)[:8]
    for floor, chosen in filters.items():
        torch.testing.assert_close(chosen[:8] @ covariance @ chosen[:8].T,
                                   torch.diag(eigenvalues / (eigenvalues + floor)), atol=1e-6, rtol=1e-5)
    assert (filters[5e-4].norm(dim=1) > filters[1e-2].norm(dim=1)).all()
    with pytest.raises(ValueError, match=r"eigenvalue_floor must be a number > 0, got 0"):
        PatchWhiteningOptions(eigenvalue_floor=0)


def test_the_stem_is_set_and_frozen_or_left_trainable():
    images = correlated_images(16, size=32)
    expected = whitening_filters(patch_covariance([images], (3, 3), 16), 16, (3, 3, 3))
    for trainable in (False, True):
        model = build_model("cifar_resnet20", 10)
        others = {name: p.clone() for name, p in model.named_parameters() if name != "conv1.weight"}
        stem = whiten_stem_(model, [images], PatchWhiteningOptions(images=16, trainable=trainable))
        assert stem is model.conv1 and stem.weight.requires_grad == trainable
        torch.testing.assert_close(stem.weight, expected, rtol=0, atol=0)
        assert all(torch.equal(p, others[name]) for name, p in model.named_parameters() if name != "conv1.weight")


def test_a_stem_it_cannot_whiten_is_named_and_left_as_it_was():
    odd = nn.Sequential(nn.Conv2d(3, 15, 3))
    too_wide = nn.Sequential(nn.Conv2d(3, 20, 1))  # 3 numbers per patch: at most 6 filters
    for model in (odd, too_wide):
        before = model[0].weight.clone()
        with pytest.raises(ValueError, match="must be even and at most twice"):
            whiten_stem_(model, [torch.randn(2, 3, 8, 8)], PatchWhiteningOptions())
        assert torch.equal(model[0].weight, before) and model[0].weight.requires_grad
    with pytest.raises(ValueError, match="found none in Sequential"):
        find_stem(nn.Sequential(nn.Conv2d(1, 4, 3)))
    with pytest.raises(ValueError, match="got no images"):
        whiten_stem_(build_model("cifar_resnet20", 10), [], PatchWhiteningOptions())


def test_options_and_configuration_are_checked():
    with pytest.raises(TypeError, match="trainable"):
        PatchWhiteningOptions(trainable=1)
    config = override(get_recipe("cifar_baseline"), ["methods.patch_whitening={'images': 64}"])
    assert config.methods.patch_whitening == PatchWhiteningOptions(images=64)
    language = dataclasses.replace(get_recipe("gpt_baseline"),
                                   methods=dataclasses.replace(get_recipe("gpt_baseline").methods,
                                                               patch_whitening=PatchWhiteningOptions()))
    with pytest.raises(ValueError, match="methods.patch_whitening"):
        validate(language)


def test_a_run_starts_from_the_whitened_stem_keeps_it_frozen_and_counts_its_time(micro_cifar):
    config = override(get_recipe("cifar_baseline"), ["schedule.epochs=1", "data.batch_size=4", "data.num_workers=0",
                                                     "methods.patch_whitening={}"])
    trainer = build_trainer(config, data=micro_cifar, out=None, device=torch.device("cpu"), progress=False)
    stem = trainer.model.conv1
    assert not stem.weight.requires_grad
    assert all(p is not stem.weight for group in trainer.state.optimizer.param_groups for p in group["params"])
    whitened = stem.weight.clone()
    assert trainer.task.setup_seconds > 0 and trainer.train_seconds == trainer.task.setup_seconds
    result = trainer.fit()
    assert torch.equal(stem.weight, whitened)
    assert result.train_seconds > trainer.task.setup_seconds
    assert result.phase_seconds["methods"] >= trainer.task.setup_seconds
