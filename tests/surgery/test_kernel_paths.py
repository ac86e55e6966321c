"""Operated models run their kernels through Triton (the interpreter here) and match the reference path."""

import copy

import torch

from fastcore_ops import apply_surgery
from fastcore_ops.kernels import backend
from tests.surgery.conftest import build, images


def test_operated_resnet_through_the_triton_kernels_matches_the_reference_path(monkeypatch):
    assert backend.INTERPRETING or torch.cuda.is_available()
    model = build("resnet18")
    # Chunks of 4 samples keep >= 4 values per channel even where ResNet's maps are 1x1: fewer
    # would make batch variances tiny, and the comparison a test of rounding amplified.
    apply_surgery(model, ["blurpool", ("ghost_batchnorm", {"ghost_batch_size": 4}), "channels_last"])
    twin = copy.deepcopy(model)
    # 16 px: every operated layer still runs its kernels, at a quarter of 32 px's interpreted work.
    x = images(8, size=16).contiguous(memory_format=torch.channels_last)

    out = model(x)  # training mode: ghost batch statistics, blur kernels, forward and backward
    out.square().mean().backward()
    with monkeypatch.context() as patch:
        patch.setattr(backend, "INTERPRETING", False)
        expected = twin(x)
        expected.square().mean().backward()

    # At the logits' scale: the reference's own rounding moves with the thread count (at one thread, 1 of 80 logits
    # moved by 1.2e-4 beside a largest of 1.8); a wrong kernel moves them by their own size.
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-3 * expected.abs().max().item())
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        # Rounding differences grow through 20 layers of backward: compare at each gradient's scale.
        scale = q.grad.abs().max().item()
        assert (p.grad - q.grad).abs().max().item() <= 1e-3 * scale, name
    for a, b in zip(model.buffers(), twin.buffers()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
