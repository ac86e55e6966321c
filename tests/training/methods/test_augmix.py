import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from fastcore_ops.data.transforms.augmix import AUGMIX_OPS, augmix_batch
from fastcore_ops.data.transforms.device_stage import IMAGENET_MEAN, IMAGENET_STD
from fastcore_ops.data.transforms.randaugment import MAX_SEVERITY, OPS, apply_ops
from fastcore_ops.training.methods import AugMix, AugMixOptions, TrainState
from fastcore_ops.training.methods.augmix import jensen_shannon


def augmix_by_definition(images, *, width, depth, severity, alpha, generator):
    """Hendrycks et al.'s Algorithm 1, one image at a time, drawing what augmix_batch draws in its order."""
    count = images.shape[0]
    draws = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    weights = draws.dirichlet([alpha] * width, size=count)
    keep = draws.beta(alpha, alpha, size=count)
    chains = []
    for _ in range(width):
        depths = torch.full((count,), depth) if depth else torch.randint(1, 4, (count,), generator=generator)
        rounds = []
        for _ in range(int(depths.max())):
            op = torch.randint(len(AUGMIX_OPS), (count,), generator=generator)
            magnitude = 0.1 + (severity - 0.1) * torch.rand(count, generator=generator, dtype=torch.float64)
            sign = torch.randint(2, (count,), generator=generator) * 2 - 1
            rounds.append((op, (sign * magnitude / MAX_SEVERITY).float()))
        chains.append((depths, rounds))
    out = torch.empty_like(images)
    for i in range(count):
        mixed = torch.zeros_like(images[i])
        for chain, (depths, rounds) in enumerate(chains):
            image = images[i:i + 1]
            for op, level in rounds[:int(depths[i])]:
                image = apply_ops(image, torch.tensor([OPS.index(AUGMIX_OPS[int(op[i])])]), level[i:i + 1])
            mixed += float(weights[i, chain]) * image[0]
        out[i] = float(keep[i]) * images[i] + (1 - float(keep[i])) * mixed
    return out


@pytest.mark.parametrize(("width", "depth"), [(3, 0), (2, 2), (1, 1)])
def test_augmix_matches_the_papers_algorithm_image_by_image(width, depth):
    images = torch.rand(6, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    settings = dict(width=width, depth=depth, severity=3.0, alpha=1.0)
    got = augmix_batch(images, **settings, generator=torch.Generator().manual_seed(4))
    expected = augmix_by_definition(images, **settings, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert got.min() >= 0 and got.max() <= 1 and not torch.equal(got, images)


def test_augmix_leaves_out_the_ops_that_overlap_the_test_corruptions():
    assert set(AUGMIX_OPS) <= set(OPS)
    assert not {"color", "contrast", "brightness", "sharpness"} & set(AUGMIX_OPS)


def test_jensen_shannon_is_the_entropy_of_the_mixture_minus_the_mean_entropy():
    generator = torch.Generator().manual_seed(0)
    logits = [torch.randn(5, 7, generator=generator) for _ in range(3)]
    probabilities = [view.softmax(dim=1) for view in logits]
    mixture = sum(probabilities) / 3

    def entropy(p):
        return -(p * p.log()).sum(dim=1)

    expected = (entropy(mixture) - sum(entropy(p) for p in probabilities) / 3).mean()
    torch.testing.assert_close(jensen_shannon(*logits), expected, rtol=1e-5, atol=1e-6)
    assert float(jensen_shannon(logits[0], logits[0], logits[0])) == pytest.approx(0.0, abs=1e-7)
    assert 0 < float(jensen_shannon(*logits)) <= math.log(3)


def normalized(pixels):
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (pixels - mean) / std


def make_state(images, labels):
    state = TrainState(model=None, optimizer=None, scaler=None, device=torch.device("cpu"), num_classes=3,
                       steps_per_epoch=1, total_steps=1)
    state.inputs, state.targets = images, labels
    return state


def test_without_the_consistency_loss_each_image_is_replaced_by_its_augmix():
    pixels = torch.rand(4, 3, 10, 10, generator=torch.Generator().manual_seed(1))
    state = make_state(normalized(pixels), torch.tensor([0, 1, 2, 0]))
    AugMix(AugMixOptions(), seed=3).on_after_dataloader(state)
    expected = augmix_batch(pixels, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(state.inputs, normalized(expected), rtol=1e-4, atol=1e-4)
    assert state.targets.tolist() == [0, 1, 2, 0]


def test_the_consistency_loss_adds_weight_times_js_of_the_clean_and_two_views():
    pixels = torch.rand(4, 3, 10, 10, generator=torch.Generator().manual_seed(1))
    clean = normalized(pixels)
    labels = torch.tensor([0, 1, 2, 0])
    state = make_state(clean, labels)
    method = AugMix(AugMixOptions(jsd_weight=12.0), seed=3)
    method.on_after_dataloader(state)
    assert state.inputs.shape == (12, 3, 10, 10) and torch.equal(state.inputs[:4], clean)
    assert not torch.allclose(state.inputs[4:8], state.inputs[8:])  # two different views
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(300, 3))
    state.outputs = model(state.inputs)
    method.on_before_loss(state)
    assert state.outputs.shape == (4, 3)
    state.loss = F.cross_entropy(state.outputs, labels)
    method.on_after_loss(state)
    logits = model(state.inputs)
    expected = F.cross_entropy(logits[:4], labels) + 12.0 * jensen_shannon(logits[:4], logits[4:8], logits[8:])
    torch.testing.assert_close(state.loss, expected)


def test_combinations_the_consistency_loss_cannot_take_are_refused():
    from fastcore_ops.training.config import MethodsConfig, TrainConfig, validate
    from fastcore_ops.training.methods import MixUpOptions

    config = TrainConfig(methods=MethodsConfig(augmix=AugMixOptions(jsd_weight=12.0), mixup=MixUpOptions()))
    with pytest.raises(ValueError, match="cannot be combined with methods.mixup"):
        validate(config)


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: AugMixOptions(width=0), ValueError, "width"),
    (lambda: AugMixOptions(severity=11), ValueError, "severity"),
    (lambda: AugMixOptions(alpha=0), ValueError, "alpha"),
    (lambda: AugMixOptions(jsd_weight=-1), ValueError, "jsd_weight"),
    (lambda: AugMix({"width": 3}), TypeError, "AugMixOptions"),
])
def test_bad_options_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()
