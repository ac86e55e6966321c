import pytest
import torch

from fastcore_ops.training.methods import MixUp, MixUpOptions, mixup_batch
from fastcore_ops.training.methods.mixup import sample_mixing_weight

NUM_CLASSES = 5


def labelled_batch(n=6):
    # Sample i is the constant image i + 1, so each mixed pixel reveals which partner it used.
    images = (torch.arange(n, dtype=torch.float64) + 1).view(n, 1, 1, 1).expand(n, 2, 3, 3).contiguous()
    labels = torch.tensor([i % NUM_CLASSES for i in range(n)])
    return images, labels


def recovered_partners(images, mixed, lam):
    own = images[:, 0, 0, 0]
    partner_value = (mixed[:, 0, 0, 0] - lam * own) / (1 - lam)
    return (partner_value.round() - 1).long()


def test_images_and_targets_are_mixed_with_one_lam_and_one_permutation():
    images, labels = labelled_batch()
    mixed, targets, lam = mixup_batch(images, labels, NUM_CLASSES, alpha=1.0,
                                      generator=torch.Generator().manual_seed(3))
    assert 0 < lam < 1
    partners = recovered_partners(images, mixed, lam)
    assert sorted(partners.tolist()) == list(range(6))
    expected_images = lam * images + (1 - lam) * images[partners]
    torch.testing.assert_close(mixed, expected_images)
    expected_targets = torch.zeros(6, NUM_CLASSES, dtype=torch.float64)
    for i in range(6):
        expected_targets[i, labels[i]] += lam
        expected_targets[i, labels[partners[i]]] += 1 - lam
    torch.testing.assert_close(targets.double(), expected_targets)
    assert targets.dtype == torch.float32


def test_soft_targets_are_mixed_like_the_images():
    images, _ = labelled_batch()
    soft = torch.softmax(torch.randn(6, NUM_CLASSES, generator=torch.Generator().manual_seed(0)), dim=1)
    mixed, targets, lam = mixup_batch(images, soft, NUM_CLASSES, alpha=0.4,
                                      generator=torch.Generator().manual_seed(5))
    partners = recovered_partners(images, mixed, lam)
    torch.testing.assert_close(targets, lam * soft + (1 - lam) * soft[partners])


def test_same_generator_state_gives_same_batch():
    images, labels = labelled_batch()
    first = mixup_batch(images, labels, NUM_CLASSES, alpha=0.2, generator=torch.Generator().manual_seed(7))
    second = mixup_batch(images, labels, NUM_CLASSES, alpha=0.2, generator=torch.Generator().manual_seed(7))
    other = mixup_batch(images, labels, NUM_CLASSES, alpha=0.2, generator=torch.Generator().manual_seed(8))
    torch.testing.assert_close(first[0], second[0])
    assert first[2] == second[2] != other[2]


@pytest.mark.parametrize("alpha", [0.2, 1.0, 4.0])
def test_lam_follows_beta_alpha_alpha(alpha):
    generator = torch.Generator().manual_seed(0)
    draws = torch.tensor([sample_mixing_weight(alpha, generator) for _ in range(4000)], dtype=torch.float64)
    # Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)).
    assert abs(draws.mean().item() - 0.5) < 0.02
    assert abs(draws.var().item() - 1 / (4 * (2 * alpha + 1))) < 0.01


@pytest.mark.parametrize("alpha, error", [
    (0, ValueError), (-0.5, ValueError), ("1", TypeError), (True, TypeError), (None, TypeError)])
def test_bad_alpha_is_rejected(alpha, error):
    with pytest.raises(error, match="alpha"):
        MixUpOptions(alpha=alpha)
    images, labels = labelled_batch()
    with pytest.raises(error, match="alpha"):
        mixup_batch(images, labels, NUM_CLASSES, alpha=alpha, generator=torch.Generator())


def test_bad_seed_and_batches_are_rejected():
    with pytest.raises(ValueError, match="seed"):
        MixUp(alpha=0.2, seed=-1)
    images, labels = labelled_batch()
    generator = torch.Generator()
    with pytest.raises(ValueError, match="targets"):
        mixup_batch(images, labels[:3], NUM_CLASSES, alpha=0.2, generator=generator)
    with pytest.raises(ValueError, match="targets"):
        mixup_batch(images, torch.rand(6, NUM_CLASSES + 1), NUM_CLASSES, alpha=0.2, generator=generator)
    with pytest.raises(TypeError, match="images"):
        mixup_batch(images.to(torch.uint8), labels, NUM_CLASSES, alpha=0.2, generator=generator)
    with pytest.raises(ValueError, match="generator"):
        MixUp(alpha=0.2).load_state_dict({"rng": torch.Generator().get_state()})
