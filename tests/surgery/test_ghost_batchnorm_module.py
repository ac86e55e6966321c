"""GhostBatchNorm against BatchNorm applied chunk by chunk, in every mode BatchNorm has."""

import pytest
import torch
from torch import nn

from fastcore_ops.surgery.ghost_batchnorm import GhostBatchNorm

pytestmark = pytest.mark.usefixtures("reference_kernels")


def _chunked_batchnorm(norm: nn.BatchNorm2d, x: torch.Tensor, ghost_batch_size: int) -> torch.Tensor:
    chunks = x.split(ghost_batch_size)
    momentum = norm.momentum / len(chunks)
    return torch.cat([
        nn.functional.batch_norm(c, norm.running_mean, norm.running_var, norm.weight, norm.bias, True, momentum, norm.eps)
        for c in chunks
    ])


@pytest.mark.parametrize("shape", [(10, 6, 5, 5), (10, 6), (10, 6, 7)], ids=str)
def test_training_matches_batchnorm_per_chunk_and_eval_matches_batchnorm(shape):
    torch.manual_seed(0)
    norm = nn.BatchNorm2d(6) if len(shape) == 4 else nn.BatchNorm1d(6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    reference = type(norm)(6)
    reference.load_state_dict(norm.state_dict())
    ghost = GhostBatchNorm(norm, ghost_batch_size=4)
    x = torch.randn(shape) * 3 + 1

    out = ghost(x)
    expected = _chunked_batchnorm(reference, x if x.dim() != 3 else x.unsqueeze(-1), 4)
    torch.testing.assert_close(out, expected.reshape(out.shape))
    torch.testing.assert_close(norm.running_mean, reference.running_mean)
    torch.testing.assert_close(norm.running_var, reference.running_var)
    assert int(norm.num_batches_tracked) == 1

    ghost.eval()
    reference.eval()
    torch.testing.assert_close(ghost(x), reference(x))


def test_cumulative_average_when_momentum_is_none():
    norm = nn.BatchNorm2d(3, momentum=None)
    ghost = GhostBatchNorm(norm, ghost_batch_size=8)  # one chunk: plain batch norm
    reference = nn.BatchNorm2d(3, momentum=None)
    for step in range(3):
        x = torch.randn(8, 3, 4, 4) + step
        ghost(x)
        reference(x)
    torch.testing.assert_close(norm.running_mean, reference.running_mean)
    torch.testing.assert_close(norm.running_var, reference.running_var)


def test_without_running_statistics_uses_batch_statistics_in_eval():
    norm = nn.BatchNorm2d(3, track_running_stats=False, affine=False)
    ghost = GhostBatchNorm(norm, ghost_batch_size=4).eval()
    x = torch.randn(4, 3, 5, 5)
    torch.testing.assert_close(ghost(x), nn.functional.batch_norm(x, None, None, training=True))


def test_state_dict_keys_are_batchnorms():
    norm = nn.BatchNorm2d(3)
    assert GhostBatchNorm(norm, 4).state_dict().keys() == norm.state_dict().keys()
