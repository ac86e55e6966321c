"""Both classification losses against their definitions, with label smoothing, on hard and mixed targets."""

import math

import pytest
import torch

from fastcore_ops.training.losses import classification_loss

LOGITS = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.5, -0.5]])
LABELS = torch.tensor([0, 2])
MIXED = torch.tensor([[0.7, 0.3, 0.0], [0.0, 0.4, 0.6]])  # what MixUp makes of two labels


def smoothed(probabilities, smoothing):
    return probabilities * (1 - smoothing) + smoothing / probabilities.shape[1]


def cross_entropy_by_hand(logits, probabilities):
    # -sum_c t_c log softmax(z)_c per sample, mean over the batch.
    total = 0.0
    for z, t in zip(logits.tolist(), probabilities.tolist()):
        log_normalizer = math.log(sum(math.exp(v) for v in z))
        total -= sum(tc * (zc - log_normalizer) for zc, tc in zip(z, t))
    return total / len(logits)


def binary_cross_entropy_by_hand(logits, probabilities):
    # -sum_c [t log sigmoid(z) + (1 - t) log(1 - sigmoid(z))] per sample, summed, divided by the batch size.
    total = 0.0
    for z, t in zip(logits.tolist(), probabilities.tolist()):
        for zc, tc in zip(z, t):
            p = 1 / (1 + math.exp(-zc))
            total -= tc * math.log(p) + (1 - tc) * math.log(1 - p)
    return total / len(logits)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("kind, by_hand", [("ce", cross_entropy_by_hand), ("bce", binary_cross_entropy_by_hand)])
def test_losses_follow_their_definitions_with_smoothing(kind, by_hand, smoothing):
    loss_fn = classification_loss(kind, label_smoothing=smoothing)
    one_hot = torch.nn.functional.one_hot(LABELS, 3).float()
    assert loss_fn(LOGITS, LABELS).item() == pytest.approx(by_hand(LOGITS, smoothed(one_hot, smoothing)), rel=1e-5)
    assert loss_fn(LOGITS, MIXED).item() == pytest.approx(by_hand(LOGITS, smoothed(MIXED, smoothing)), rel=1e-5)


def test_an_unknown_loss_is_refused():
    with pytest.raises(ValueError, match="loss must be 'ce' or 'bce'"):
        classification_loss("hinge")
