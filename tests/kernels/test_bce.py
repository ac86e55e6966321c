"""Fused BCE-with-logits against its PyTorch reference: values, gradients, targets, stability, errors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastcore_ops.kernels import bce_with_logits, init_bce_bias_
from fastcore_ops.kernels.bce import bce_with_logits_reference
from tests.conftest import FLOAT_DTYPES, TOLERANCES


def _logits(n, c, dtype, device, scale=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, c, generator=g) * scale).to(device=device, dtype=dtype).requires_grad_()


def _target(kind, n, c, device, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "index":
        return torch.randint(0, c, (n,), generator=g).to(device)
    # Rows of probabilities, as MixUp of two one-hot targets produces.
    return torch.softmax(torch.randn(n, c, generator=g), dim=1).to(device)


def _compare(logits, target, smoothing=0.0, grad_scale=1.0):
    loss = bce_with_logits(logits, target, label_smoothing=smoothing)
    (loss * grad_scale).backward()
    compute = torch.float64 if logits.dtype == torch.float64 else torch.float32
    ref_logits = logits.detach().to(compute).requires_grad_()
    ref = bce_with_logits_reference(ref_logits, target, label_smoothing=smoothing)
    (ref * grad_scale).backward()
    assert loss.dtype == compute
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits.grad, ref_logits.grad.to(logits.dtype), **TOLERANCES[logits.dtype])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("kind", ["index", "probabilities"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("n,c", [(1, 1), (7, 10), (5, 1000), (3, 5003)], ids=str)
def test_matches_reference(n, c, smoothing, kind, dtype, device):
    _compare(_logits(n, c, dtype, device), _target(kind, n, c, device), smoothing)


def test_backward_scales_by_grad_output(device):
    _compare(_logits(4, 33, torch.float32, device), _target("index", 4, 33, device), 0.1, grad_scale=-2.5)


def test_int32_labels_and_non_contiguous_logits(device):
    logits = _logits(40, 6, torch.float32, device).detach().t().requires_grad_()  # (6, 40), column stride 40
    _compare(logits, _target("index", 6, 40, device).int())


def test_loss_is_summed_over_classes_and_divided_by_batch(device):
    logits = torch.zeros(4, 10, device=device)
    labels = torch.zeros(4, dtype=torch.long, device=device)
    # Every element contributes log(2) at logit 0, whatever its target: 10 classes per sample.
    torch.testing.assert_close(bce_with_logits(logits, labels).item(), 10 * math.log(2))


def test_stable_for_huge_logits(device):
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 50.0]], device=device, requires_grad=True)
    labels = torch.tensor([1, 1], device=device)
    loss = bce_with_logits(logits, labels)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    # Wrong by 1e4 twice, right twice, plus log(2) and ~50 for the last two logits: / 2 samples.
    torch.testing.assert_close(loss.item(), (2e4 + math.log(2) + 50.0) / 2, rtol=1e-6, atol=1e-3)
    _compare(logits.detach().clone().requires_grad_(), labels)


def test_gradcheck_fp64(device):
    logits = _logits(3, 5, torch.float64, device)
    labels = _target("index", 3, 5, device)
    assert torch.autograd.gradcheck(lambda x: bce_with_logits(x, labels, label_smoothing=0.1), (logits,))
    probabilities = _target("probabilities", 3, 5, device).double()
    assert torch.autograd.gradcheck(lambda x: bce_with_logits(x, probabilities), (logits,))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 3000), smoothing=st.floats(0.0, 1.0), index=st.booleans())
def test_random_shapes(n, c, smoothing, index):
    _compare(_logits(n, c, torch.float32, "cpu", seed=c), _target("index" if index else "p", n, c, "cpu"), smoothing)


def test_empty_batch_gives_zero_loss(device):
    logits = torch.zeros(0, 10, device=device, requires_grad=True)
    loss = bce_with_logits(logits, torch.zeros(0, dtype=torch.long, device=device))
    assert loss.item() == 0.0
    loss.backward()
    assert logits.grad.shape == (0, 10)


@pytest.mark.parametrize(
    "logits,target,smoothing,error,match",
    [
        (torch.zeros(4), torch.zeros(4, dtype=torch.long), 0.0, ValueError, "input must have 2 dimensions"),
        (torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, dtype=torch.long), 0.0, TypeError, "floating"),
        (torch.zeros(4, 3), torch.zeros(5, dtype=torch.long), 0.0, ValueError, r"shape \(N,\) = \(4,\)"),
        (torch.zeros(4, 3), torch.zeros(4, 2), 0.0, ValueError, "must have input's shape"),
        (torch.zeros(4, 3), torch.zeros(4, dtype=torch.bool), 0.0, TypeError, "int64 class indices"),
        (torch.zeros(4, 3), torch.tensor([0, 1, 3, 0]), 0.0, ValueError, r"outside \[0, 3\)"),
        (torch.zeros(4, 3), torch.tensor([0, -1, 2, 0]), 0.0, ValueError, r"outside \[0, 3\)"),
        (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long), 1.5, ValueError,
         r"label_smoothing must be a number in \[0, 1\], got 1.5"),
        (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long), "0.1", TypeError,
         r"label_smoothing must be a number in \[0, 1\], got str '0.1'"),
        (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long), True, TypeError,
         "label_smoothing must be a number.*got bool"),
        (torch.zeros(4, 3), torch.zeros(4, 3, requires_grad=True), 0.0, ValueError, "target.detach"),
        (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long, device="meta"), 0.0, ValueError, "one device"),
    ],
)
def test_bad_input_errors(logits, target, smoothing, error, match):
    with pytest.raises(error, match=match):
        bce_with_logits(logits, target, label_smoothing=smoothing)


def test_the_kernel_gives_an_out_of_range_labels_sample_a_nan_loss(device):
    # On a GPU no host check runs (it would make the host wait): the kernel itself flags the sample.
    logits = torch.zeros(3, 4, device=device)
    for bad in (4, -1):
        loss, grad = torch.ops.fastcore_ops.bce_with_logits(logits, torch.tensor([0, bad, 1], device=device), 0.0)
        assert loss.isnan()
        torch.testing.assert_close(grad[0], torch.tensor([-0.5, 0.5, 0.5, 0.5], device=device) / 3)  # row 0 intact


def test_torch_compile_and_export_trace_through_the_custom_op(device):
    logits = _logits(6, 20, torch.float32, device)
    labels = _target("index", 6, 20, device)
    compiled = torch.compile(lambda x, t: bce_with_logits(x, t, label_smoothing=0.1), backend="aot_eager")
    loss = compiled(logits, labels)
    loss.backward()
    torch.testing.assert_close(loss, bce_with_logits_reference(logits.detach(), labels, label_smoothing=0.1))

    class Loss(torch.nn.Module):
        def forward(self, x, t):
            return bce_with_logits(x, t)

    probabilities = _target("probabilities", 6, 20, device)
    exported = torch.export.export(Loss(), (logits.detach(), probabilities))
    assert "fastcore_ops.bce_with_logits" in str(exported.graph)
    torch.testing.assert_close(
        exported.module()(logits.detach(), probabilities), bce_with_logits_reference(logits.detach(), probabilities)
    )


def test_custom_op_passes_torch_library_opcheck(device):
    logits = _logits(3, 7, torch.float32, device)
    torch.library.opcheck(torch.ops.fastcore_ops.bce_with_logits, (logits, _target("index", 3, 7, device), 0.1))


def test_init_bce_bias_sets_minus_log_classes():
    head = init_bce_bias_(torch.nn.Linear(8, 1000))
    torch.testing.assert_close(head.bias, torch.full((1000,), -math.log(1000)))
    # At that prior, sigmoid is ~1/C for every class.
    torch.testing.assert_close(torch.sigmoid(head.bias[0]).item(), 1 / 1001, rtol=1e-4, atol=0)
    with pytest.raises(ValueError, match="no bias"):
        init_bce_bias_(torch.nn.Linear(8, 10, bias=False))
    with pytest.raises(TypeError, match="nn.Linear"):
        init_bce_bias_(torch.nn.Conv2d(3, 3, 1))
